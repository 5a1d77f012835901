"""The `rescore` flow: a finished run's stored trajectories scored again by another coach, one Prefect task
per iteration, then a table artifact comparing that coach with the run's own.

A readable sequence and nothing else: store the re-scoring's config (`mappa.stages.rescore`), run its stage
for each chosen iteration (skipped where complete, as any stage), free its coach worker, publish the
comparison (`mappa-<run id>-coaches-<name>`). Retries are the score stage's (`retries.score`).
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from mappa.cluster.ray_cluster import release_workers
from mappa.flows.stage_tasks import configure_stage
from mappa.stages import describe_stage
from mappa.stages.report import artifact_key, create_artifact
from mappa.stages.rescore import comparison_rows, create_rescore, rolled_out_iterations, stage_name
from mappa.storage.run import Run


@flow(name="mappa-rescore", flow_run_name="{run_id}-rescore-{name}", log_prints=True)
def rescore(
    run_id: str,
    name: str,
    root: str = "runs",
    overrides: list[str] | None = None,
    iterations: list[int] | None = None,
    fallbacks_only: bool = False,
) -> dict[str, Any]:
    """Re-score `iterations` (default: every rolled-out one) of run `run_id` under `root` as `name`, with
    the run's coach changed by `overrides` (`coach.<field>=value`); with `fallbacks_only`, only the actions
    the run's coach left unscored. Returns the manifests and comparison."""
    run = Run.open(root, run_id)
    config = create_rescore(run, name, list(overrides or []), fallbacks_only)
    available = rolled_out_iterations(run)
    chosen = available if iterations is None else list(iterations)
    missing = sorted(set(chosen) - set(available))
    if missing:
        raise ValueError(
            f"run {run_id} has no finished rollout for iteration(s) {missing}; it has {available}"
        )
    stage = stage_name(name)
    task = configure_stage(stage, config, run_id, retries_of="score")
    logger = get_run_logger()
    manifests = {}
    try:
        for iteration in chosen:
            state = task(root, run_id, iteration, return_state=True)
            manifest = state.result()
            if state.name == "Cached":
                manifest = {**manifest, "skipped": True}
            manifests[iteration] = manifest
            logger.info(describe_stage(stage, iteration, manifest))
    finally:
        release_workers(run_id, [f"coach-{name}"])
    rows = comparison_rows(run, name)
    create_artifact(
        artifact_key(run_id, f"coaches-{name}"),
        lambda key: create_table_artifact(
            rows, key=key, description=f"run {run_id}: re-scoring {name} against the run's coach", _sync=True
        ),
    )
    return {"manifests": manifests, "comparison": rows}
