"""Training curves of a run as a PNG: per iteration and agent, coach scores and trainer metrics.

The curves frame (`CURVE_COLUMNS`) is the run's history (`mappa.storage.history.run_history`).
`plot_curves` draws with matplotlib's Agg canvas on a `Figure` of its own: no pyplot, no global state, no
display needed. Not covered: smoothing, confidence bands across seeds, or comparing several runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# (column, title) of each small multiple; success rate is one line for the team, the others one per agent.
PANELS = (
    ("mean_score", "mean coach score (bars: ±1 std)"),
    ("kl", "KL to reference"),
    ("loss", "policy loss"),
    ("success_rate", "success rate"),
)


def plot_curves(frame: pd.DataFrame, target: str | Path | IO[bytes], title: str | None = None) -> None:
    """Write a PNG of score, KL, loss and success rate against iteration to a path or a binary file.

    `frame` is `run_history`'s output (or a subset of its iterations). Every point gets a marker, so a run
    with one iteration shows points rather than nothing. Raises ValueError on an empty frame.
    """
    if frame.empty:
        raise ValueError("no curves to plot: the frame has no rows (no finished iteration)")
    missing = [c for c in ("iteration", "agent", *(p for p, _ in PANELS)) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"curves frame lacks columns {missing}; build it with mappa.storage.history.run_history"
        )
    figure = Figure(figsize=(10, 7), dpi=80, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, 2, sharex=True).ravel()
    for ax, (column, panel_title) in zip(axes, PANELS):
        if column == "success_rate":
            _draw_success(ax, frame)
        else:
            _draw_agents(ax, frame, column)
        ax.set_title(panel_title)
        ax.grid(alpha=0.3)
    for ax in axes[2:]:
        ax.set_xlabel("iteration")
    iterations = sorted(frame["iteration"].unique())
    axes[0].set_xticks(iterations if len(iterations) <= 12 else iterations[:: len(iterations) // 12 + 1])
    if title:
        figure.suptitle(title)
    figure.savefig(target, format="png")


def _draw_agents(ax, frame: pd.DataFrame, column: str) -> None:
    for index, (agent, group) in enumerate(frame.sort_values("iteration").groupby("agent", sort=True)):
        if group[column].isna().all():
            continue  # e.g. a frozen agent has no KL or loss
        # error bars rather than a band: a band has no width when the run has one iteration
        spread = group["std_score"] if column == "mean_score" and "std_score" in group else None
        ax.errorbar(
            group["iteration"],
            group[column],
            yerr=spread,
            marker="o",
            capsize=3,
            color=f"C{index % 10}",  # an agent has one color in every panel
            label=str(agent),
        )
    if ax.lines:
        ax.legend(fontsize="small")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4), useOffset=False)


def _draw_success(ax, frame: pd.DataFrame) -> None:
    team = frame.groupby("iteration")["success_rate"].first()
    ax.plot(team.index, team.values, marker="o", color="black", label="team")
    ax.set_ylim(-0.05, 1.05)
