"""One run's folder: where a run's config, stage artifacts, checkpoints and events live.

    {root}/{run_id}/config.yaml
    {root}/{run_id}/iter-0003/<stage>/...                              one folder per stage
    {root}/{run_id}/iter-0003/<stage>/_manifest.json                   written last: the stage is complete
    {root}/{run_id}/base/evaluate/...                                  the initial weights' evaluation
    {root}/{run_id}/checkpoints/{agent}/iter-0003/                     weights, optimizer state, RNG
    {root}/{run_id}/events/<time>-iter-0003-<stage>-<kind>.json          every start, finish and skip

The events are the run's history: which stage ran when, on which host and process, and how often (a
killed stage shows a `started` without its `finished`). Not covered: which stages exist, what they read
and write, and when a stage is complete: `mappa.stages` (its registry and `mappa.stages.stage`).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import re
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

import mappa
from mappa.config import RunConfig, dump_config, validate_config
from mappa.storage.outage import StoreOutageError
from mappa.storage.store import ArtifactStore

TRAINING = ("rollout", "score", "advantages", "update")
"""The stages of a training iteration, in order (each iteration then publishes its `report`)."""
OUTPUTS = {
    "rollout": "trajectories.parquet",
    "score": "scores.parquet",
    "coach-update": "head.json",  # the learning coach's head (`coach.learn`): not a stage of every run
    "advantages": "experiences.parquet",
    "update": "metrics.json",
}
"""The file each training stage writes in its folder (`mappa.stages` registers its stages with these), so
the read side of a run (`mappa.reporting.run_view`) finds them without the stages."""
MANIFEST = "_manifest.json"  # a stage folder's manifest, written last (mappa.stages.stage)
LOCK = "_lock.json"  # in the run's folder while a flow drives the run

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""How a run writes times (UTC; strings of it sort as the times do): events, manifests, the lock."""


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


RUN_ID_RULE = "letters, digits, '-', '_' and '.', not starting with '.', at most 128 characters"
_RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def validate_run_id(run_id: str) -> str:
    """`run_id` if it follows `RUN_ID_RULE` (so a run's folder stays inside the storage root), else a
    ValueError naming the rule."""
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} is not allowed: use {RUN_ID_RULE}")
    return run_id


def iteration_name(iteration: int) -> str:
    return f"iter-{iteration:04d}"


def iteration_label(iteration: int) -> str:
    """The folder of an iteration: `iter-000K`, or `base` for -1 (the initial weights, evaluated)."""
    if iteration < -1:
        raise ValueError(f"iteration {iteration} does not exist; use -1 (base model) or 0, 1, ...")
    return "base" if iteration == -1 else iteration_name(iteration)


@dataclass
class Run:
    """A run id under a store, with its frozen config."""

    store: ArtifactStore
    run_id: str
    config: RunConfig

    @classmethod
    def create(cls, config: RunConfig, run_id: str) -> Run:
        """Open a run for writing; a run id that exists must have been made with the same config."""
        cls.existing(config, run_id)
        run = cls(ArtifactStore(config.storage.root, config.storage.outage_budget_s), run_id, config)
        run.store.write_text(dump_config(config), run_id, "config.yaml")  # records a changed iteration count
        return run

    @classmethod
    def existing(cls, config: RunConfig, run_id: str) -> Run | None:
        """The stored run `run_id` under the config's root, None if there is none; a ValueError if it was
        started with another config (what `mappa train --run-id` checks before anything starts)."""
        validate_run_id(run_id)
        store = ArtifactStore(config.storage.root, config.storage.outage_budget_s)
        if not store.exists(run_id, "config.yaml"):
            return None
        run = cls(store, run_id, _stored_config(store, run_id))
        if run.config.config_hash() != config.config_hash():
            raise ValueError(
                f"run {run_id} under {store.url()} was started with a different config; "
                f"resume it with `mappa resume {run_id}` or pick a new --run-id"
            )
        return run

    @classmethod
    def open(cls, root: str, run_id: str) -> Run:
        """A finished or interrupted run, with its stored config (its storage root set to `root`; its store
        waits out outages for the run's `storage.outage_budget_s` once the config is read)."""
        validate_run_id(run_id)
        store = ArtifactStore(root)
        if not store.exists(run_id, "config.yaml"):
            raise FileNotFoundError(_no_run(store, root, run_id))
        config = _stored_config(store, run_id, root)
        store.outage_budget_s = config.storage.outage_budget_s
        return cls(store, run_id, config)

    def parts(self, iteration: int, stage: str, name: str) -> tuple[str, ...]:
        return (self.run_id, iteration_label(iteration), stage, name)

    def output(self, iteration: int, stage: str) -> tuple[str, ...]:
        """Where training stage `stage` of `iteration` writes its output (`OUTPUTS`)."""
        return self.parts(iteration, stage, OUTPUTS[stage])

    def checkpoint_parts(self, agent: str, iteration: int) -> tuple[str, ...]:
        return (self.run_id, "checkpoints", agent, iteration_name(iteration))

    def has_manifest(self, iteration: int, stage: str) -> bool:
        return self.store.exists(*self.parts(iteration, stage, MANIFEST))

    def read_manifest(self, iteration: int, stage: str) -> dict[str, Any]:
        return self.store.read_json(*self.parts(iteration, stage, MANIFEST))

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the run for this process: a second flow on the same run id is refused while this one lives.

        The lock is a file in the run's folder (host, pid, token); a lock left by a process that died on
        this host (killed, crashed) is taken over. One from another host cannot be checked from here: the
        error says which file to delete once that run is gone. On an object store two flows starting in
        the same instant can both take it (no atomic create); that window is milliseconds.
        """
        self.check_unlocked()
        token = uuid.uuid4().hex
        since = time.strftime(TIME_FORMAT, time.gmtime())
        mine = {"host": socket.gethostname(), "pid": os.getpid(), "token": token, "since": since}
        self.store.write_json(mine, self.run_id, LOCK)
        try:
            yield
        finally:
            # the store down: the lock stays, and the next run on this host takes it over (this pid is gone)
            with contextlib.suppress(FileNotFoundError, ValueError, StoreOutageError):
                if self.store.read_json(self.run_id, LOCK).get("token") == token:
                    self.store.remove(self.run_id, LOCK)

    def check_unlocked(self) -> None:
        """Raise a ValueError naming the holder when another live process drives this run."""
        held = self._lock_holder()
        if held is not None:
            raise ValueError(
                f"run {self.run_id} is being driven by another process (pid {held.get('pid')} on "
                f"{held.get('host')}, since {held.get('since')}); wait for it or stop it, then resume "
                f"(if it is gone, delete {self.store.url(self.run_id, LOCK)})"
            )

    def _lock_holder(self) -> dict[str, Any] | None:
        """The live process holding the run's lock, or None (no lock, or its process is gone)."""
        if not self.store.exists(self.run_id, LOCK):
            return None
        held = self.store.read_json(self.run_id, LOCK)
        if held.get("host") != socket.gethostname():
            return held
        try:
            os.kill(int(held.get("pid", -1)), 0)
        except ProcessLookupError:
            return None  # died without releasing it
        except PermissionError:
            return held  # alive, another user's
        return held

    def record_event(self, iteration: int, stage: str, kind: str, **info: Any) -> None:
        """One small file per event: appends are not atomic on object stores, new objects are."""
        now = time.time_ns()
        event = {
            "time": time.strftime(TIME_FORMAT, time.gmtime(now / 1e9)),
            "iteration": iteration,
            "stage": stage,
            "kind": kind,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **info,
        }
        # a re-scoring's stage is `rescore/NAME`: its slash would make a folder of the event
        name = f"{now:020d}-{iteration_name(iteration)}-{stage.replace('/', '.')}-{kind}.json"
        self.store.write_json(event, self.run_id, "events", name)

    def events(self) -> list[dict[str, Any]]:
        """The run's events, oldest first."""
        return [
            self.store.read_json(self.run_id, "events", name)
            for name in self.store.list(self.run_id, "events")
            if name.endswith(".json")  # (re-scorings made before this was fixed left folders)
        ]


def _no_run(store: ArtifactStore, root: str, run_id: str) -> str:
    """Why `Run.open` found no run: the absolute folder searched (a relative --root is relative to the
    working directory), and the run ids there that look like `run_id`."""
    where = f"{store.url()}" + ("" if store.url() == root else f" (--root {root})")
    if not store.exists():
        return f"no run {run_id}: the folder {where} does not exist; pass --root the storage root of the run"
    close = difflib.get_close_matches(run_id, store.list(), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (
        f"no run {run_id} under {where} (no {store.url(run_id, 'config.yaml')}); {hint}"
        f"`mappa runs --root {root}` lists the runs there"
    )


def _stored_config(store: ArtifactStore, run_id: str, root: str | None = None) -> RunConfig:
    data = yaml.safe_load(store.read_text(run_id, "config.yaml"))
    if root is not None:
        data.setdefault("storage", {})["root"] = root
    return validate_config(data, source=store.url(run_id, "config.yaml"))
