"""A long-lived model worker (a Ray actor): one agent's weights, its engine and its trainer.

The HF engine shares the trainer's policy module, so a weight update is visible to the next generation at
once; a vLLM engine (`engine.type: vllm`) holds its own copy and gets the full weights in place after
every update and checkpoint load (`_push_weights`), or, with `engine.shared`, the run's one engine loads
them when this agent next generates (`mappa.cluster.shared_engine`). A frozen agent or the local coach
holds the policy only: no reference model, no optimizer. Everything crossing the actor boundary is plain
lists and dicts, except weights on their way to a shared engine.

Several ranks of one agent (`cluster.trainer_ranks`) are several workers, each told its place in the
process group; they get the same calls in the same order (`mappa.cluster.rank_group`).

With `engine.num_engines` > 1 (vLLM), each of the agent's first `num_engines` ranks holds an engine, and
`RankGroup` splits every generation call among them.

Not covered: engines on actors of their own, apart from the trainer ranks.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from mappa.cluster.memory import release_freed_memory
from mappa.cluster.shared_engine import SharedEngineClient, vllm_engine_for
from mappa.config import AlgoConfig, EngineConfig, LoraConfig, TrainerConfig
from mappa.core.types import TrainSample
from mappa.inference.engine import SamplingParams
from mappa.storage.checkpoints import OPTIMIZER_STATE, WRITTEN_LAST
from mappa.storage.outage import StoreOutageError
from mappa.storage.run import Run
from mappa.storage.store import ArtifactStore


class StoreUnreachableError(RuntimeError):
    """A worker's node cannot reach the run's artifact store."""


_OUTAGE_BUDGETS: dict[tuple[str, str], float] = {}
"""The `storage.outage_budget_s` of each (root, run id) this process has reached. Before its first contact
a worker waits out nothing: the driver has just reached the store, so a worker that cannot is more likely
on a node set up without the endpoint or credentials than seeing an outage."""


def worker_store(root: str, run_id: str, seat: str) -> ArtifactStore:
    """The run's store as this worker's node sees it: a StoreUnreachableError naming the node and the fix
    when the run is not there (a local root on another machine than the driver's) or the store answers
    with an error at first contact (no credentials on this node); later, an outage is waited out for the
    run's `storage.outage_budget_s` (`StoreOutageError` past it)."""
    import ray

    node = ray.util.get_node_ip_address() if ray.is_initialized() else "this machine"
    budget = _OUTAGE_BUDGETS.get((root, run_id))
    store = ArtifactStore(root, outage_budget_s=0.0 if budget is None else budget)
    try:
        found = store.exists(run_id, "config.yaml")
        if found and budget is None and not store.is_local:
            store.outage_budget_s = Run.open(root, run_id).config.storage.outage_budget_s
            _OUTAGE_BUDGETS[(root, run_id)] = store.outage_budget_s
    except Exception as exc:  # noqa: BLE001 - fsspec backends raise their own (botocore's, aiohttp's, ...)
        if budget is not None and isinstance(exc, StoreOutageError):
            raise  # reached before: an outage, waited out for the run's budget
        cause = exc.__cause__ if isinstance(exc, StoreOutageError) and exc.__cause__ else exc
        raise StoreUnreachableError(
            f"the worker of agent {seat} on node {node} cannot reach the artifact store {store.url(run_id)}: "
            f"{type(cause).__name__}: {cause}. Give every node the store's credentials (AWS_* in the "
            "environment `ray start` runs in, or an instance role)"
        ) from exc
    if not found:
        where = "a folder on the driver's machine" if store.is_local else "a store this node sees empty"
        raise StoreUnreachableError(
            f"the worker of agent {seat} on node {node} does not see run {run_id} at {store.url(run_id)} "
            f"({where}). On a cluster whose nodes share no disk, keep runs where every node reaches them "
            "(storage.root: s3://bucket/runs) or mount the folder at the same path on every node"
        )
    return store


class ModelWorker:
    def __init__(
        self,
        name: str,
        model: str,
        trainable: bool,
        trainer: dict[str, Any],
        algo: dict[str, Any],
        engine: dict[str, Any],
        seed: int = 0,
        torch_threads: int | None = None,
        lora: dict[str, Any] | None = None,
        process_group: dict[str, str] | None = None,
        shared_engine: Any = None,
    ) -> None:
        """`lora`: the agent's adapter settings (`LoraConfig`), if any. `process_group`: RANK, WORLD_SIZE,
        MASTER_ADDR, ... for one rank of an agent's trainer group (`mappa.cluster.rank_group`), set before
        the trainer joins it. `shared_engine`: the run's shared vLLM engine actor (`engine.shared`)."""
        os.environ.update(process_group or {})
        self.shared_engine = shared_engine
        torch.set_num_threads(torch_threads or os.cpu_count() or 1)
        self.name = name
        self._init_args = (model, trainable, trainer, algo, engine, seed, lora)
        self._load(*self._init_args)

    def _load(self, model, trainable, trainer, algo, engine, seed, lora) -> None:
        # transformers loads here, in the worker: the driver that creates workers never needs it (seconds
        # of start-up saved per `mappa` command).
        from transformers import AutoTokenizer

        from mappa.inference.hf import HFEngine
        from mappa.models.prepare import resolve_model
        from mappa.trainer.backend import make_trainer

        path = resolve_model(model)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        engine_config = EngineConfig(**engine)
        adapter = LoraConfig(**lora) if lora else None
        pad = self.tokenizer.pad_token_id
        self.trainer = make_trainer(
            path, TrainerConfig(**trainer), AlgoConfig(**algo), pad, trainable, seed, adapter
        )
        if self.shared_engine is not None:
            self.engine = SharedEngineClient(self.shared_engine, self.name, self.trainer.full_state_dict)
        elif engine_config.type == "vllm":
            if hasattr(self, "engine"):  # a reset: the running engine takes the base weights back
                self._push_weights()
            elif int(os.environ.get("RANK", "0")) >= engine_config.num_engines:
                self.engine = None  # engines on the first ranks only (vLLM needs no lockstep)
            else:
                self.engine = vllm_engine_for(path, engine_config, seed, torch.get_num_threads())
        else:
            self.engine = HFEngine(
                self.trainer.policy, self.tokenizer, engine_config.batch_size, engine_config.bf16_autocast
            )
        self.weights_iteration = 0  # finished updates whose weights this worker serves; -1: unsaved changes

    def reset(self) -> None:
        """Back to the base model with a fresh optimizer (iteration 0 after an interrupted update)."""
        self._load(*self._init_args)

    def ready(self) -> dict[str, Any]:
        params = self.trainer.parameter_count()
        return {"name": self.name, "parameters": params, "weights_iteration": self.weights_iteration}

    def chat(
        self, chats: list[list[dict[str, str]]], params: dict[str, Any]
    ) -> list[tuple[str, dict, float]]:
        """Apply the chat template and generate; returns (prompt text, generation fields, seconds) each.
        A rank without an engine (beyond a vLLM agent's `num_engines`) answers nothing."""
        if self.engine is None:
            return []
        sampling = SamplingParams.from_fields(params)
        prompts = [
            self.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats
        ]
        started = time.perf_counter()
        generations = self.engine.generate(prompts, sampling)
        per_item = (time.perf_counter() - started) / max(len(prompts), 1)
        return [(p, dataclasses.asdict(g), per_item) for p, g in zip(prompts, generations)]

    def chat_next_token_logprobs(
        self,
        chats: list[list[dict[str, str]]],
        assistant_prefix: str,
        candidates: list[str],
        positions: int = 1,
    ) -> list[list[list[float]]]:
        """Logprobs of single-token candidates at the last `positions` positions of `assistant_prefix` in the
        assistant's turn (see `HFEngine.next_token_logprobs`)."""
        prompts = [
            self.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
            + assistant_prefix
            for c in chats
        ]
        return self.engine.next_token_logprobs(prompts, candidates, positions)

    def chat_grouped_next_token_logprobs(
        self, groups: list[list[list[dict[str, str]]]], candidates: list[str]
    ) -> list[list[list[float]]]:
        """Next-token logprobs of single-token candidates at the start of the assistant's answer, for
        groups of chats sharing a prefix (see `HFEngine.grouped_next_token_logprobs`)."""
        template = self.tokenizer.apply_chat_template
        prompts = [[template(c, tokenize=False, add_generation_prompt=True) for c in g] for g in groups]
        return self.engine.grouped_next_token_logprobs(prompts, candidates)

    def chat_grouped_answer_features(
        self, groups: list[list[list[dict[str, str]]]]
    ) -> list[list[list[float]]]:
        """What the model reads its answer's first token from, for groups of chats as in
        `chat_grouped_next_token_logprobs` (see `HFEngine.grouped_answer_features`): a learning coach's
        head reads these."""
        template = self.tokenizer.apply_chat_template
        prompts = [[template(c, tokenize=False, add_generation_prompt=True) for c in g] for g in groups]
        return self.engine.grouped_answer_features(prompts)

    def answer_direction(self, candidates: list[str]) -> tuple[list[float], float]:
        """The readout of two single-token answers' log-odds from those features
        (`HFEngine.answer_direction`): a learning coach's head before it has learned anything."""
        return self.engine.answer_direction(candidates)

    def logprobs(self, prompts: list[list[int]], responses: list[list[int]], which: str) -> list[list[float]]:
        """Per-token logprobs of `responses` under the policy or the reference. Keeps the freed activation
        memory: the advantages stage asks for both passes, then `release_memory` once."""
        return self.trainer.logprobs(prompts, responses, which)

    def release_memory(self) -> None:
        """Let go of the reference model and hand freed memory back to the OS at the end of a stage's
        work on this worker."""
        self.trainer.release_reference()
        release_freed_memory()

    def train(self, samples: list[TrainSample], seed: int) -> dict[str, float]:
        self.weights_iteration = -1  # changed weights, not yet saved: a retry must reload a checkpoint
        metrics = self.trainer.train(samples, seed=seed)
        self._push_weights()
        release_freed_memory()
        return metrics

    def save_checkpoint(
        self, root: str, parts: list[str], iteration: int, position: dict[str, Any] | None = None
    ) -> str:
        """Write weights, optimizer, LR schedule and RNG state under the store, with the data `position`;
        marks this worker at `iteration + 1`."""
        self.weights_iteration = iteration + 1
        store = worker_store(root, parts[0], self.name)
        with tempfile.TemporaryDirectory(prefix="mappa-ckpt-") as tmp:
            self.trainer.save_checkpoint(Path(tmp), extra={"iteration": iteration, **(position or {})})
            self.tokenizer.save_pretrained(tmp)
            # the weights, then the full state's marker, last: a copy cut short never looks full
            return store.put_folder(Path(tmp), *parts, move=True, last=WRITTEN_LAST)

    def load_checkpoint(self, root: str, parts: list[str], weights_only: bool = False) -> int:
        """Load a checkpoint's full state (or its weights alone, its optimizer state neither copied nor read:
        then this worker serves weights no optimizer state matches, marked -1, so training reloads a full
        state first)."""
        store = worker_store(root, parts[0], self.name)
        with tempfile.TemporaryDirectory(prefix="mappa-ckpt-") as tmp:
            store.get_folder(Path(tmp), *parts, leave_out=OPTIMIZER_STATE if weights_only else ())
            extra = self.trainer.load_checkpoint(Path(tmp), weights_only=weights_only)
        self._push_weights()
        self.weights_iteration = -1 if weights_only else int(extra["iteration"]) + 1
        return self.weights_iteration

    def _push_weights(self) -> None:
        """Hand the trainer's new weights to the engine, unless the engine serves the trainer's module itself
        (the HF engine on CPU; under ZeRO-3 its forward gathers the partitioned weights as training does)."""
        if getattr(self.engine, "model", None) is self.trainer.policy:
            return
        if isinstance(self.engine, SharedEngineClient):
            self.engine.weights_changed()  # the shared engine asks for them when this agent next generates
            return
        weights = self.trainer.full_state_dict()  # every rank: ZeRO-3 gathers collectively
        if self.engine is not None:
            self.engine.update_weights(weights)

    def weights_checksum(self) -> float:
        """A cheap fingerprint of the policy weights (tests check that updates change them)."""
        with torch.no_grad():
            return float(sum(p.double().abs().sum() for p in self.trainer.full_state_dict().values()))
