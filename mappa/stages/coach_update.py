"""The coach-update stage: the learning coach's head learns from the iteration's rollout (`coach.learn`).

Runs after the score stage of iteration K, which read every answer with the head of iteration K-1's
update (at K = 0: the coach model's own Yes/No readout, `HFEngine.answer_direction`), and writes the head
iteration K+1's score stage reads with (`head.json`):

1. **Out of sample, before it learns**: the AUC of the scores that head gave this iteration's actions
   (which it never learned from) against their trajectories' success, per seat. A head that learns only
   to predict the outcome is outcome-only with extra steps: its AUC against outcomes would climb while its
   blame accuracy (`mappa coach-check`) does not.
2. **Counterfactual pairs**: up to `coach.learn.replays` trajectories of the rollout (one per problem,
   successes first, each with a fair original); in each, the last action of every seat that did its part
   (the trajectory succeeded, or the env's `seat_checks` say so) gets one corruption (the env's or a
   generic one, `mappa.envs.corruption`, chosen by the run's seed among those that leave a usable output:
   the head never reads an action the score stage scores by rule), and the trajectory is replayed from it
   and from the action as stored, the later seats greedy with this iteration's weights
   (`mappa.stages.replays`, as the blame check replays). The pair is the action replayed as stored and as
   corrupted, each as the features of its seat's questions (`LearnedCriteriaCoach.question_features`).
   Every replayed action is also scored with the head in force: the blame check's figures per corrupted
   seat (blame accuracy, innocent-seat penalty; `mappa.core.blame`), out of sample, in `blame_before`.
3. **The update**: `mappa.coach.head.train_head` (Bradley-Terry on the pairs, anchored to the head it
   starts from; convex, so a resumed stage writes the same head). The manifest has the pairs' accuracy
   under the head before (out of sample) and after (in sample), the losses, and how far the head moved.

Writes `head.json` (the head and its version) and `pairs.parquet` (per pair: the trajectory, seat,
corruption and the action's log-odds under the head before and after). Not covered: other signals than
pairs (outcomes alone would teach the outcome; see 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import time
from dataclasses import replace
from typing import Any

import pandas as pd
import ray

from mappa.cluster.handles import WorkerHandle
from mappa.cluster.ray_cluster import COACH, coach_worker, release_worker
from mappa.coach.criteria import ANSWERS
from mappa.coach.head import AnswerHead, Pair, action_log_odds, pair_accuracy, train_head
from mappa.coach.learned import FeaturesFn, LearnedCriteriaCoach, is_no_question
from mappa.coach.prompt import load_template
from mappa.coach.score import build_all_requests, rule_verdict, score_trajectories, unusable_output
from mappa.config.coach import CoachConfig
from mappa.core.auc import auc
from mappa.core.blame import ORIGINAL, blame_rows, replay_pairs
from mappa.core.types import UNSCORED, Trajectory
from mappa.envs.corruption import corruptions_for
from mappa.stages.replays import run_replays
from mappa.stages.stage import Stage, output_parts, register, stage_complete, write_manifest
from mappa.storage.frames import frame_to_trajectories, read_scores
from mappa.storage.run import OUTPUTS, Run
from mappa.storage.store import ArtifactStore

STAGE_NAME = "coach-update"
PAIRS = "pairs.parquet"


def features_fn(worker: WorkerHandle):
    """The coach model's features over grouped question chats, on `worker` (`mappa.coach.learned`)."""

    async def features(groups: list[list[list[dict[str, str]]]]) -> list[list[list[float]]]:
        return await worker.chat_grouped_answer_features.remote(groups)

    return features


def remembered(features: FeaturesFn) -> FeaturesFn:
    """`features`, remembering each chat's: the blame pass scores every replayed action, and the pairs
    then read the same chats again, so the model computes each once. A group (one action's questions,
    which the worker batches together) with any chat not yet seen is sent whole."""
    seen: dict[str, list[float]] = {}

    async def features_once(groups: list[list[list[dict[str, str]]]]) -> list[list[list[float]]]:
        keys = [[json.dumps(chat, sort_keys=True) for chat in group] for group in groups]
        todo = [k for k, group_keys in enumerate(keys) if any(key not in seen for key in group_keys)]
        if todo:
            computed = await features([groups[k] for k in todo])
            for k, rows in zip(todo, computed, strict=True):
                seen.update(zip(keys[k], rows, strict=True))
        return [[seen[key] for key in group_keys] for group_keys in keys]

    return features_once


def head_for(run: Run, coach_config: CoachConfig, iteration: int | None, worker: WorkerHandle) -> AnswerHead:
    """The head the score stage of `iteration` reads with: the one iteration `iteration - 1`'s update wrote
    (None: the newest the run has), or at the start `coach.learn.start`'s head, else the coach model's own
    Yes/No readout. A coach that does not learn reads with its start head throughout."""
    start = coach_config.learn.start
    if not coach_config.learn.enabled:
        return start_head(start, worker)
    if iteration is None:
        done = [k for k in range(run.config.iterations) if stage_complete(run, k, STAGE_NAME)]
        iteration = done[-1] + 1 if done else 0
    if iteration == 0:
        return start_head(start, worker) if start else model_readout(worker)
    if not stage_complete(run, iteration - 1, STAGE_NAME):
        raise FileNotFoundError(
            f"run {run.run_id}: the learning coach's head of iteration {iteration - 1} is missing or stale "
            f"({STAGE_NAME} of that iteration did not finish): `mappa resume {run.run_id}` computes it"
        )
    return AnswerHead.from_record(run.store.read_json(*output_parts(run, iteration - 1, STAGE_NAME)))


def model_readout(worker: WorkerHandle) -> AnswerHead:
    """The coach model's own Yes/No readout as a head (its output layer's Yes row less its No row)."""
    direction, bias = ray.get(worker.answer_direction.remote(ANSWERS))
    return AnswerHead(tuple(direction), bias)


def start_head(path: str, worker: WorkerHandle) -> AnswerHead:
    """`coach.learn.start`'s head, checked against the coach model's features (their number)."""
    head = read_head(path)
    width = len(model_readout(worker).weight)
    if len(head.weight) != width:
        raise ValueError(
            f"coach.learn.start={path}: the head has {len(head.weight)} numbers, the coach model's features "
            f"{width}: it was learned on another coach model; use that run's coach.model, or another head"
        )
    return head


def read_head(path: str) -> AnswerHead:
    """A `head.json` a `coach-update` stage wrote, at a local path or an fsspec URL."""
    folder, _, name = path.rstrip("/").rpartition("/")
    store = ArtifactStore(folder or ".")
    if not store.exists(name):
        raise FileNotFoundError(
            f"coach.learn.start={path}: no such file. A learning run writes its heads as "
            f"RUN/iter-K/{STAGE_NAME}/{OUTPUTS[STAGE_NAME]} (`mappa inspect RUN` lists the iterations)"
        )
    try:
        return AnswerHead.from_record(store.read_json(name))
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"coach.learn.start={path} is not a coach head ({error}): give a {OUTPUTS[STAGE_NAME]} that a "
            f"{STAGE_NAME} stage wrote"
        ) from error


def update_coach(run: Run, iteration: int) -> dict[str, Any]:
    """The stage (module docstring); its manifest."""
    started = time.perf_counter()
    coach_config = run.config.coach.for_iteration(iteration)
    learn = coach_config.learn
    trajectories = frame_to_trajectories(run.store.read_parquet(*output_parts(run, iteration, "rollout")))
    scores = read_scores(run, iteration, "score")
    plans = planned_corruptions(run, iteration, trajectories, learn.replays)
    timings = {}
    with _timed(timings, "replays_s"):
        replayed = run_replays(run, iteration, plans) if plans else []
    worker = coach_worker(run, coach_config.model, COACH)
    try:
        head = head_for(run, coach_config, iteration, worker)
        coach = LearnedCriteriaCoach(
            remembered(features_fn(worker)), coach_config.model, load_template(coach_config.template), head
        )
        with _timed(timings, "blame_s"):
            blame = asyncio.run(blame_before(run, coach, coach_config, plans, replayed)) if plans else []
        with _timed(timings, "pairs_s"):
            pairs, ruled = asyncio.run(counterfactual_pairs(run, coach, coach_config, plans, replayed))
    finally:
        release_worker(run.run_id, COACH)
    with _timed(timings, "train_s"):
        learned, losses = train_head(head, [pair for pair, _ in pairs], learn.anchor, learn.max_steps)
    run.store.write_json(learned.to_record(), *output_parts(run, iteration, STAGE_NAME))
    run.store.write_parquet(pairs_frame(pairs, head, learned), *run.parts(iteration, STAGE_NAME, PAIRS))
    only_pairs = [pair for pair, _ in pairs]
    return write_manifest(
        run,
        iteration,
        STAGE_NAME,
        rows=len(pairs),
        timings={"total_s": time.perf_counter() - started, **timings},
        head_before=head.version,
        head_after=learned.version,
        moved=math.dist((*head.weight, head.bias), (*learned.weight, learned.bias)),
        outcome_auc=outcome_auc(trajectories, scores),
        blame_before=blame,
        pairs_by_seat=_counts(pair.seat for pair in only_pairs),
        pairs_by_corruption=_counts(pair.corruption for pair in only_pairs),
        left_out_ruled=ruled,
        pair_accuracy_before=pair_accuracy(head, only_pairs),
        pair_accuracy_after=pair_accuracy(learned, only_pairs),
        **losses,
    )


def planned_corruptions(
    run: Run, iteration: int, trajectories: list[Trajectory], replays: int
) -> list[dict[str, Any]]:
    """Two replay plans (as `mappa.stages.replays` takes them) per (chosen trajectory, seat that did its
    part): its last action as stored (the original) and with one applicable corruption chosen by the run's
    seed."""
    spec = run.config.env_spec
    declared = spec.corruptions() if spec.corruptions else ()
    chosen: dict[str, Trajectory] = {}
    for trajectory in sorted(trajectories, key=lambda t: (not t.correct, t.id)):  # successes first
        chosen.setdefault(trajectory.problem.id, trajectory)
    plans = []
    with_fair = [t for t in chosen.values() if fair_originals(spec, t)]
    for trajectory in with_fair[:replays]:
        fair = fair_originals(spec, trajectory)
        for seat in spec.seats:
            own = [a for a in trajectory.actions if a.agent == seat]
            if not own or seat not in fair:
                continue
            action = own[-1]
            variants = [(c.name, c.apply(action, trajectory)) for c in corruptions_for(declared, seat)]
            # a corruption that leaves nothing usable is scored by rule, never by the head: not a pair
            variants = [
                (name, text)
                for name, text in variants
                if text is not None and unusable_output(replace(action, response=text)) is None
            ]
            if not variants:
                continue
            rng = random.Random(f"{run.config.seed}:{iteration}:{trajectory.id}:{seat}")
            for name, text in [(ORIGINAL, action.response), rng.choice(variants)]:
                plans.append(
                    {
                        "id": f"learn:{trajectory.id}:{action.index}:{name}",
                        "seat": seat,
                        "index": action.index,
                        "corruption": name,
                        "text": text,
                        "trajectory": trajectory,
                    }
                )
    return plans


def fair_originals(spec, trajectory: Trajectory) -> set[str]:
    """The seats whose action is a fair original to corrupt: every seat of a successful trajectory, else
    those the env's `seat_checks` say did their part (none where the env has no checks)."""
    if trajectory.correct:
        return set(spec.seats)
    checks = spec.seat_checks(trajectory) if spec.seat_checks else {}
    return {seat for seat, done in checks.items() if done}


async def blame_before(run: Run, coach: LearnedCriteriaCoach, coach_config, plans, replayed) -> list[dict]:
    """The blame check's rows for the head in force (out of sample: fresh replays), per corrupted seat:
    every replayed action scored, each corrupted replay against its original (`mappa.core.blame`)."""
    spec = run.config.env_spec
    scored = await score_trajectories(
        coach, replayed, spec.roles, coach_config, reference_fn=spec.coach_reference
    )
    scores = {score.action_id: score.score for score in scored}
    pairs = replay_pairs(plans, replayed, scores, "head", tuple(spec.seats), spec.seat_checks)
    keep = ("seat", "pairs", "blame_accuracy", "innocent_penalty", "corrupted_seat_drop")
    return [{key: row[key] for key in keep} for row in blame_rows(pairs)]


async def counterfactual_pairs(run: Run, coach: LearnedCriteriaCoach, coach_config, plans, replayed):
    """([(pair, trajectory id)], how many corrupted actions were left out as ruled): the features of each
    corrupted action and of the same action replayed as stored, over the questions asked about both."""
    spec = run.config.env_spec
    requests = build_all_requests(replayed, spec.roles, coach_config, reference_fn=spec.coach_reference)
    by_id = {request.action_id: request for request in requests}
    replay_of = {plan["id"]: replay for plan, replay in zip(plans, replayed, strict=True)}
    targets, ruled = [], 0
    for plan in plans:
        if plan["corruption"] == ORIGINAL:
            continue
        original = replay_of[plan["id"].rsplit(":", 1)[0] + f":{ORIGINAL}"]
        before = by_id[_action_id(original, plan["index"])]
        after = by_id[_action_id(replay_of[plan["id"]], plan["index"])]
        if rule_verdict(after, coach_config, coach.model_name) is not None:
            ruled += 1
            continue
        if rule_verdict(before, coach_config, coach.model_name) is None:
            targets.append((plan, before, after))
    features = await coach.question_features([r for _, before, after in targets for r in (before, after)])
    pairs = []
    for k, (plan, _, _) in enumerate(targets):
        (asked_before, seen_before), (asked_after, seen_after) = features[2 * k], features[2 * k + 1]
        common = [q for q in asked_before if q in asked_after]
        if not common:
            continue
        pair = Pair(
            seat=plan["seat"],
            original=tuple(tuple(seen_before[asked_before.index(q)]) for q in common),
            corrupted=tuple(tuple(seen_after[asked_after.index(q)]) for q in common),
            wants_no=tuple(is_no_question(q) for q in common),
            corruption=plan["corruption"],
        )
        pairs.append((pair, plan["trajectory"].id))
    return pairs, ruled


def outcome_auc(trajectories: list[Trajectory], scores) -> dict[str, float | None]:
    """Per seat (and `all`), the AUC of the scores against their trajectories' success (scored actions)."""
    correct = {t.id: t.correct for t in trajectories}
    rows = [(s.agent, s.score, correct[s.trajectory_id]) for s in scores if s.parse_status != UNSCORED]
    out = {"all": auc([r[1] for r in rows], [r[2] for r in rows])}
    for seat in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == seat]
        out[seat] = auc([r[1] for r in mine], [r[2] for r in mine])
    return out


def pairs_frame(pairs, before: AnswerHead, after: AnswerHead) -> pd.DataFrame:
    """One row per pair: its trajectory, seat, corruption, and the action's log-odds as rolled out and as
    corrupted under the head before and after the update."""
    rows = []
    for pair, trajectory_id in pairs:
        row = {"trajectory_id": trajectory_id, "seat": pair.seat, "corruption": pair.corruption}
        for name, head in (("before", before), ("after", after)):
            row[f"original_{name}"] = action_log_odds(head, pair.original, pair.wants_no)
            row[f"corrupted_{name}"] = action_log_odds(head, pair.corrupted, pair.wants_no)
        rows.append(row)
    columns = ["trajectory_id", "seat", "corruption"]
    columns += [f"{kind}_{name}" for name in ("before", "after") for kind in ("original", "corrupted")]
    return pd.DataFrame(rows, columns=columns)


def _action_id(trajectory: Trajectory, index: int) -> str:
    return next(a.id for a in trajectory.actions if a.index == index)


@contextlib.contextmanager
def _timed(timings: dict[str, float], name: str):
    """Adds the seconds the block took to `timings[name]`."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = round(time.perf_counter() - started, 2)


def _counts(values) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def describe(manifest: dict[str, Any]) -> str:
    before, after = manifest["pair_accuracy_before"], manifest["pair_accuracy_after"]
    accuracy = "no pairs" if before is None else f"pair accuracy {before:.2f} -> {after:.2f}"
    return (
        f"coach head {manifest['head_before']} -> {manifest['head_after']} on {manifest['rows']} "
        f"counterfactual pairs ({accuracy}; outcome AUC before {_rounded(manifest['outcome_auc']['all'])})"
    )


def _rounded(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


STAGE = register(
    Stage(
        STAGE_NAME,
        OUTPUTS[STAGE_NAME],
        update_coach,
        describe,
        inputs=("rollout", "score"),
        previous=(STAGE_NAME,),  # the head it starts from
    )
)
