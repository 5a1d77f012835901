"""Per-task-kind figures of a batch of trajectories (DSBench: regression vs classification; MathChat: the
operation and form of the problem, `mappa.envs.mathchat.kinds`).

The MAPPA paper saw the coach favour one kind of task and the agents exploit it, so a run reports success,
the relative ("fair") score where the env has one, and each metric separately per kind, in the rollout and
evaluation manifests, and the score stage reports the coach's mean score per kind. Envs whose outcomes
carry no `kind` get None: nothing to split.

Not covered: significance tests; a kind with one trajectory is reported like any other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import fmean
from typing import Any

from mappa.core.types import ActionScore, Trajectory


def summarize_by_kind(trajectories: Sequence[Trajectory]) -> dict[str, dict[str, Any]] | None:
    """{kind: {trajectories, success_rate, fair_score_mean, metrics: {name: mean of valid values}}}."""
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for trajectory in trajectories:
        kind = trajectory.outcome.get("kind")
        if kind:
            groups[str(kind)].append(trajectory)
    if not groups:
        return None
    return {kind: _summary(group) for kind, group in sorted(groups.items())}


def _summary(group: list[Trajectory]) -> dict[str, Any]:
    metrics: dict[str, list[float]] = defaultdict(list)
    for trajectory in group:
        out = trajectory.outcome
        if out.get("valid") and out.get("value") is not None:
            metrics[str(out["metric"])].append(float(out["value"]))
    summary = {
        "trajectories": len(group),
        "success_rate": fmean(t.correct for t in group),
        "metrics": {name: fmean(values) for name, values in sorted(metrics.items())},
    }
    if any("fair_score" in t.outcome for t in group):
        summary["fair_score_mean"] = fmean(float(t.outcome.get("fair_score") or 0.0) for t in group)
    return summary


def coach_score_by_kind(
    scores: Sequence[ActionScore], trajectories: Sequence[Trajectory]
) -> dict[str, dict[str, float]] | None:
    """{kind: {agent: mean coach score}, with "all" for every agent together}; None without kinds."""
    kinds = {t.id: t.outcome.get("kind") for t in trajectories}
    if not any(kinds.values()):
        return None
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for score in scores:
        kind = kinds.get(score.trajectory_id)
        if kind:
            values[kind][score.agent].append(score.score)
            values[kind]["all"].append(score.score)
    return {kind: {agent: fmean(v) for agent, v in sorted(by.items())} for kind, by in sorted(values.items())}


def kind_rows(by_kind: dict[str, Any] | None, score_by_kind: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One flat row per kind for tables (Prefect artifacts, `mappa inspect`): the rollout's figures from
    `summarize_by_kind` and the coach's mean scores from `coach_score_by_kind`; [] when there are no kinds."""
    rows = []
    for kind, figures in sorted((by_kind or {}).items()):
        row: dict[str, Any] = {
            "kind": kind,
            "trajectories": figures["trajectories"],
            "success_rate": figures["success_rate"],
        }
        if "fair_score_mean" in figures:
            row["fair_score_mean"] = figures["fair_score_mean"]
        row.update({f"{name}_mean": value for name, value in figures["metrics"].items()})
        coach = (score_by_kind or {}).get(kind, {})
        row.update({f"coach_{agent}": value for agent, value in coach.items()})
        rows.append(row)
    return rows
