"""A long stage's progress as a Prefect progress artifact (the task run's page shows a bar): the rollout's
trajectories done, the update's agents trained.

Only inside a Prefect task or flow run; elsewhere (a stage run directly, a unit test) `StageProgress` does
nothing. An API error is logged and progress stops being reported: it never stops the stage.

Not covered: a progress bar in the terminal (the CLI prints one line per finished stage).
"""

from __future__ import annotations

import logging

import httpx

logger = logging.getLogger(__name__)


def _in_a_prefect_run() -> bool:
    from prefect.context import FlowRunContext, TaskRunContext

    return TaskRunContext.get() is not None or FlowRunContext.get() is not None


class StageProgress:
    def __init__(self, stage: str, iteration: int, total: int, unit: str) -> None:
        self.total, self.unit, self.done = max(total, 1), unit, 0
        self.description = f"{stage} of iteration {iteration}"
        self.artifact_id = None
        if _in_a_prefect_run():
            self._call("create", 0.0)

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.artifact_id is not None:
            self._call("update", 100.0 * min(self.done, self.total) / self.total)

    def _call(self, what: str, percent: float) -> None:
        from prefect.artifacts import create_progress_artifact, update_progress_artifact

        text = f"{self.description}: {self.done}/{self.total} {self.unit}"
        try:
            if what == "create":
                self.artifact_id = create_progress_artifact(percent, description=text, _sync=True)
            else:
                update_progress_artifact(self.artifact_id, percent, description=text, _sync=True)
        except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: Prefect's "Failed to reach API"
            logger.warning("progress of %s not reported (Prefect API error: %s)", self.description, exc)
            self.artifact_id = None
