"""The retention stage: once an iteration's update is complete, delete the checkpoints that `checkpoint:`
no longer keeps, so a run's checkpoint bytes stay bounded however many iterations it has.

It keeps each trainable agent's full state (weights, optimizer, LR schedule, RNG) for the last
`checkpoint.keep_last` iterations and the weights alone of every `keep_weights_every`-th, and deletes the
rest (`mappa.storage.checkpoints.retention_plan`). It runs after the iteration's update, report and
evaluation, so the newest state is completely written (every agent's checkpoint, then the update's
manifest) before an older one goes: a SIGKILL at any instant leaves a state that resumes to the same
result. Each change goes into the run's ledger (`checkpoints/retention.json`) before its files are deleted,
and each deletion is an event (`checkpoint-deleted`, `checkpoint-stripped`); the stage's own file
(`iter-K/retention/retention.json`) lists what this pass changed and what the run keeps, with the
checkpoints' bytes. Deletion goes through the artifact store, so s3:// roots prune the same way.
Skipped when its manifest matches; a pass killed halfway is finished by the next one.

Not covered: deleting iteration folders' artifacts (trajectories, scores: small next to checkpoints).
"""

from __future__ import annotations

import time
from typing import Any

from mappa.stages.stage import Stage, output_parts, register, write_manifest
from mappa.storage.checkpoints import (
    apply_change,
    kept_checkpoints,
    planned_changes,
    record_in_ledger,
)
from mappa.storage.run import MANIFEST, Run, iteration_name


def retain_checkpoints(run: Run, iteration: int) -> dict[str, Any]:
    """Apply the retention plan after iteration `iteration`'s update; its file and manifest."""
    if not run.has_manifest(iteration, "update"):
        raise ValueError(
            f"iteration {iteration} of run {run.run_id} has no update manifest "
            f"({run.store.url(*run.parts(iteration, 'update', MANIFEST))}): retention runs after the update"
        )
    started = time.perf_counter()
    trainable = [name for name, agent in run.config.agents.items() if agent.trainable]
    changes = [change for agent in trainable for change in planned_changes(run, agent, iteration)]
    record_in_ledger(run, changes, by=f"{iteration_name(iteration)}/retention")  # before anything goes
    for change in changes:
        apply_change(run, change)
        kind = "checkpoint-stripped" if change["holds"] == "weights" else "checkpoint-deleted"
        run.record_event(
            iteration,
            "retention",
            kind,
            agent=change["agent"],
            checkpoint=iteration_name(change["iteration"]),
            bytes_freed=change["bytes_freed"],
        )
    kept = {agent: kept_checkpoints(run, agent) for agent in trainable}
    result = {
        "policy": run.config.checkpoint.model_dump(),
        "changes": changes,
        "kept": kept,
        "checkpoint_bytes": run.store.size(run.run_id, "checkpoints"),
    }
    run.store.write_json(result, *output_parts(run, iteration, "retention"))
    return write_manifest(
        run,
        iteration,
        "retention",
        rows=len(changes),
        timings={"total_s": time.perf_counter() - started},
        freed_bytes=sum(change["bytes_freed"] for change in changes),
        checkpoint_bytes=result["checkpoint_bytes"],
        kept=kept,
    )


def describe(manifest: dict[str, Any]) -> str:
    kept = manifest.get("kept", {})
    full = sorted({i for agent in kept.values() for i in agent.get("full", [])})
    weights = sorted({i for agent in kept.values() for i in agent.get("weights", [])})
    text = (
        f"{manifest.get('rows', 0)} checkpoint(s) pruned, {manifest.get('freed_bytes', 0) / 1e9:.2f} GB freed"
    )
    text += f"; kept full states of iterations {full}"
    if weights:
        text += f", weights of {weights}"
    return text + f" ({manifest.get('checkpoint_bytes', 0) / 1e9:.2f} GB of checkpoints)"


STAGE = register(Stage("retention", "retention.json", retain_checkpoints, describe, inputs=("update",)))
