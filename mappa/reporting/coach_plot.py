"""The coach comparison of a run as a PNG: per agent, how each re-scoring agrees with the run's coach
(Spearman) and how well each coach tells the actions of successful trajectories from failed ones (AUC).

Input: `mappa.stages.rescore.comparison_rows` of every re-scoring (the per-agent rows; per-kind rows are
left to the table). Drawn with matplotlib's Agg canvas on a `Figure` of its own, as the curves are.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def plot_coach_comparison(rows: list[dict[str, Any]], target: str | Path | IO[bytes], title: str) -> None:
    frame = pd.DataFrame([row for row in rows if "kind" not in row or pd.isna(row.get("kind"))])
    if frame.empty:
        raise ValueError("no re-scoring to plot: run `mappa rescore` first")
    agents = sorted(frame["agent"].unique())
    names = sorted(frame["rescore"].unique())
    figure = Figure(figsize=(10, 4))
    FigureCanvasAgg(figure)
    agree, separate = figure.subplots(1, 2)
    width = 0.8 / (len(names) + 1)
    positions = range(len(agents))
    for k, name in enumerate(names):
        by_agent = frame[frame["rescore"] == name].set_index("agent").reindex(agents)
        offsets = [p + k * width for p in positions]
        agree.bar(offsets, by_agent["spearman"].fillna(0.0), width, label=name)
        separate.bar([o + width for o in offsets], by_agent["auc_other"].fillna(0.5), width, label=name)
    run_auc = frame.drop_duplicates("agent").set_index("agent").reindex(agents)["auc_base"].fillna(0.5)
    separate.bar(list(positions), run_auc, width, label="run's coach", color="gray")
    agree.set_title("Spearman with the run's coach")
    agree.axhline(0.0, color="black", linewidth=0.8)
    agree.set_ylim(-1, 1)
    separate.set_title("AUC: success vs failure (0.5 = chance)")
    separate.axhline(0.5, color="black", linewidth=0.8, linestyle="--")
    separate.set_ylim(0, 1)
    for axes in (agree, separate):
        axes.set_xticks([p + width * len(names) / 2 for p in positions], agents)
        axes.legend(fontsize="small")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(target, format="png", dpi=100)
