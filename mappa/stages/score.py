"""The score stage: trajectories.parquet -> scores.parquet, one coach verdict per action.

Builds the configured coach (the local one answers through the run's `coach` Ray worker, greedy), scores
every action, writes the scores and a manifest with the parse statistics and the coach's diagnostics
(`mappa.coach.diagnostics`: bias report, rubric agreement, the coach-bias watch). LLM coach answers
go through the run's `AnswerCache`: a repeated or resumed stage asks only for what it has no answer to
(`coach_cache` in the manifest counts hits and new answers). A fallback is not final: a re-run asks the
coach again about those actions (`fallbacks_asked_again`, `mappa.coach.base`), and a re-scoring with
`fallbacks_of` (`mappa rescore --fallbacks-only`) keeps every other verdict of that stage and asks about its
fallbacks alone. Skipped when its manifest matches.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from mappa.cluster.handles import WorkerHandle
from mappa.cluster.ray_cluster import COACH, coach_worker, release_worker
from mappa.coach.base import Coach
from mappa.coach.build import build_coach, cache_settings
from mappa.coach.cache import AnswerCache
from mappa.coach.diagnostics import diagnose
from mappa.coach.score import score_trajectories
from mappa.config import CoachConfig, RunConfig
from mappa.core.types import UNSCORED, ActionScore
from mappa.stages.coach_update import STAGE_NAME as COACH_UPDATE
from mappa.stages.coach_update import features_fn, head_for
from mappa.stages.stage import Stage, output_parts, register, write_manifest
from mappa.storage.frames import frame_to_trajectories, read_scores, scores_to_frame
from mappa.storage.run import OUTPUTS, Run


def local_coach_fns(run: Run, coach: CoachConfig, worker_name: str = COACH):
    """The local coach's batch chat (greedy generation) and next-token logprobs, on the worker
    `worker_name` of the run (the run's own coach, or a re-scoring's)."""
    return coach_fns(coach_worker(run, coach.model, worker_name), coach, run.config.seed)


def coach_fns(worker: WorkerHandle, coach: CoachConfig, seed: int):
    """A local coach's batch chat (greedy generation) and next-token logprobs on `worker` (a Ray handle, or
    one in this process: `mappa ask`)."""
    params = {
        "temperature": coach.temperature,
        "top_p": 1.0,
        "max_new_tokens": coach.max_new_tokens,
        "stop": [],
        "seed": seed,
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
    if run.config.coach.runs_local_model:
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
    coach, cache = stage_coach(run, coach_config, worker_name, iteration)
    spec = run.config.env_spec
    known = kept_verdicts(run, iteration, fallbacks_of) if fallbacks_of else {}
    scores = asyncio.run(
        score_trajectories(
            coach, trajectories, spec.roles, coach_config, reference_fn=spec.coach_reference, known=known
        )
    )
    scores = [s if s.action_id in known else replace(s, template=coach_config.template) for s in scores]
    frame = scores_to_frame(scores)
    run.store.write_parquet(frame, *output_parts(run, iteration, stage))
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
        **diagnose(run, iteration, stage, coach_config, trajectories, scores),
        coach_cache=cache.stats(),
        coach_usage=getattr(coach, "usage", None),  # an endpoint's coach: requests and tokens it reported
        fallbacks_asked_again=getattr(coach, "asked_again", None),  # an LLM coach's cached fallbacks
        **redone,
    )


def stage_coach(
    run: Run, coach_config: CoachConfig, worker_name: str, iteration: int | None = None
) -> tuple[Coach, AnswerCache]:
    """The coach a score stage asks (a local one through the run's worker `worker_name`), with the run's
    answer cache; a learning coach reads with the head the score stage of `iteration` reads with (None:
    the run's newest, `mappa.stages.coach_update.head_for`)."""
    local = coach_config.runs_local_model
    chat_fn, logprob_fn, grouped_fn = (
        local_coach_fns(run, coach_config, worker_name) if local else (None, None, None)
    )
    features, head = None, None
    if coach_config.learn.reads_head:
        worker = coach_worker(run, coach_config.model, worker_name)
        features, head = features_fn(worker), head_for(run, coach_config, iteration, worker)
    cache = AnswerCache(run.store, run.run_id, coach_config.model, cache_settings(coach_config))
    coach = build_coach(
        coach_config, chat_fn, run.config.env_spec, logprob_fn, cache, grouped_fn, features, head
    )
    return coach, cache


def kept_verdicts(run: Run, iteration: int, stage: str) -> dict[str, ActionScore]:
    """Stage `stage`'s verdicts of iteration `iteration` by action id, its fallbacks left out."""
    own = read_scores(run, iteration, stage)
    return {score.action_id: score for score in own if score.parse_status != UNSCORED}


def describe(manifest: dict[str, Any]) -> str:
    return f"{manifest['rows']} actions scored by {manifest['coach_model']}, parse {manifest['parse_status']}"


def learning_head(config: RunConfig) -> tuple[str, ...]:
    """The learning coach's head, where `coach.learn` is on: the previous iteration's `coach-update`."""
    return (COACH_UPDATE,) if config.coach.learn.enabled else ()


STAGE = register(
    Stage(
        "score",
        OUTPUTS["score"],
        score_iteration,
        describe,
        inputs=("rollout",),
        previous_when=learning_head,
    )
)
