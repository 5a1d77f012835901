"""A run's model workers in this process, for one problem at a time (`mappa ask`): no Ray, no Prefect.

Each seat gets the `ModelWorker` an evaluation gives it (`mappa.cluster.model_worker`: the same tokenizer,
chat template and HF engine on the same policy module), loaded with the weights the evaluate stage loads: a
checkpoint's weights alone (a LoRA agent's adapter on its base model, unmerged), the base model for `-1`,
or an exported agent's folder (`mappa export`). `InProcessHandle` lets the rollout's and the score stage's
code call such a worker as they call a Ray handle (`worker.chat.remote(...)`, awaited).

Generation always uses the HF engine, greedy as the evaluate stage is: a run that generated with vLLM is
read with the same weights but other kernels, so a rare token may differ from its evaluations. Not
covered: DeepSpeed (an agent's weights are read whole) and several ranks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mappa.config import CoachConfig
from mappa.storage.run import Run
from mappa.team.checkpoint import BASE

COACH_SEAT = "coach"


class InProcessHandle:
    """A worker in this process, called as a Ray actor handle is: `handle.method.remote(*args)` returns an
    awaitable of the method's result (the call runs when it is awaited)."""

    def __init__(self, worker: Any) -> None:
        self._worker = worker

    def __getattr__(self, name: str) -> _Method:
        return _Method(getattr(self._worker, name))


class _Method:
    def __init__(self, method) -> None:
        self._method = method

    async def _call(self, args, kwargs):
        return self._method(*args, **kwargs)

    def remote(self, *args: Any, **kwargs: Any):
        return self._call(args, kwargs)


def _worker_settings(run: Run) -> dict[str, Any]:
    """The keyword arguments of a `ModelWorker` as an evaluation's, on the torch trainer and HF engine."""
    config = run.config
    return {
        "trainer": {**config.trainer.model_dump(), "type": "torch"},
        "algo": config.algo.model_dump(),
        "engine": {**config.engine.model_dump(), "type": "hf", "shared": False, "num_engines": 1},
        "seed": config.seed,
        "torch_threads": config.cluster.torch_threads,
    }


def seat_worker(run: Run, seat: str, iteration: int, exported: Path | None = None) -> InProcessHandle:
    """Seat `seat`'s worker serving checkpoint `iteration` of `run` (-1: the base model), or, with
    `exported`, the seat's folder of that export (a frozen seat: its base model either way)."""
    from mappa.cluster.model_worker import ModelWorker

    agent = run.config.agents[seat]
    model, lora = agent.model, agent.lora if agent.trainable else None
    if exported is not None and agent.trainable:
        model, lora = str(Path(exported).resolve() / seat), None  # merged weights: a plain model
    # A LoRA agent's adapter is attached by a trainable worker only; it never takes an optimizer step here.
    lora_fields = lora.model_dump() if lora else None
    worker = ModelWorker(seat, model, lora is not None, lora=lora_fields, **_worker_settings(run))
    if exported is None and agent.trainable and iteration != BASE:
        parts = list(run.checkpoint_parts(seat, iteration))
        worker.load_checkpoint(run.config.storage.root, parts, weights_only=True)
    return InProcessHandle(worker)


def coach_worker(run: Run, coach: CoachConfig) -> InProcessHandle:
    """A local coach's model, frozen, on the HF engine (as the score stage's `coach` worker)."""
    from mappa.cluster.model_worker import ModelWorker

    return InProcessHandle(ModelWorker(COACH_SEAT, coach.model, False, **_worker_settings(run)))
