"""The Prefect tasks of one iteration: thin wrappers, each calling one stage function with a run handle.

Tasks take the run's root, id and the iteration (small, hashable parameters) and return the stage's small
manifest (URIs, counts, timings); the data itself stays in the artifact store. Each stage function skips
itself when its manifest matches, so a re-run or retry of a task never redoes finished work.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from mappa.coach.stage import score_stage
from mappa.envs.rollout import rollout_stage
from mappa.storage.run import Run
from mappa.trainer.advantage_stage import advantages_stage
from mappa.trainer.update_stage import update_stage


@task(name="rollout", task_run_name="rollout-{iteration}")
def rollout(root: str, run_id: str, iteration: int) -> dict[str, Any]:
    return rollout_stage(Run.open(root, run_id), iteration)


@task(name="score", task_run_name="score-{iteration}")
def score(root: str, run_id: str, iteration: int) -> dict[str, Any]:
    return score_stage(Run.open(root, run_id), iteration)


@task(name="advantages", task_run_name="advantages-{iteration}")
def advantages(root: str, run_id: str, iteration: int) -> dict[str, Any]:
    return advantages_stage(Run.open(root, run_id), iteration)


@task(name="update", task_run_name="update-{iteration}")
def update(root: str, run_id: str, iteration: int) -> dict[str, Any]:
    return update_stage(Run.open(root, run_id), iteration)
