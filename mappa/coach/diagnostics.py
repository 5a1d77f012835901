"""What a score stage's manifest says about its coach, besides the scores: is the coach to be trusted?

    parse_status, parse_status_by_agent, criteria_means   the verdicts by parse status (`fallback`: unscored,
                        out of the gradient; `rule`: no usable output, scored by rule), per agent, and for
                        the criteria coach each question's mean P(Yes) per agent
    bias                mean score per agent and for correct vs incorrect trajectories (a coach whose scores
                        do not track outcomes at all is visible here; `mappa.coach.score_agreement`)
    mean_score_by_kind  the same per task kind, where the env grades by kind
    rubric_agreement    an LLM coach's per-agent correlation with the env's rubric on the same actions (None
                        for the rubric itself and for an env without a rubric)
    answer_shares, bias_warnings   the coach-bias watch (`mappa.coach.exploit_watch`): each agent's share of
                        repeated and copied-from-prompt final answers (`{}` for an env that declares no
                        `EnvSpec.answers`), and the warnings (a category whose mean score rose over the last
                        DRIFT_WINDOW iterations with flat success; an answer share that jumped), which the
                        flow logs and the iteration report lists

Not covered: scoring itself (`mappa.stages.score`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from mappa.coach.build import build_coach
from mappa.coach.exploit_watch import answer_shares, collapse_warnings, drift_warnings
from mappa.coach.score import score_trajectories
from mappa.coach.score_agreement import agreement_by_agent, coach_bias_report
from mappa.config import CoachConfig
from mappa.core.types import ActionScore, Trajectory
from mappa.envs.outcome_summary import coach_score_by_kind
from mappa.storage.run import Run

DRIFT_WINDOW = 3
"""Iterations over which a category's mean coach score must rise, with flat success, to be flagged."""


def diagnose(
    run: Run,
    iteration: int,
    stage: str,
    coach_config: CoachConfig,
    trajectories: list[Trajectory],
    scores: list[ActionScore],
) -> dict[str, Any]:
    """The manifest's diagnostic fields for stage `stage` of `iteration` (see the module's docstring)."""
    bias = coach_bias_report(scores, trajectories)
    by_kind = coach_score_by_kind(scores, trajectories)
    shares = answer_shares(trajectories, run.config.env_spec.answers)
    return {
        **verdict_counts(scores),
        "bias": bias,
        "mean_score_by_kind": by_kind,
        "rubric_agreement": rubric_agreement(run, coach_config, trajectories, scores),
        "answer_shares": shares,
        "bias_warnings": watch_warnings(run, iteration, stage, bias, by_kind, shares),
    }


def rubric_agreement(
    run: Run, coach_config: CoachConfig, trajectories: list[Trajectory], scores: list[ActionScore]
) -> dict[str, float | None] | None:
    """How far another coach agrees with the explicit rules on the same actions, per agent (None for the
    rubric itself, and for an env without a rubric)."""
    spec = run.config.env_spec
    if coach_config.type == "rubric" or spec.rubric is None:
        return None
    rubric = build_coach(coach_config.model_copy(update={"type": "rubric"}), None, spec)
    ruled = asyncio.run(
        score_trajectories(rubric, trajectories, spec.roles, coach_config, reference_fn=spec.coach_reference)
    )
    return agreement_by_agent(scores, ruled)


def verdict_counts(scores: list[ActionScore]) -> dict[str, Any]:
    """The manifest's counts of verdicts: by parse status, by agent and parse status, and, for the criteria
    coach, each agent's mean P(Yes) per question (`criteria_means`, None for other coaches)."""
    by_agent: dict[str, Counter] = {}
    criteria: dict[str, dict[str, list[float]]] = {}
    for score in scores:
        by_agent.setdefault(score.agent, Counter())[score.parse_status] += 1
        for question, p in (score.criteria or {}).items():
            criteria.setdefault(score.agent, {}).setdefault(question, []).append(p)
    means = {
        agent: {question: sum(ps) / len(ps) for question, ps in questions.items()}
        for agent, questions in criteria.items()
    }
    return {
        "parse_status": dict(Counter(s.parse_status for s in scores)),
        "parse_status_by_agent": {agent: dict(counts) for agent, counts in sorted(by_agent.items())},
        "criteria_means": means or None,
    }


def watch_warnings(
    run: Run,
    iteration: int,
    stage: str,
    bias: dict[str, Any],
    by_kind: dict[str, dict[str, float]] | None,
    shares: dict[str, dict[str, Any]],
) -> list[dict[str, Any]]:
    """The coach-bias watch (`mappa.coach.exploit_watch`) over this iteration and the previous ones: score
    drift per agent and per task kind against success, and answer collapse per agent since the last
    iteration."""
    history: dict[str, list[tuple[int, float, float]]] = {}
    previous_shares = None
    for k in range(max(0, iteration - DRIFT_WINDOW + 1), iteration + 1):
        if k == iteration:
            agent_means, kind_means = bias.get("mean_by_agent", {}), by_kind or {}
        elif run.has_manifest(k, stage):
            before = run.read_manifest(k, stage)
            agent_means = (before.get("bias") or {}).get("mean_by_agent", {})
            kind_means = before.get("mean_score_by_kind") or {}
            previous_shares = before.get("answer_shares") if k == iteration - 1 else previous_shares
        else:
            continue
        rollout = run.read_manifest(k, "rollout")
        for agent, mean in agent_means.items():
            history.setdefault(f"agent {agent}", []).append((k, mean, rollout.get("success_rate") or 0.0))
        for kind, means in kind_means.items():
            success = ((rollout.get("by_kind") or {}).get(kind) or {}).get("success_rate")
            if success is not None and "all" in means:
                history.setdefault(f"kind {kind}", []).append((k, means["all"], success))
    return drift_warnings(history, window=DRIFT_WINDOW) + collapse_warnings(previous_shares, shares)
