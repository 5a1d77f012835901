"""A long stage's progress: the rollout's trajectories done, the update's agents trained.

Two places show it: a Prefect progress artifact (the task run's page shows a bar), inside a Prefect task
or flow run; and, while `terminal_progress()` is active (`mappa train`, `resume`, `evaluate` and the
benchmarks that run flows in-process), a bar on the terminal under the log lines, which print above it.
Elsewhere (a stage run directly, a unit test, output that is not a terminal) `StageProgress` shows
nothing. A Prefect API error is logged and progress stops being reported: it never stops the stage.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

logger = logging.getLogger(__name__)
_TERMINAL = None
"""The terminal's `rich.progress.Progress` while `terminal_progress()` is active."""


def _log_console():
    """The rich console Prefect's log handler prints to (so the bar and the log lines share it), or None."""
    for handler in logging.getLogger().handlers + logging.getLogger("prefect").handlers:
        console = getattr(handler, "console", None)
        if console is not None:
            return console
    return None


@contextmanager
def terminal_progress(console=None) -> Iterator[None]:
    """While the block runs, each long stage also draws a bar on `console` (default: the log's), if that
    is a terminal; the bars go when the block ends."""
    from rich.default_styles import DEFAULT_STYLES
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.theme import Theme

    global _TERMINAL
    console = console or _log_console()
    if console is None or not console.is_terminal or _TERMINAL is not None:
        yield
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        TimeElapsedColumn(),
    )
    # Prefect's console has a theme of its own without rich's bar styles: lend it those for the block
    bar_styles = {name: s for name, s in DEFAULT_STYLES.items() if name.startswith(("bar.", "progress."))}
    console.push_theme(Theme(bar_styles))
    try:
        with Progress(*columns, console=console, transient=True) as bar:
            _TERMINAL = bar
            try:
                yield
            finally:
                _TERMINAL = None
    finally:
        console.pop_theme()


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
        self.bar, self.bar_task = _TERMINAL, None
        if self.bar is not None:
            self.bar_task = self.bar.add_task(self.description, total=self.total, unit=unit)

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.artifact_id is not None:
            self._call("update", 100.0 * min(self.done, self.total) / self.total)
        if self.bar_task is not None:
            self.bar.update(self.bar_task, completed=min(self.done, self.total), refresh=True)
            if self.done >= self.total:  # the stage's line follows in the log
                self.bar.remove_task(self.bar_task)
                self.bar_task = None

    def _call(self, what: str, percent: float) -> None:
        from prefect.artifacts import create_progress_artifact, update_progress_artifact
        from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

        text = f"{self.description}: {self.done}/{self.total} {self.unit}"
        # no retries: a bar is not worth the minute Prefect's client spends retrying an API that is away
        # (measured: an update stage took 71 s instead of 2 while its server was down)
        try:
            with temporary_settings(updates={PREFECT_CLIENT_MAX_RETRIES: 0}):
                if what == "create":
                    self.artifact_id = create_progress_artifact(percent, description=text, _sync=True)
                else:
                    update_progress_artifact(self.artifact_id, percent, description=text, _sync=True)
        except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: Prefect's "Failed to reach API"
            logger.warning("progress of %s not reported (Prefect API error: %s)", self.description, exc)
            self.artifact_id = None
