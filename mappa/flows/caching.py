"""Prefect's side of resume: cache keys and result storage that agree with the run's manifests.

A stage task's cache key is the hash of the manifest the stage would write (`mappa.stages.expected_manifest`:
run, iteration, stage, config hash, code version, the hashes of its inputs), so Prefect reuses a task's result
exactly when the manifests say the stage is complete. Results persist inside the run, next to the stage's
artifacts (`{run}/iter-0003/<stage>/_prefect/<key>`; Prefect keeps a failed attempt's error under
`{run}/<random id>`): deleting a stage's folder forgets both at once, and a
new flow run, `prefect flow-run retry`, a flow's `retries` and the UI's Retry all find finished stages
there (their task runs show as Cached).

The report stage's inputs are the update it reports, so each iteration's artifacts are published once.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from prefect.filesystems import RemoteFileSystem

from mappa.stages import expected_manifest
from mappa.storage.run import Run, iteration_label


def stage_cache_key(context: Any, parameters: dict[str, Any]) -> str:
    """`iter-0003/<stage>/_prefect/<hash of the expected manifest>` (a path under the run's folder)."""
    stage = context.task.name
    run = Run.open(parameters["root"], parameters["run_id"])
    iteration = parameters["iteration"]
    expected = expected_manifest(run, iteration, stage)
    digest = hashlib.sha256(json.dumps(expected, sort_keys=True).encode()).hexdigest()[:32]
    return f"{iteration_label(iteration)}/{stage}/_prefect/{digest}"


def result_storage(root: str, run_id: str) -> Path | RemoteFileSystem:
    """Where a run's task results persist: its folder under the artifact root (a local folder or any fsspec
    URL).

    A remote root becomes a `RemoteFileSystem` block saved on the Prefect server as
    `mappa-results-<hash of the run's URL>` (Prefect refuses unsaved blocks as result storage). The block
    holds that URL only: credentials come from the environment (as for the artifact store), never from the
    block's settings, so nothing secret reaches the server.
    """
    if "://" not in root:
        return Path(root).expanduser().resolve() / run_id
    basepath = f"{root.rstrip('/')}/{run_id}"
    block = RemoteFileSystem(basepath=basepath)
    block.save(f"mappa-results-{hashlib.sha256(basepath.encode()).hexdigest()[:12]}", overwrite=True)
    return block
