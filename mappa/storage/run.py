"""One run's folder: the artifact layout of DESIGN.md and each stage's manifest.

    {root}/{run_id}/config.yaml
    {root}/{run_id}/iter-0003/{rollout,score,advantages,update}/...   one folder per stage
    {root}/{run_id}/iter-0003/<stage>/_manifest.json                   written last: the stage is complete
    {root}/{run_id}/checkpoints/{agent}/iter-0003/                     weights, optimizer state, RNG
    {root}/{run_id}/events/<time>-iter-0003-<stage>-<kind>.json          every start, finish and skip

A stage is complete when its manifest exists and matches the config hash, the code version and the hashes
of its inputs; a complete stage is skipped on a re-run (`execute_stage`). The events are the run's history:
which stage ran when, on which host and process, and how often (a killed stage shows a `started` without
its `finished`). Not covered: the Prefect side of caching (mappa.tasks.stages keys it on the same manifest).
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

import mappa
from mappa.config import RunConfig, dump_config, validate_config
from mappa.storage.store import ArtifactStore

STAGE_OUTPUTS = {
    "rollout": "trajectories.parquet",
    "score": "scores.parquet",
    "advantages": "experiences.parquet",
    "update": "metrics.json",
}
STAGE_INPUTS = {
    "rollout": (),
    "score": ("rollout",),
    "advantages": ("rollout", "score"),
    "update": ("advantages",),
}


def code_version() -> str:
    """The mappa release a stage was computed with: a finished stage is redone after an upgrade.

    Local edits of an installed checkout keep the version (a researcher changing a log line must not lose
    a day of finished stages); each manifest also records `source_hash` so such runs stay traceable.
    """
    return mappa.__version__


@cache
def source_hash() -> str:
    """A hash of mappa's source files (recorded in every manifest, not checked)."""
    digest = hashlib.sha256()
    package = Path(mappa.__file__).parent
    for path in sorted(package.rglob("*")):
        if path.suffix in {".py", ".txt"} and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(package)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def iteration_name(iteration: int) -> str:
    return f"iter-{iteration:04d}"


@dataclass
class Run:
    """A run id under a store, with its frozen config."""

    store: ArtifactStore
    run_id: str
    config: RunConfig

    @classmethod
    def create(cls, config: RunConfig, run_id: str) -> Run:
        """Open a run for writing; a run id that exists must have been made with the same config."""
        run = cls(ArtifactStore(config.storage.root), run_id, config)
        if run.store.exists(run_id, "config.yaml"):
            stored = run.load_stored_config()
            if stored.config_hash() != config.config_hash():
                raise ValueError(
                    f"run {run_id} under {config.storage.root} was started with a different config; "
                    f"resume it with `mappa resume {run_id}` or pick a new --run-id"
                )
        run.store.write_text(dump_config(config), run_id, "config.yaml")  # records a changed iteration count
        return run

    @classmethod
    def open(cls, root: str, run_id: str) -> Run:
        """A finished or interrupted run, with its stored config (its storage root set to `root`)."""
        store = ArtifactStore(root)
        if not store.exists(run_id, "config.yaml"):
            raise FileNotFoundError(
                f"no run {run_id} under {root} (no config.yaml); check --root and the run id"
            )
        return cls(store, run_id, _stored_config(store, run_id, root))

    def load_stored_config(self) -> RunConfig:
        return _stored_config(self.store, self.run_id)

    def parts(self, iteration: int, stage: str, name: str) -> tuple[str, ...]:
        return (self.run_id, iteration_name(iteration), stage, name)

    def output_parts(self, iteration: int, stage: str) -> tuple[str, ...]:
        return self.parts(iteration, stage, STAGE_OUTPUTS[stage])

    def checkpoint_parts(self, agent: str, iteration: int) -> tuple[str, ...]:
        return (self.run_id, "checkpoints", agent, iteration_name(iteration))

    def expected_manifest(self, iteration: int, stage: str) -> dict[str, Any]:
        inputs = {}
        for source in STAGE_INPUTS[stage]:
            inputs[source] = self.output_hash(iteration, source)
        if stage == "rollout" and iteration > 0:
            inputs["previous_update"] = self.output_hash(iteration - 1, "update")
        return {
            "stage": stage,
            "iteration": iteration,
            "config_hash": self.config.config_hash(),
            "code_version": code_version(),
            "inputs": inputs,
        }

    def output_hash(self, iteration: int, stage: str) -> str | None:
        parts = self.output_parts(iteration, stage)
        if not self.store.exists(*parts):
            return None
        return hashlib.sha256(self.store.read_bytes(*parts)).hexdigest()

    def stage_complete(self, iteration: int, stage: str) -> bool:
        parts = self.parts(iteration, stage, "_manifest.json")
        if not self.store.exists(*parts) or not self.store.exists(*self.output_parts(iteration, stage)):
            return False
        found = self.store.read_json(*parts)
        expected = self.expected_manifest(iteration, stage)
        return all(found.get(key) == value for key, value in expected.items())

    def write_manifest(
        self, iteration: int, stage: str, rows: int, timings: dict[str, float], **extra: Any
    ) -> dict:
        manifest = {
            **self.expected_manifest(iteration, stage),
            "output": self.store.url(*self.output_parts(iteration, stage)),
            "output_sha256": self.output_hash(iteration, stage),
            "source_hash": source_hash(),
            "rows": rows,
            "timings": timings,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **extra,
        }
        self.store.write_json(manifest, *self.parts(iteration, stage, "_manifest.json"))
        return manifest

    def read_manifest(self, iteration: int, stage: str) -> dict[str, Any]:
        return self.store.read_json(*self.parts(iteration, stage, "_manifest.json"))

    def execute_stage(self, iteration: int, stage: str, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run `body` (which writes the stage's outputs and manifest) unless the stage is complete."""
        if self.stage_complete(iteration, stage):
            self.record_event(iteration, stage, "skipped")
            return {**self.read_manifest(iteration, stage), "skipped": True}
        self.record_event(iteration, stage, "started")
        started = time.perf_counter()
        manifest = body()
        self.record_event(iteration, stage, "finished", seconds=round(time.perf_counter() - started, 3))
        return manifest

    def record_event(self, iteration: int, stage: str, kind: str, **info: Any) -> None:
        """One small file per event: appends are not atomic on object stores, new objects are."""
        now = time.time_ns()
        event = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now / 1e9)),
            "iteration": iteration,
            "stage": stage,
            "kind": kind,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **info,
        }
        name = f"{now:020d}-{iteration_name(iteration)}-{stage}-{kind}.json"
        self.store.write_json(event, self.run_id, "events", name)

    def events(self) -> list[dict[str, Any]]:
        """The run's events, oldest first."""
        return [
            self.store.read_json(self.run_id, "events", name)
            for name in self.store.list(self.run_id, "events")
        ]

    def completed_iterations(self) -> int:
        """How many leading iterations have a complete update stage."""
        done = 0
        while self.stage_complete(done, "update"):
            done += 1
        return done


def _stored_config(store: ArtifactStore, run_id: str, root: str | None = None) -> RunConfig:
    data = yaml.safe_load(store.read_text(run_id, "config.yaml"))
    if root is not None:
        data.setdefault("storage", {})["root"] = root
    return validate_config(data, source=store.url(run_id, "config.yaml"))
