"""How two coaches' scores of the same actions compare: agreement and how each separates success from
failure, per agent (and per task kind where the env grades by kind).

For each group of actions scored by both: Pearson and Spearman correlation, the mean difference
(other - base), and for each coach the AUC of its scores for telling the actions of trajectories that
succeeded from those of trajectories that failed (0.5: no better than chance; the Mann-Whitney statistic,
ties counted half). A correlation is None where either side is constant, an AUC where one outcome is
missing.

Not covered: significance or confidence intervals (the table says n; judge the spread by it).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from mappa.core.auc import auc as core_auc


def compare_scores(
    base: pd.DataFrame,
    other: pd.DataFrame,
    outcomes: dict[str, bool],
    kinds: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One row per agent (then per agent and kind, where `kinds` maps trajectories to task kinds) from two
    score frames (`action_id`, `agent`, `trajectory_id`, `score`) and each trajectory's success."""
    both = base[["action_id", "agent", "trajectory_id", "score"]].merge(
        other[["action_id", "score"]], on="action_id", suffixes=("_base", "_other")
    )
    both["success"] = both["trajectory_id"].map(outcomes).fillna(False).astype(bool)
    groups: list[tuple[dict[str, Any], pd.DataFrame]] = [
        ({"agent": agent}, frame) for agent, frame in both.groupby("agent", sort=True)
    ]
    if kinds:
        both["kind"] = both["trajectory_id"].map(kinds).fillna("?")
        groups += [
            ({"agent": agent, "kind": kind}, frame)
            for (agent, kind), frame in both.groupby(["agent", "kind"], sort=True)
        ]
    return [{**key, **_figures(frame)} for key, frame in groups]


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _figures(frame: pd.DataFrame) -> dict[str, Any]:
    base, other = frame["score_base"], frame["score_other"]
    figures = {
        "pearson": _correlation(base, other),
        "spearman": _correlation(base.rank(), other.rank()),
        "mean_base": float(base.mean()),
        "mean_other": float(other.mean()),
        "mean_diff": float((other - base).mean()),
        "auc_base": auc(base, frame["success"]),
        "auc_other": auc(other, frame["success"]),
    }
    return {"n": len(frame), **{key: _rounded(value) for key, value in figures.items()}}


def _correlation(a: pd.Series, b: pd.Series) -> float | None:
    if len(a) < 2 or a.nunique() < 2 or b.nunique() < 2:
        return None
    return float(a.corr(b))


def auc(scores: pd.Series, positive: pd.Series) -> float | None:
    """P(score of a positive > score of a negative), ties half: the area under the ROC curve
    (`mappa.core.auc`)."""
    return core_auc(scores.to_numpy(dtype=float), positive.to_numpy(dtype=bool))
