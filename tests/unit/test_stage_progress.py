"""A long stage's bar on the terminal (`mappa.reporting.progress.terminal_progress`): drawn on a terminal,
with the log's lines printed above it, gone when the stage is done; nothing where the output is not a
terminal."""

import io
import re

from rich.console import Console
from rich.theme import Theme

from mappa.reporting.progress import StageProgress, terminal_progress


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    """A console like Prefect's log console: a theme of its own, without rich's default styles."""
    out = io.StringIO()
    theme = Theme({"level.info_level": "cyan"}, inherit=False)
    return Console(file=out, force_terminal=terminal, width=100, color_system="standard", theme=theme), out


def test_a_stage_draws_a_bar_on_a_terminal_and_log_lines_print_above_it():
    console, out = _console(terminal=True)
    with terminal_progress(console):
        progress = StageProgress("rollout", 3, 4, "trajectories")
        progress.advance(2)
        drawn = out.getvalue()
        console.print("iter 3 score      12 actions")  # a log line while the bar is up
        progress.advance(2)
    assert "rollout of iteration 3" in drawn and "2/4" in drawn and "trajectories" in drawn, drawn
    assert "iter 3 score      12 actions" in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert progress.bar_task is None  # done: its bar removed


def test_no_bar_where_the_output_is_not_a_terminal():
    console, out = _console(terminal=False)
    with terminal_progress(console):
        progress = StageProgress("update", 0, 3, "agents trained")
        progress.advance(3)
    assert progress.bar is None and out.getvalue() == ""
    assert StageProgress("update", 0, 3, "agents trained").bar is None  # outside the block: none either
