"""What a stage is, the registry of them, and the manifest rule that makes a finished stage skip itself.

A `Stage` declares its name, the file its manifest vouches for (`output`), the stages whose outputs it
reads (`inputs`: the same iteration's; `previous`: the previous iteration's), how it runs (`compute`,
which writes the outputs and returns `write_manifest(...)`) and how it describes a manifest in one line
(`describe`). Each stage module registers one (`register`); `mappa.stages` imports them all, so the
registry is complete for anyone who imports the package.

A stage is complete when its manifest exists, its output exists, and the manifest matches the config
hash, the code version and the hashes of its inputs (`expected_manifest`); `execute` skips a complete
stage and records `started` / `finished` / `skipped` events. The Prefect tasks key their cache on the
same expected manifest (`mappa.flows.caching`), so Prefect and the artifacts agree on what is done.

Not covered: running stages in order (the flows do), and where folders are (`mappa.storage.run`).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mappa.cluster.lost_worker import worker_lost_error
from mappa.config import RunConfig
from mappa.core.errors import error_line
from mappa.storage.outage import StoreOutageError, adopt_outage
from mappa.storage.run import MANIFEST, TIME_FORMAT, Run, code_version, source_hash


@dataclass(frozen=True)
class Stage:
    name: str
    output: str | None
    """The artifact whose hash the manifest records (None: the stage publishes, it writes no artifact)."""
    compute: Callable[[Run, int], dict[str, Any]]
    describe: Callable[[dict[str, Any]], str]
    inputs: tuple[str, ...] = ()
    """Stages of the same iteration whose outputs it reads (an input of iteration -1 does not exist)."""
    previous: tuple[str, ...] = ()
    """Stages of the previous iteration whose outputs it reads (`previous_<name>` in the manifest)."""
    previous_when: Callable[[RunConfig], tuple[str, ...]] | None = None
    """Stages of the previous iteration it reads in some runs only (the score stage: the learning coach's
    head, where `coach.learn` is on); in the others its manifest is as if they did not exist."""
    config_of: Callable[[Run], RunConfig] | None = None
    """The config the stage computes with, where it is not the run's (a re-scoring's coach): its hash is
    the manifest's `config_hash`."""


REGISTRY: dict[str, Stage] = {}


def register(stage: Stage) -> Stage:
    if stage.name in REGISTRY:
        raise ValueError(f"two stages are named `{stage.name}`")
    REGISTRY[stage.name] = stage
    return stage


def get_stage(name: str) -> Stage:
    if name not in REGISTRY:
        raise KeyError(f"no stage `{name}`; the stages are {sorted(REGISTRY)}")
    return REGISTRY[name]


def output_parts(run: Run, iteration: int, name: str) -> tuple[str, ...]:
    """Where stage `name` of `iteration` writes its output."""
    output = get_stage(name).output
    if output is None:
        raise ValueError(f"stage `{name}` writes no artifact")
    return run.parts(iteration, name, output)


def output_hash(run: Run, iteration: int, name: str) -> str | None:
    parts = output_parts(run, iteration, name)
    if not run.store.exists(*parts):
        return None
    return hashlib.sha256(run.store.read_bytes(*parts)).hexdigest()


def expected_manifest(run: Run, iteration: int, name: str) -> dict[str, Any]:
    """What a complete manifest of stage `name` must hold (also the Prefect cache key's source)."""
    stage = get_stage(name)
    inputs = {source: output_hash(run, iteration, source) for source in stage.inputs if iteration >= 0}
    if iteration > 0:
        previous = (*stage.previous, *(stage.previous_when(run.config) if stage.previous_when else ()))
        inputs |= {f"previous_{source}": output_hash(run, iteration - 1, source) for source in previous}
    return {
        "stage": name,
        "iteration": iteration,
        "config_hash": (stage.config_of(run) if stage.config_of else run.config).config_hash(),
        "code_version": code_version(),
        "inputs": inputs,
    }


def stage_complete(run: Run, iteration: int, name: str) -> bool:
    if not run.has_manifest(iteration, name) or not run.store.exists(*output_parts(run, iteration, name)):
        return False
    found = run.read_manifest(iteration, name)
    return all(found.get(key) == value for key, value in expected_manifest(run, iteration, name).items())


def write_manifest(
    run: Run, iteration: int, name: str, rows: int, timings: dict[str, float], **extra: Any
) -> dict[str, Any]:
    """The stage's manifest, written last: its presence (and match) marks the stage complete."""
    manifest = {
        **expected_manifest(run, iteration, name),
        "output": run.store.url(*output_parts(run, iteration, name)),
        "output_sha256": output_hash(run, iteration, name),
        "source_hash": source_hash(),
        "rows": rows,
        "timings": timings,
        "finished_at": time.strftime(TIME_FORMAT, time.gmtime()),
        **extra,
    }
    run.store.write_json(manifest, *run.parts(iteration, name, MANIFEST))
    return manifest


def execute(run: Run, iteration: int, name: str) -> dict[str, Any]:
    """Run stage `name` of `iteration` unless it is complete; its manifest either way."""
    stage = get_stage(name)
    if stage.output is not None and stage_complete(run, iteration, name):
        run.record_event(iteration, name, "skipped")
        return {**run.read_manifest(iteration, name), "skipped": True}
    run.record_event(iteration, name, "started")
    started = time.perf_counter()
    try:
        manifest = stage.compute(run, iteration)
    except Exception as exc:
        lost = worker_lost_error(exc, run.config)  # a dead Ray worker: which agent, which node
        adopt_outage(exc)  # a worker waited out the store: the `failed` event below tries it once
        with contextlib.suppress(StoreOutageError):  # the store is down: the stage's own error says more
            run.record_event(iteration, name, "failed", error=error_line(lost or exc))
        if lost is not None:
            raise lost from exc
        raise
    run.record_event(iteration, name, "finished", seconds=round(time.perf_counter() - started, 3))
    return manifest


def describe_stage(name: str, iteration: int, manifest: dict[str, Any]) -> str:
    """One progress line: `iter 3 rollout    32 trajectories, ... (12.3 s)`."""
    seconds = manifest.get("timings", {}).get("total_s", 0.0)
    skipped = " skipped (already complete)" if manifest.get("skipped") else ""
    return f"iter {iteration} {name:<10}{skipped} {get_stage(name).describe(manifest)} ({seconds:.1f} s)"


def completed_iterations(run: Run) -> int:
    """How many leading iterations have a complete update stage."""
    done = 0
    while stage_complete(run, done, "update"):
        done += 1
    return done
