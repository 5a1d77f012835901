"""One vLLM engine for all agents of a run (`engine.shared: true`), for a single small machine.

The engine is a named Ray actor (`mappa-<run id>-shared-engine`) holding one vLLM engine and, at any time,
one agent's weights. An agent's worker generates through a `SharedEngineClient`: each call names the
weights it needs (the agent and a token that changes with every update); when the engine holds other
weights, the worker sends its full weights through the object store and the engine loads them in place
(vLLM's `reload_weights`, about 0.3 s for SmolLM2) before generating. Agents roll out one after another,
so a rollout swaps a few times per iteration, and the machine holds one engine copy and one KV cache
instead of one per agent.

Not covered: agents of different architectures (one engine serves one model shape: the config requires
the same `model` for every agent), several ranks per agent, LoRA adapters inside vLLM (merged weights
are loaded, as for a per-agent engine).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import ray
import torch

from mappa.cluster.memory import release_freed_memory
from mappa.config import EngineConfig
from mappa.inference.engine import Engine, Generation, SamplingParams
from mappa.inference.precision import resolve_bf16
from mappa.inference.vllm_engine import VLLMEngine
from mappa.models.prepare import resolve_model

SHARED_ENGINE = "shared-engine"


class SharedEngine:
    """The actor: a vLLM engine and the key of the weights it holds."""

    def __init__(self, model: str, engine: dict[str, Any], seed: int, threads: int | None = None) -> None:
        self.engine = vllm_engine_for(resolve_model(model), EngineConfig(**engine), seed, threads)
        self.loaded: str | None = None

    def generate(
        self, key: str, weights: Mapping[str, torch.Tensor] | None, prompts: list[str], params: dict[str, Any]
    ) -> list[dict[str, Any]] | None:
        """Generate with the weights `key` names; None when it holds others and `weights` is None (the
        caller then sends them)."""
        if key != self.loaded:
            if weights is None:
                return None
            self.engine.update_weights(weights)
            del weights
            release_freed_memory()  # the received copy, once vLLM holds the weights
            self.loaded = key
        sampling = SamplingParams.from_fields(params)
        return [dataclasses.asdict(g) for g in self.engine.generate(prompts, sampling)]


def shared_engine(
    run_id: str, model: str, engine: dict[str, Any], seed: int, num_gpus: float, threads: int | None
) -> Any:
    """The run's shared engine actor, created on first use and found by name afterwards. `threads`: its
    CPU threads (`cluster.torch_threads`; default every core)."""
    actor = ray.remote(SharedEngine).options(
        name=f"mappa-{run_id}-{SHARED_ENGINE}",
        get_if_exists=True,
        lifetime="detached",
        max_concurrency=1,
        num_cpus=0,
        num_gpus=num_gpus,
    )
    return actor.remote(model, engine, seed, threads)


class SharedEngineClient(Engine):
    """An agent worker's view of the shared engine: `update_weights` only marks its weights as new; they
    travel when the engine next generates for this agent and holds something else."""

    def __init__(self, actor: Any, agent: str, weights: Callable[[], Mapping[str, torch.Tensor]]) -> None:
        self.actor, self.agent, self.weights = actor, agent, weights
        self.key = f"{agent}/{uuid.uuid4().hex}"

    def generate(self, prompts: list[str], params: SamplingParams) -> list[Generation]:
        sampling = params.to_fields()
        answer = ray.get(self.actor.generate.remote(self.key, None, prompts, sampling))
        if answer is None:
            weights = {name: tensor.detach().cpu() for name, tensor in self.weights().items()}
            answer = ray.get(self.actor.generate.remote(self.key, weights, prompts, sampling))
            del weights
            release_freed_memory()
        return [Generation.from_fields(fields) for fields in answer]

    def weights_changed(self) -> None:
        """The agent's weights are new: the next generation sends them (`self.weights()` then)."""
        self.key = f"{self.agent}/{uuid.uuid4().hex}"

    def update_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        self.weights_changed()


def vllm_engine_for(path: str, config: EngineConfig, seed: int, cpu_threads: int | None = None) -> VLLMEngine:
    """A vLLM engine for the model at `path` with the run's engine settings (`engine.type: vllm`)."""
    on_gpu = torch.cuda.is_available()
    return VLLMEngine(
        path,
        dtype="auto" if on_gpu else ("bfloat16" if resolve_bf16(config.bf16_autocast) else "float32"),
        tensor_parallel_size=config.tensor_parallel_size,
        gpu_memory_utilization=config.gpu_memory_utilization,
        max_model_len=config.max_model_len,
        enforce_eager=config.enforce_eager,
        seed=seed,
        cpu_kv_cache_gb=config.cpu_kv_cache_gb,
        cpu_threads=cpu_threads,
    )
