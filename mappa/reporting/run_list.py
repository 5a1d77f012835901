"""The runs under a storage root and where each stands: what `mappa runs` (and `mappa inspect` without a
run id) lists, newest first.

    run            the folder's name (a run id): any folder of the root holding a config.yaml
    config         the config's `name`
    started        the time of the run's first event (UTC), None where it has none
    iterations     finished / configured: iterations whose update wrote its manifest, of `iterations`
    last finished  the last stage that finished (`iter 2 update`), from the run's events
    failed         the last failure, where it came after the last finished stage (`iter 3 score`)
    evaluations    the evaluated checkpoints of the held-out set (`base, iter 2`) and other sets' count

The config is read as YAML, not validated: a run made by an older mappa, or with a config this one
refuses, is still listed. Stage times come from the event files' names (one listing per run, nothing read),
so a root on S3 costs one listing per run and one existence check per iteration folder.

Not covered: whether a run is being driven right now (`Run.check_unlocked` says, per run), runs nested
deeper than the root's own folders.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import yaml

from mappa.storage.run import MANIFEST, TIME_FORMAT
from mappa.storage.store import ArtifactStore

CONFIG = "config.yaml"
_ITERATION = re.compile(r"^iter-(\d{4,})$")
_EVENT = re.compile(
    r"^(\d{20})-iter-(-?\d+)-(.+?)-(started|finished|skipped|failed|agent-finished|checkpoint-\w+)\.json$"
)


@dataclass(frozen=True)
class RunStatus:
    """Where one run stands (see the module's docstring for each field)."""

    run_id: str
    config: str | None
    started: str | None
    finished_iterations: int
    configured_iterations: int | None
    last_finished: str | None
    failed: str | None
    evaluations: str | None


def list_runs(root: str) -> list[RunStatus]:
    """Every run under `root`, newest first (runs without events last, by name). A FileNotFoundError names
    the root's absolute path when it does not exist."""
    store = ArtifactStore(root)
    if not store.exists():
        raise FileNotFoundError(
            f"no folder {store.url()} (--root {root}): no runs there; pass --root the storage.root your "
            "runs were written to"
        )
    runs = [run_status(store, name) for name in store.list() if store.exists(name, CONFIG)]
    dated = sorted((r for r in runs if r.started), key=lambda r: r.started or "", reverse=True)
    return dated + sorted((r for r in runs if not r.started), key=lambda r: r.run_id)


def run_status(store: ArtifactStore, run_id: str) -> RunStatus:
    """Where run `run_id` of `store` stands, from its config.yaml, its folder listing and its events."""
    config = _raw_config(store, run_id)
    iterations = sorted(int(m.group(1)) for m in map(_ITERATION.match, store.list(run_id)) if m)
    finished = [i for i in iterations if store.exists(run_id, f"iter-{i:04d}", "update", MANIFEST)]
    events = [m for m in map(_EVENT.match, store.list(run_id, "events")) if m]
    done = [m for m in events if m.group(4) == "finished"]
    last = done[-1] if done else None
    failures = [m for m in events if m.group(4) == "failed" and (last is None or m.group(1) > last.group(1))]
    configured = config.get("iterations")
    return RunStatus(
        run_id=run_id,
        config=config.get("name"),
        started=_event_time(events[0]) if events else None,
        finished_iterations=len(finished),
        configured_iterations=int(configured) if isinstance(configured, int) else None,
        last_finished=_stage_of(last) if last else None,
        failed=_stage_of(failures[-1]) if failures else None,
        evaluations=_evaluations(done),
    )


def _raw_config(store: ArtifactStore, run_id: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(store.read_text(run_id, CONFIG))
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def _event_time(match: re.Match) -> str:
    return time.strftime(TIME_FORMAT, time.gmtime(int(match.group(1)) / 1e9))


def _stage_of(match: re.Match) -> str:
    iteration = int(match.group(2))
    where = "base" if iteration == -1 else f"iter {iteration}"
    return f"{where} {match.group(3).replace('.', '/', 1)}"  # (`evaluate-on.NAME` names evaluate-on/NAME)


def _evaluations(finished: list[re.Match]) -> str | None:
    """`base, iter 2` for the held-out set's evaluated checkpoints, `+ 1 other set` for the others."""
    held_out = sorted({int(m.group(2)) for m in finished if m.group(3) == "evaluate"})
    others = {m.group(3) for m in finished if m.group(3).startswith("evaluate-on.")}
    if not held_out and not others:
        return None
    labels = ["base" if i == -1 else f"iter {i}" for i in held_out]
    if others:
        labels.append(f"+ {len(others)} other set{'s' * (len(others) > 1)}")
    return ", ".join(labels)
