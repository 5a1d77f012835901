"""The `evaluate` flow: one checkpoint of a run on held-out problems, as a Prefect task.

A readable sequence and nothing else: pick the checkpoint (default: the last iteration with a complete
update; -1: the base model), run the `evaluate` stage's task (skipped when that evaluation is complete),
free the run's Ray workers, publish the results as a table artifact (`mappa.stages.report.
publish_evaluation`, also when the evaluation was skipped, so a failed publish is redone). The stage lives
in `mappa.stages.evaluate`; with `eval_data` it is that file's `evaluate-on/NAME` stage
(`mappa.stages.evaluate_on`), on the same checkpoint.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from mappa.cluster.ray_cluster import HOST, release_workers
from mappa.flows.stage_tasks import configure_stage
from mappa.stages import describe_stage
from mappa.stages.evaluate import STAGE_NAME, evaluation_rows, last_trained_iteration
from mappa.stages.evaluate_on import create_evaluation_set
from mappa.stages.report import publish_evaluation
from mappa.storage.run import Run


@flow(name="mappa-evaluate", flow_run_name="{run_id}-evaluate", log_prints=True)
def evaluate(
    run_id: str,
    root: str = "runs",
    iteration: int | None = None,
    eval_data: str | None = None,
    name: str | None = None,
    eval_problems: int | None = None,
) -> dict[str, Any]:
    """Evaluate checkpoint `iteration` of run `run_id` under `root` and return the evaluation's manifest.

    Args:
        run_id: The run to evaluate.
        root: Its storage root: a folder (relative to where `mappa serve` runs) or a URL (s3://bucket/runs).
        iteration: The checkpoint: that iteration's update (default: the last finished one); -1 evaluates
            the base model.
        eval_data: Other problems to evaluate on (a file or URL the run's env reads; default: the run's
            held-out set). Its results go to `evaluate-on/NAME` beside the run's own evaluation.
        name: The name of that evaluation set (default: the file's stem).
        eval_problems: How many of its problems, from the first (default: all).
    """
    run = Run.open(root, run_id)
    if iteration is None:
        iteration = last_trained_iteration(run)
    stage = STAGE_NAME if eval_data is None else create_evaluation_set(run, eval_data, name, eval_problems)
    task = configure_stage(stage, run.config, run_id, retries_of=STAGE_NAME)
    try:
        state = task(root, run_id, iteration, return_state=True)
        manifest = state.result()
        if state.name == "Cached":  # Prefect's cache answered: the evaluation is complete
            manifest = {**manifest, "skipped": True}
    finally:
        release_workers(run_id, [*run.config.agents, HOST])
    get_run_logger().info(describe_stage(stage, iteration, manifest))
    publish_evaluation(run, iteration, evaluation_rows(run, iteration, stage), stage)
    return manifest
