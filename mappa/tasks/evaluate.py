"""The Prefect task of an evaluation: a thin wrapper around `mappa.envs.evaluate_stage.evaluate_stage`.

Takes the run's root, id and the checkpoint's iteration (-1: the base model) and returns the evaluation's
small manifest; the results stay in the artifact store. A finished evaluation is skipped, so a retry or a
second run never redoes it.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from mappa.envs.evaluate_stage import evaluate_stage
from mappa.storage.run import Run


@task(name="evaluate", task_run_name="evaluate-{iteration}")
def evaluate(root: str, run_id: str, iteration: int) -> dict[str, Any]:
    return evaluate_stage(Run.open(root, run_id), iteration)
