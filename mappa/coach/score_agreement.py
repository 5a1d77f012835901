"""How the coach's scores agree with outcomes and with the rubric: means per agent and per trajectory
outcome (`coach_bias_report`), correlation with a rubric's scores per agent (`agreement_by_agent`).

`gap` = mean score on correct trajectories minus mean on incorrect ones. A clearly positive gap says
scores follow outcomes; a gap near 0 says they do not (or that per-action quality varies independently
of the outcome). When the coach saw the ground truth (`used_ground_truth_fraction` > 0) a positive gap is
expected and is no independent evidence. Fallback scores are counted too (`fallback_fraction`), since
they dilute the gap toward zero.

Not covered here: significance tests or calibration; this is a glance, not a study.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from statistics import fmean
from typing import Any

from mappa.core.types import ActionScore, Trajectory


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def coach_bias_report(scores: Sequence[ActionScore], trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """Means per agent, per outcome, per agent and outcome; the correct - incorrect gap; parse statuses."""
    outcome = {t.id: t.correct for t in trajectories}
    unknown = sorted({s.trajectory_id for s in scores} - set(outcome))
    if unknown:
        raise ValueError(f"scores refer to trajectories not given: {unknown[:5]} ({len(unknown)} in all)")
    by_agent: dict[str, list[float]] = defaultdict(list)
    by_outcome: dict[str, list[float]] = {"correct": [], "incorrect": []}
    by_both: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"correct": [], "incorrect": []})
    for s in scores:
        key = "correct" if outcome[s.trajectory_id] else "incorrect"
        by_agent[s.agent].append(s.score)
        by_outcome[key].append(s.score)
        by_both[s.agent][key].append(s.score)
    correct, incorrect = _mean(by_outcome["correct"]), _mean(by_outcome["incorrect"])
    n = len(scores)
    return {
        "n_scores": n,
        "n_trajectories": len(trajectories),
        "n_correct_trajectories": sum(t.correct for t in trajectories),
        "mean_by_agent": {a: fmean(v) for a, v in sorted(by_agent.items())},
        "mean_correct": correct,
        "mean_incorrect": incorrect,
        "gap": correct - incorrect if correct is not None and incorrect is not None else None,
        "mean_by_agent_and_outcome": {
            a: {k: _mean(v) for k, v in d.items()} for a, d in sorted(by_both.items())
        },
        "parse_status_counts": dict(Counter(s.parse_status for s in scores)),
        "fallback_fraction": sum(s.parse_status == "fallback" for s in scores) / n if n else 0.0,
        "used_ground_truth_fraction": sum(s.used_ground_truth for s in scores) / n if n else 0.0,
    }


def agreement_by_agent(
    scores: Sequence[ActionScore], reference: Sequence[ActionScore]
) -> dict[str, float | None]:
    """Pearson correlation, per agent, between a coach's scores and a reference coach's (the rubric) on the
    same actions; None where either side is constant (no correlation is defined)."""
    ref = {s.action_id: s.score for s in reference}
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for score in scores:
        if score.action_id in ref:
            pairs[score.agent].append((score.score, ref[score.action_id]))
    return {agent: _pearson(values) for agent, values in sorted(pairs.items())}


def _pearson(pairs: list[tuple[float, float]]) -> float | None:
    if len(pairs) < 2:
        return None
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    mx, my = fmean(xs), fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in pairs) / (sxx * syy) ** 0.5
