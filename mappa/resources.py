"""What a run needs of the machine, and whether the machine has it: disk at the storage root for the kept
checkpoints and each iteration's artifacts, and memory for the agents' workers, engines and coach.

`check_resources(config)` runs before any model loads (the CLI's pre-flight and the train flow's first
step): a local root with too little free space, or a machine with too little available memory, stops the
run with one line that says what is needed, what is free and which settings would fit. `check_disk_for
_checkpoint` runs again before each agent's update, so a disk that filled up during a run fails that
stage cleanly (finished stages kept) instead of half-writing a checkpoint.

The figures are estimates from the models' parameter counts (read from their safetensors headers, no
weights loaded) and per-part costs measured on the 2-core CPU machine (docs/pitfalls.md): fp32 weights
4 bytes per parameter, a frozen reference copy 4, gradients 4, AdamW's two moments 8; a worker process's
runtime (torch, transformers, Ray) about 0.7 GB; vLLM's CPU engine about 3.5 GB beside its KV cache. With
them the CPU demo's estimate is within 10% of its measured peak (README).

Not covered: GPU memory (a run with `cluster.num_gpus` > 0 is not checked for memory), the nodes of a Ray
cluster (checked where the driver runs only when there is no cluster), free space on object stores.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from mappa.cluster.seat_host import colocated
from mappa.config import ConfigError, RunConfig, apply_overrides, validate_config

GB = 1e9
RUNTIME_BYTES = 0.7 * GB  # a model worker process (one per agent, or one for all): torch, transformers, Ray's
DRIVER_BYTES = 2.0 * GB  # the driver, Ray's own processes and Prefect's server
VLLM_CPU_BYTES = 3.5 * GB  # vLLM's CPU engine beside its weights and KV cache
BYTES_PER_ACTION_TOKEN = 48  # an action's artifacts per token: ids, logprobs, KL, returns, advantages


class ResourceError(RuntimeError):
    """The machine lacks the disk or memory a run needs; the message says what fits."""


@dataclass(frozen=True)
class Need:
    """An estimate in bytes, with the parts it adds up from (for the message)."""

    total: float
    parts: tuple[str, ...]


def model_shapes(model: str) -> dict[str, list[int]] | None:
    """Every tensor's shape in a local HF folder, from its safetensors headers (nothing loaded); None
    where the model is no local folder of safetensors (a hub id)."""
    folder = Path(model)
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files:
        return None
    shapes: dict[str, list[int]] = {}
    for file in files:
        with file.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        shapes |= {name: entry["shape"] for name, entry in header.items() if name != "__metadata__"}
    return shapes


def parameter_count(shapes: dict[str, list[int]]) -> int:
    return sum(math.prod(shape) for shape in shapes.values())


def adapter_parameter_count(shapes: dict[str, list[int]], rank: int, targets: list[str] | str) -> int:
    """Parameters of a LoRA adapter of `rank` on the model's linear layers (`targets`: module names, or
    "all-linear": every 2-D weight but the embeddings and the output head)."""
    total = 0
    for name, shape in shapes.items():
        if len(shape) != 2 or not name.endswith(".weight") or "embed" in name or "lm_head" in name:
            continue
        module = name.rsplit(".", 2)[-2] if "." in name else name
        if targets == "all-linear" or module in targets:
            total += rank * (shape[0] + shape[1])
    return total


def vocabulary_size(shapes: dict[str, list[int]]) -> int:
    """Rows of the input embedding: the width of every logits row a training pass holds."""
    return max((shape[0] for name, shape in shapes.items() if "embed" in name and len(shape) == 2), default=0)


@dataclass(frozen=True)
class AgentSize:
    """What one agent weighs: its model's parameters, the ones it trains (all, an adapter's, or none for a
    frozen agent) and its vocabulary."""

    name: str
    parameters: int
    trained: int
    lora: bool
    vocabulary: int


def agent_sizes(config: RunConfig) -> list[AgentSize]:
    """Every agent whose model is a local folder (others cannot be estimated and are left out)."""
    from mappa.models.prepare import resolve_model

    sizes = []
    for name, agent in config.agents.items():
        shapes = model_shapes(resolve_model(agent.model))
        if shapes is None:
            continue
        parameters = parameter_count(shapes)
        trained = parameters if agent.trainable else 0
        lora = bool(agent.trainable and agent.lora)
        if lora:
            trained = adapter_parameter_count(shapes, agent.lora.rank, agent.lora.target_modules)
        sizes.append(AgentSize(name, parameters, trained, lora, vocabulary_size(shapes)))
    return sizes


def state_bytes(size: AgentSize, deepspeed: bool) -> float:
    """One full checkpoint: the weights (a LoRA agent: its adapter) and AdamW's two moments, fp32 (DeepSpeed
    adds its own fp32 master copy)."""
    return size.trained * (16 if deepspeed else 12)


def longest_action(config: RunConfig) -> int:
    """The most tokens any seat may generate in one action (`rollout.max_new_tokens` or a seat's own)."""
    limits = [agent.max_new_tokens for agent in config.agents.values() if agent.max_new_tokens]
    return max([config.rollout.max_new_tokens, *limits])


def disk_need(config: RunConfig, sizes: list[AgentSize]) -> Need:
    """Bytes a run writes at its peak: per trainable agent `keep_last` full states plus the one being
    written before the oldest goes, the weights kept every `keep_weights_every` iterations, and the
    artifacts of its iterations (rollout, scores, experiences, evaluations)."""
    keep = config.checkpoint
    deepspeed = config.trainer.type == "deepspeed"
    trained = [s for s in sizes if s.trained]
    states = sum(state_bytes(s, deepspeed) for s in trained) * (keep.keep_last + 1)
    kept_weights = config.iterations // keep.keep_weights_every if keep.keep_weights_every else 0
    weights = sum(4 * s.trained for s in trained) * kept_weights
    actions = config.rollout.problems_per_iteration * config.rollout.samples_per_problem * len(config.agents)
    tokens = 4 * longest_action(config)  # a prompt carries the upstream agents' answers
    artifacts = config.iterations * actions * 2 * tokens * BYTES_PER_ACTION_TOKEN  # with turns, evaluations
    margin = keep.min_free_gb * GB
    parts = (
        f"checkpoints {states / GB:.1f} GB ({len(trained)} trainable agent(s) x (checkpoint.keep_last "
        f"{keep.keep_last} + 1 being written) full states)",
        *([f"kept weights {weights / GB:.1f} GB"] if weights else []),
        f"artifacts {artifacts / GB:.2f} GB",
        f"checkpoint.min_free_gb {keep.min_free_gb:g}",
    )
    return Need(states + weights + artifacts + margin, parts)


def memory_need(config: RunConfig, sizes: list[AgentSize]) -> Need:
    """Peak bytes of the run's processes on one machine. Between stages each agent's worker holds its
    weights and, if it trains, its AdamW moments; one agent at a time adds a stage's working memory (its
    reference copy for the reference pass, or its gradients and a micro-batch's activations in the
    update), and a local coach's model lives through the score stage only (`mappa.stages.score`), so the
    peak adds the larger of the two to the engines and the driver with Ray and Prefect."""
    parts, total = [], DRIVER_BYTES
    seq = 4 * longest_action(config)
    working = 0.0
    hosted = colocated(config)  # the agents' workers in one process: one runtime for all
    if hosted:
        total += RUNTIME_BYTES
        parts.append(f"the agents' worker process {RUNTIME_BYTES / GB:.1f} GB")
    for size in sizes:
        agent = (0 if hosted else RUNTIME_BYTES) + 4 * size.parameters + 8 * size.trained
        if size.trained:
            activations = 3 * config.trainer.micro_batch_size * seq * 4 * size.vocabulary  # logits dominate
            reference = 0 if size.lora else 4 * size.parameters
            working = max(working, max(reference, 4 * size.trained) + activations)
        total += agent
        parts.append(f"{size.name} {agent / GB:.1f} GB")
    engine = config.engine
    if engine.type == "vllm" and sizes:
        engines = 1 if engine.shared else len(sizes) * engine.num_engines
        each = VLLM_CPU_BYTES + engine.cpu_kv_cache_gb * GB + 2 * max(s.parameters for s in sizes)
        total += engines * each
        parts.append(f"{engines} vLLM engine(s) {engines * each / GB:.1f} GB")
    coach = 0.0
    if config.coach.runs_local_model:
        from mappa.models.prepare import resolve_model

        shapes = model_shapes(resolve_model(config.coach.model))
        coach = RUNTIME_BYTES + 4 * (parameter_count(shapes) if shapes else 0)
    total += max(working, coach)
    parts.append(f"one agent's update {working / GB:.1f} GB or the local coach {coach / GB:.1f} GB")
    parts.append(f"driver, Ray and Prefect {DRIVER_BYTES / GB:.1f} GB")
    return Need(total, tuple(parts))


def free_disk_bytes(root: str) -> float | None:
    """Free bytes of the file system a local root is on (its nearest existing folder); None for an object
    store (no such limit)."""
    if "://" in root and not root.startswith("file://"):
        return None
    path = Path(root.removeprefix("file://")).expanduser().resolve()
    while not path.exists():
        path = path.parent
    return float(shutil.disk_usage(path).free)


def available_memory_bytes() -> float:
    """Memory the machine can give a new run now (Linux's MemAvailable)."""
    import psutil

    return float(psutil.virtual_memory().available)


def memory_checked(config: RunConfig) -> bool:
    """Whether this machine hosts the run's workers (no Ray cluster, no GPUs): only then is memory checked."""
    return not (config.cluster.address or os.environ.get("RAY_ADDRESS") or config.cluster.num_gpus > 0)


def check_resources(config: RunConfig, written_bytes: float = 0.0, check_disk: bool = True) -> None:
    """Stop a run, before any model loads, whose storage root lacks the space or whose machine lacks the
    memory; `written_bytes`: the checkpoints a resumed run already holds (part of the peak). Without
    `check_disk` (a finished run, which writes no checkpoint) memory only."""
    sizes = agent_sizes(config)
    free = free_disk_bytes(config.storage.root) if check_disk else None
    if free is not None:
        need = disk_need(config, sizes)
        if need.total - written_bytes > free:
            raise ResourceError(
                f"storage root {config.storage.root} has {free / GB:.1f} GB free, but this run needs about "
                f"{(need.total - written_bytes) / GB:.1f} GB ({'; '.join(need.parts)}): free space or point "
                f"storage.root elsewhere{_what_fits(config, lambda c: _disk_fits(c, free + written_bytes))}"
            )
    if memory_checked(config):
        available = available_memory_bytes()
        need = memory_need(config, sizes)
        if need.total > available:
            raise ResourceError(
                f"this machine has {available / GB:.1f} GB of memory available, but the run needs about "
                f"{need.total / GB:.1f} GB ({'; '.join(need.parts)}): stop other work"
                f"{_what_fits(config, lambda c: memory_need(c, agent_sizes(c)).total <= available)}"
            )


def _disk_fits(config: RunConfig, free: float) -> bool:
    return disk_need(config, agent_sizes(config)).total <= free


def _what_fits(config: RunConfig, fits) -> str:
    """`, or run with --set a=b --set c=d` for the first of the usual savings that fits, else ``."""
    seats = [name for name, agent in config.agents.items() if agent.trainable and not agent.lora]
    lora = [f"agents.{seat}.lora={{rank: 16}}" for seat in seats]
    choices = [
        ["checkpoint.keep_last=1", "checkpoint.keep_weights_every=0"],
        ["engine.type=hf", "engine.shared=false"],
        lora,
        ["engine.type=hf", "engine.shared=false", *lora],
    ]
    for overrides in choices:
        if not overrides:
            continue
        try:
            changed = validate_config(apply_overrides(config.model_dump(mode="json"), overrides))
        except ConfigError:
            continue
        if changed != config and fits(changed):
            return ", or run with " + " ".join(f"--set {o}" for o in overrides)
    return ""


def check_disk_for_checkpoint(config: RunConfig, agent: str, expected_bytes: float) -> None:
    """Before an agent's update: refuse to start writing a checkpoint the root has no room for."""
    root, margin = config.storage.root, config.checkpoint.min_free_gb
    free = free_disk_bytes(root)
    if free is None or free >= expected_bytes + margin * GB:
        return
    raise ResourceError(
        f"storage root {root} has {free / GB:.2f} GB free, too little to write agent {agent}'s checkpoint "
        f"(about {expected_bytes / GB:.2f} GB, plus checkpoint.min_free_gb {margin:g}); nothing of it was "
        "written. Free space (or lower checkpoint.keep_last), then `mappa resume` the run"
    )
