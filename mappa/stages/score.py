"""The score stage: trajectories.parquet -> scores.parquet, one coach verdict per action.

Builds the configured coach (the local one answers through the run's `coach` Ray worker, greedy), scores
every action, writes the scores and a manifest with the parse statistics and a bias report (mean score per
agent and for correct vs incorrect trajectories: a coach whose scores do not track outcomes at all is
visible here) and, for LLM coaches, their per-agent correlation with the rubric coach's scores on the same
actions (`rubric_agreement`). LLM coach answers go through the run's `AnswerCache`: a repeated or resumed
stage asks only for what it has no answer to (`coach_cache` in the manifest counts hits and new answers).
The manifest also carries the coach-bias watch (`mappa.coach.drift`): each agent's share of repeated and
copied-from-prompt final answers (`answer_shares`) and `bias_warnings` (a category whose mean score rose
over the last DRIFT_WINDOW iterations with flat success; an answer share that jumped), which the flow logs
as warnings and the iteration report lists. Per agent, `parse_status_by_agent` counts the verdicts by
parse status (`fallback`: unscored, out of the gradient; `rule`: no usable output, scored by rule), and
for the criteria coach `criteria_means` holds each question's mean P(Yes). A fallback is not final: a
re-run asks the coach again about those actions (`fallbacks_asked_again`, `mappa.coach.base`), and a
re-scoring with `fallbacks_of` (`mappa rescore --fallbacks-only`) keeps every other verdict of that stage
and asks about its fallbacks alone. Skipped when its manifest matches.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import replace
from typing import Any

from mappa.cluster.ray_cluster import COACH, coach_worker, release_worker
from mappa.coach.base import Coach
from mappa.coach.bias import agreement_by_agent, coach_bias_report
from mappa.coach.build import build_coach, cache_settings
from mappa.coach.cache import AnswerCache
from mappa.coach.drift import answer_shares, collapse_warnings, drift_warnings
from mappa.coach.score import score_trajectories
from mappa.config import CoachConfig
from mappa.core.types import UNSCORED, ActionScore, Trajectory
from mappa.envs.outcome_summary import coach_score_by_kind
from mappa.envs.registry import get_env_spec
from mappa.stages.stage import Stage, output_parts, register, write_manifest
from mappa.storage.frames import frame_to_scores, frame_to_trajectories, scores_to_frame
from mappa.storage.run import OUTPUTS, Run

DRIFT_WINDOW = 3
"""Iterations over which a category's mean coach score must rise, with flat success, to be flagged."""


def local_coach_fns(run: Run, coach: CoachConfig, worker_name: str = COACH):
    """The local coach's batch chat (greedy generation) and next-token logprobs, on the worker
    `worker_name` of the run (the run's own coach, or a re-scoring's)."""
    worker = coach_worker(run, coach.model, worker_name)
    params = {
        "temperature": coach.temperature,
        "top_p": 1.0,
        "max_new_tokens": coach.max_new_tokens,
        "stop": [],
        "seed": run.config.seed,
    }

    async def chat(chats: list[list[dict[str, str]]]) -> list[str]:
        answers = await worker.chat.remote(chats, params)
        return [generation["text"] for _, generation, _ in answers]

    async def logprobs(chats, prefix: str, candidates: list[str], positions: int) -> list[list[list[float]]]:
        return await worker.chat_next_token_logprobs.remote(chats, prefix, candidates, positions)

    async def grouped(groups, candidates: list[str]) -> list[list[list[float]]]:
        return await worker.chat_grouped_next_token_logprobs.remote(groups, candidates)

    return chat, logprobs, grouped


def score_iteration(run: Run, iteration: int) -> dict[str, Any]:
    """Score every action of iteration `iteration` with the run's coach; write scores.parquet and the
    manifest. A local coach's model is let go afterwards: it would sit idle, holding gigabytes, through
    the advantages, the update and the next rollout (the next score stage loads it again, in seconds)."""
    manifest = score_actions(run, iteration, "score", run.config.coach)
    if run.config.coach.type == "local":
        release_worker(run.run_id, COACH)
    return manifest


def score_actions(
    run: Run,
    iteration: int,
    stage: str,
    coach_config: CoachConfig,
    worker_name: str = COACH,
    fallbacks_of: str | None = None,
) -> dict[str, Any]:
    """Score the actions of iteration `iteration`'s rollout with `coach_config`; write the scores as stage
    `stage`'s output and its manifest (the score stage, or a re-scoring: `mappa.stages.rescore`). With
    `fallbacks_of` (a stage of scores), that stage's verdicts are kept and only its fallbacks are asked."""
    started = time.perf_counter()
    coach_config = coach_config.for_iteration(iteration)  # the template its schedule gives this iteration
    trajectories = frame_to_trajectories(run.store.read_parquet(*output_parts(run, iteration, "rollout")))
    coach, cache = stage_coach(run, coach_config, worker_name)
    spec = get_env_spec(run.config.env.type)
    known = kept_verdicts(run, iteration, fallbacks_of) if fallbacks_of else {}
    scores = asyncio.run(
        score_trajectories(
            coach, trajectories, spec.roles, coach_config, reference_fn=spec.coach_reference, known=known
        )
    )
    scores = [s if s.action_id in known else replace(s, template=coach_config.template) for s in scores]
    frame = scores_to_frame(scores)
    run.store.write_parquet(frame, *output_parts(run, iteration, stage))
    agreement = rubric_agreement(run, coach_config, trajectories, scores)
    bias = coach_bias_report(scores, trajectories)
    by_kind = coach_score_by_kind(scores, trajectories)
    shares = answer_shares(trajectories)
    warnings = watch_warnings(run, iteration, stage, bias, by_kind, shares)
    redone = {"fallbacks_only": True, "fallbacks_rescored": len(scores) - len(known)} if fallbacks_of else {}
    return write_manifest(
        run,
        iteration,
        stage,
        rows=len(frame),
        timings={"total_s": time.perf_counter() - started},
        coach_model=coach.model_name,
        template=coach_config.template,
        used_ground_truth=coach_config.use_ground_truth,
        **verdict_counts(scores),
        bias=bias,
        mean_score_by_kind=by_kind,
        rubric_agreement=agreement,
        coach_cache=cache.stats(),
        coach_usage=getattr(coach, "usage", None),  # an endpoint's coach: requests and tokens it reported
        fallbacks_asked_again=getattr(coach, "asked_again", None),  # an LLM coach's cached fallbacks
        answer_shares=shares,
        bias_warnings=warnings,
        **redone,
    )


def stage_coach(run: Run, coach_config: CoachConfig, worker_name: str) -> tuple[Coach, AnswerCache]:
    """The coach a score stage asks (a local one through the run's worker `worker_name`), with the run's
    answer cache."""
    local = coach_config.type == "local"
    chat_fn, logprob_fn, grouped_fn = (
        local_coach_fns(run, coach_config, worker_name) if local else (None, None, None)
    )
    cache = AnswerCache(run.store, run.run_id, coach_config.model, cache_settings(coach_config))
    coach = build_coach(coach_config, chat_fn, run.config.env.type, logprob_fn, cache, grouped_fn)
    return coach, cache


def rubric_agreement(
    run: Run, coach_config: CoachConfig, trajectories: list[Trajectory], scores: list[ActionScore]
) -> dict[str, float | None] | None:
    """How far another coach agrees with the explicit rules on the same actions, per agent (None for the
    rubric itself, and for an env without a rubric)."""
    env_type = run.config.env.type
    spec = get_env_spec(env_type)
    if coach_config.type == "rubric" or spec.rubric is None:
        return None
    rubric = build_coach(coach_config.model_copy(update={"type": "rubric"}), None, env_type)
    ruled = asyncio.run(
        score_trajectories(rubric, trajectories, spec.roles, coach_config, reference_fn=spec.coach_reference)
    )
    return agreement_by_agent(scores, ruled)


def kept_verdicts(run: Run, iteration: int, stage: str) -> dict[str, ActionScore]:
    """Stage `stage`'s verdicts of iteration `iteration` by action id, its fallbacks left out."""
    own = frame_to_scores(run.store.read_parquet(*output_parts(run, iteration, stage)))
    return {score.action_id: score for score in own if score.parse_status != UNSCORED}


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
    """The coach-bias watch (`mappa.coach.drift`) over this iteration and the previous ones: score drift
    per agent and per task kind against success, and answer collapse per agent since the last iteration."""
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


def describe(manifest: dict[str, Any]) -> str:
    return f"{manifest['rows']} actions scored by {manifest['coach_model']}, parse {manifest['parse_status']}"


STAGE = register(Stage("score", OUTPUTS["score"], score_iteration, describe, inputs=("rollout",)))
