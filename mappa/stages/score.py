"""The score stage: trajectories.parquet -> scores.parquet, one coach verdict per action.

Builds the configured coach (the local one answers through the run's `coach` Ray worker, greedy), scores
every action, writes the scores and a manifest with the parse statistics and a bias report (mean score per
agent and for correct vs incorrect trajectories: a coach whose scores do not track outcomes at all is
visible here) and, for LLM coaches, their per-agent correlation with the rubric coach's scores on the same
actions (`rubric_agreement`). LLM coach answers go through the run's `AnswerCache`: a repeated or resumed
stage asks only for what it has no answer to (`coach_cache` in the manifest counts hits and new answers).
Skipped when its manifest matches.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from mappa.cluster.ray_cluster import coach_worker
from mappa.coach.bias import agreement_by_agent, coach_bias_report
from mappa.coach.build import build_coach, cache_settings
from mappa.coach.cache import AnswerCache
from mappa.coach.score import score_trajectories
from mappa.envs.outcome_summary import coach_score_by_kind
from mappa.envs.registry import get_env_spec
from mappa.stages.stage import Stage, output_parts, register, write_manifest
from mappa.storage.frames import frame_to_trajectories, scores_to_frame
from mappa.storage.run import Run


def local_coach_fns(run: Run):
    """The local coach's batch chat (greedy generation) and next-token logprobs, on the run's coach worker."""
    worker = coach_worker(run)
    coach = run.config.coach
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
    """Score every action of iteration `iteration`; write scores.parquet and the manifest."""
    started = time.perf_counter()
    config = run.config
    trajectories = frame_to_trajectories(run.store.read_parquet(*output_parts(run, iteration, "rollout")))
    fns = local_coach_fns(run) if config.coach.type == "local" else (None, None, None)
    chat_fn, logprob_fn, grouped_fn = fns
    cache = AnswerCache(run.store, run.run_id, config.coach.model, cache_settings(config.coach))
    coach = build_coach(config.coach, chat_fn, config.env.type, logprob_fn, cache, grouped_fn)
    spec = get_env_spec(config.env.type)
    reference = spec.coach_reference
    scores = asyncio.run(
        score_trajectories(coach, trajectories, spec.roles, config.coach, reference_fn=reference)
    )
    frame = scores_to_frame(scores)
    run.store.write_parquet(frame, *output_parts(run, iteration, "score"))
    status = Counter(s.parse_status for s in scores)
    agreement = None
    if config.coach.type != "rubric":  # how far another coach agrees with the explicit rules, per agent
        rubric = build_coach(config.coach.model_copy(update={"type": "rubric"}), None, config.env.type)
        ruled = asyncio.run(
            score_trajectories(rubric, trajectories, spec.roles, config.coach, reference_fn=reference)
        )
        agreement = agreement_by_agent(scores, ruled)
    return write_manifest(
        run,
        iteration,
        "score",
        rows=len(frame),
        timings={"total_s": time.perf_counter() - started},
        coach_model=coach.model_name,
        used_ground_truth=config.coach.use_ground_truth,
        parse_status=dict(status),
        bias=coach_bias_report(scores, trajectories),
        mean_score_by_kind=coach_score_by_kind(scores, trajectories),
        rubric_agreement=agreement,
        coach_cache=cache.stats(),
    )


def describe(manifest: dict[str, Any]) -> str:
    return f"{manifest['rows']} actions scored by {manifest['coach_model']}, parse {manifest['parse_status']}"


STAGE = register(Stage("score", "scores.parquet", score_iteration, describe, inputs=("rollout",)))
