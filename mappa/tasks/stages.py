"""The Prefect tasks of one iteration: thin wrappers, each calling one stage function with a run handle.

Tasks take the run's root, id and the iteration (small, hashable parameters) and return the stage's small
manifest (URIs, counts, timings); the data itself stays in the artifact store. Each stage function skips
itself when its manifest matches, and each task's cache key is that same manifest (mappa.tasks.caching),
so a re-run or retry of a task or flow never redoes finished work. The flow sets retries and the result
storage per run (`configure_stage`).
"""

from __future__ import annotations

from typing import Any

from prefect import Task, task

from mappa.coach.stage import score_stage
from mappa.config import RunConfig
from mappa.envs.rollout import rollout_stage
from mappa.flows.report import publish_iteration_report
from mappa.storage.run import Run
from mappa.tasks.caching import report_cache_key, result_storage, stage_cache_key
from mappa.trainer.advantage_stage import advantages_stage
from mappa.trainer.update_stage import update_stage

_CACHED = {"cache_key_fn": stage_cache_key, "persist_result": True}


@task(name="rollout", task_run_name="rollout-{iteration}", **_CACHED)
def rollout(root: str, run_id: str, iteration: int) -> dict[str, Any]:
    return rollout_stage(Run.open(root, run_id), iteration)


@task(name="score", task_run_name="score-{iteration}", **_CACHED)
def score(root: str, run_id: str, iteration: int) -> dict[str, Any]:
    return score_stage(Run.open(root, run_id), iteration)


@task(name="advantages", task_run_name="advantages-{iteration}", **_CACHED)
def advantages(root: str, run_id: str, iteration: int) -> dict[str, Any]:
    return advantages_stage(Run.open(root, run_id), iteration)


@task(name="update", task_run_name="update-{iteration}", **_CACHED)
def update(root: str, run_id: str, iteration: int) -> dict[str, Any]:
    return update_stage(Run.open(root, run_id), iteration)


@task(name="report", task_run_name="report-{iteration}", cache_key_fn=report_cache_key, persist_result=True)
def report(root: str, run_id: str, iteration: int) -> dict[str, Any]:
    """Prefect artifacts for a finished iteration: per-agent table, markdown summary, curves PNG."""
    return publish_iteration_report(Run.open(root, run_id), iteration)


STAGES = (rollout, score, advantages, update)


def configure_stage(stage: Task, config: RunConfig, run_id: str) -> Task:
    """The stage task with this run's retries (exponential backoff) and result storage."""
    delays = config.retries.delays(stage.name)
    return stage.with_options(
        retries=len(delays),
        retry_delay_seconds=delays or 0,
        result_storage=result_storage(config.storage.root, run_id),
    )
