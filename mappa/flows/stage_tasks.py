"""The Prefect tasks of the pipeline: one per registered stage, each running that stage on a run handle.

Tasks take the run's root, id and the iteration (small, hashable parameters) and return the stage's small
manifest (URIs, counts, timings); the data itself stays in the artifact store. Each stage skips itself
when its manifest matches (`mappa.stages.execute`), and each task's cache key is that same expected
manifest (mappa.flows.caching), so a re-run or retry of a task or flow never redoes finished work. The
flow sets retries and the result storage per run (`configure_stage`); an error that already waited out its
own budget (`mappa.core.errors.worth_retrying`) is not retried.
"""

from __future__ import annotations

from typing import Any

from prefect import Task, task

from mappa.config import RunConfig
from mappa.core.errors import worth_retrying
from mappa.flows.caching import result_storage, stage_cache_key
from mappa.stages import REGISTRY, Stage, execute, get_stage
from mappa.storage.run import Run


def stage_task(stage: Stage) -> Task:
    """The Prefect task of `stage`: `<name>-<iteration>` runs in the UI, cached on the expected manifest."""

    def run_stage(root: str, run_id: str, iteration: int) -> dict[str, Any]:
        return execute(Run.open(root, run_id), iteration, stage.name)

    run_stage.__doc__ = f"The {stage.name} stage of one iteration of a run."
    run_stage.__qualname__ = f"{stage.name}_stage"  # Prefect's task key: one per stage
    return task(
        run_stage,
        name=stage.name,
        task_run_name=f"{stage.name}-{{iteration}}",
        cache_key_fn=stage_cache_key,
        persist_result=True,
    )


TASKS: dict[str, Task] = {name: stage_task(stage) for name, stage in REGISTRY.items()}


def configure_stage(name: str, config: RunConfig, run_id: str, retries_of: str | None = None) -> Task:
    """The task of stage `name` with this run's retries (those of stage `retries_of`, if given; exponential
    backoff) and result storage. A stage registered after import (a re-scoring's) gets its task here."""
    if name not in TASKS:
        TASKS[name] = stage_task(get_stage(name))
    delays = config.retries.delays(retries_of or name)
    return TASKS[name].with_options(
        retries=len(delays),
        retry_delay_seconds=delays or 0,
        retry_condition_fn=retry_unless_waited_out,
        result_storage=result_storage(config.storage.root, run_id),
    )


def retry_unless_waited_out(task: Task, task_run: Any, state: Any) -> bool:
    """Prefect's retry condition: retry a failed stage unless its error already waited out a budget of its
    own (a coach endpoint down past coach.outage_budget_s), which a retry would only wait out again."""
    return not isinstance(state.data, BaseException) or worth_retrying(state.data)
