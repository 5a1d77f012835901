"""The blame check of a run: corrupt one action at a time, replay, score with several coaches, compare.

`check_blame(run, iteration, coaches, seats, problems)` takes the first `problems` trajectories (one per
problem) of iteration `iteration`'s rollout, and for each seat in `seats` its last action (what the seats
after it saw; DSBench's engineer may run several programs before it): it replays the
trajectory with that action as stored (the original) and once per corruption the env declares or every
env gets (`mappa.envs.corruption`), later actions generated anew, greedily, by the policy that rolled the
iteration out (`mappa.blame.replay`). Every replay is scored by every coach (`coaches`: a name and the
`coach.*` overrides of the run's config, as `mappa rescore` takes them; answers through the run's cache),
and the pairs give each coach's blame accuracy and innocent-seat penalty per corrupted seat
(`mappa.core.blame`).

Writes `RUN/coach-check/iter-K/`: `replays.parquet` (every replay, reused by a later check with the same
trajectories, seats and corruptions: greedy replays are deterministic), `scores-<coach>.parquet`, and
`report.json` (the rows, each pair's per-seat scores, the settings). Not covered: envs whose rollout is
random beyond the policy's sampling (`upstream_changed` counts such replays).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from statistics import fmean
from typing import Any

from mappa.blame.replay import coalescing_agents, replay, upstream_changed
from mappa.cluster.ray_cluster import agent_workers
from mappa.coach.score import score_trajectories
from mappa.config import RunConfig
from mappa.core.blame import BlamePair, blame_rows
from mappa.core.types import Trajectory
from mappa.envs.corruption import corruptions_for
from mappa.envs.registry import get_env_spec
from mappa.inference.engine import SamplingParams
from mappa.stages.rescore import rescore_settings
from mappa.stages.rollout import build_agents, sandbox_limits
from mappa.stages.score import stage_coach
from mappa.stages.stage import output_parts, stage_complete
from mappa.storage.frames import frame_to_trajectories, scores_to_frame, trajectories_to_frame
from mappa.storage.run import Run, iteration_name

ORIGINAL = "original"
REPLAYS = "replays.parquet"


def check_parts(run: Run, iteration: int, name: str) -> tuple[str, ...]:
    return (run.run_id, "coach-check", iteration_name(iteration), name)


def coach_configs(run: Run, coaches: dict[str, list[str]]) -> dict[str, RunConfig]:
    """Each coach's config: the run's with its `coach.*` overrides; checked before any work."""
    return {name: rescore_settings(run, overrides) for name, overrides in coaches.items()}


def sample_trajectories(run: Run, iteration: int, problems: int) -> list[Trajectory]:
    """One trajectory per problem of the iteration's rollout, `problems` of them: a successful one where
    the problem has one, problems with a success first (from a success, the corruption alone makes the
    difference), in the rollout's order otherwise."""
    if not stage_complete(run, iteration, "rollout"):
        raise ValueError(
            f"iteration {iteration} of run {run.run_id} has no finished rollout to check; pick another "
            f"--iteration (0 is the base team's rollout)"
        )
    chosen: dict[str, Trajectory] = {}
    rollout = frame_to_trajectories(run.store.read_parquet(*output_parts(run, iteration, "rollout")))
    for trajectory in sorted(rollout, key=lambda t: not t.correct):  # successes first: the sharpest pairs
        chosen.setdefault(trajectory.problem.id, trajectory)
    return sorted(chosen.values(), key=lambda t: not t.correct)[:problems]


def planned_replays(run: Run, trajectories: list[Trajectory], seats: list[str]) -> list[dict[str, Any]]:
    """One plan per (trajectory, seat's last action, original or corruption): ids and the forced text."""
    spec = get_env_spec(run.config.env.type)
    declared = spec.corruptions() if spec.corruptions else ()
    plans = []
    for trajectory in trajectories:
        for seat in seats:
            own = [a for a in trajectory.actions if a.agent == seat]
            if not own:
                continue
            action = own[-1]  # its last: what the seats after it were shown
            variants = [(ORIGINAL, action.response)]
            variants += [(c.name, c.apply(action, trajectory)) for c in corruptions_for(declared, seat)]
            for name, text in variants:
                if text is not None:
                    replay_id = f"check:{trajectory.id}:{action.index}:{name}"
                    plan = {"id": replay_id, "seat": seat, "index": action.index, "corruption": name}
                    plans.append(plan | {"text": text, "trajectory": trajectory})
    return plans


def run_replays(run: Run, iteration: int, plans: list[dict[str, Any]]) -> list[Trajectory]:
    """Every planned replay, concurrently, downstream agents greedy with the iteration's rollout weights."""
    spec = get_env_spec(run.config.env.type)
    purpose = f"the blame check of iteration {iteration}"
    workers = agent_workers(run, iteration, "weights", purpose)
    params = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=run.config.rollout.max_new_tokens)
    agents = coalescing_agents(build_agents(run, workers, params))
    limits = sandbox_limits(run)

    async def all_replays() -> list[Trajectory]:
        return await asyncio.gather(
            *(
                replay(spec, p["trajectory"], p["index"], p["text"], agents, limits, run.config.env, p["id"])
                for p in plans
            )
        )

    return asyncio.run(all_replays())


def score_replays(run: Run, iteration: int, config: RunConfig, replays: list[Trajectory], name: str):
    """Each action's score by the coach of `config` (action id -> score), through the run's answer cache."""
    spec = get_env_spec(run.config.env.type)
    coach, _ = stage_coach(run, config.coach, worker_name=f"coach-check-{name}")
    scores = asyncio.run(
        score_trajectories(coach, replays, spec.roles, config.coach, reference_fn=spec.coach_reference)
    )
    run.store.write_parquet(scores_to_frame(scores), *check_parts(run, iteration, f"scores-{name}.parquet"))
    return {score.action_id: score.score for score in scores}


def blame_pairs(run: Run, plans, replays, scores: dict[str, float], coach: str) -> list[BlamePair]:
    """The pairs of one coach: each corrupted replay against the original replay of the same action."""
    spec = get_env_spec(run.config.env.type)
    by_id = {trajectory.id: trajectory for trajectory in replays}
    pairs = []
    for plan in plans:
        if plan["corruption"] == ORIGINAL:
            continue
        original = by_id[plan["id"].rsplit(":", 1)[0] + f":{ORIGINAL}"]
        corrupted = by_id[plan["id"]]
        did_part = spec.seat_checks(corrupted) if spec.seat_checks else {}
        pairs.append(
            BlamePair(
                coach=coach,
                seat=plan["seat"],
                corruption=plan["corruption"],
                seats=tuple(spec.seats),
                original=_seat_means(original, scores),
                corrupted=_seat_means(corrupted, scores),
                target_original=scores[_action_at(original, plan["index"])],
                target_corrupted=scores[_action_at(corrupted, plan["index"])],
                did_part=did_part,
                original_correct=original.correct,
            )
        )
    return pairs


def _seat_means(trajectory: Trajectory, scores: dict[str, float]) -> dict[str, float]:
    by_seat: dict[str, list[float]] = {}
    for action in trajectory.actions:
        by_seat.setdefault(action.agent, []).append(scores[action.id])
    return {seat: fmean(values) for seat, values in by_seat.items()}


def _action_at(trajectory: Trajectory, index: int) -> str:
    return next(a.id for a in trajectory.actions if a.index == index)


def stored_replays(run: Run, iteration: int, plans: list[dict[str, Any]]) -> list[Trajectory] | None:
    """The replays an earlier check wrote, if it planned exactly these (greedy replays do not change)."""
    parts = check_parts(run, iteration, REPLAYS)
    if not run.store.exists(*parts):
        return None
    stored = {t.id: t for t in frame_to_trajectories(run.store.read_parquet(*parts))}
    if set(stored) != {plan["id"] for plan in plans}:
        return None
    return [stored[plan["id"]] for plan in plans]


def check_blame(
    run: Run, iteration: int, coaches: dict[str, list[str]], seats: list[str], problems: int
) -> dict[str, Any]:
    """The blame check (module docstring); returns the report it writes."""
    configs = coach_configs(run, coaches)
    trajectories = sample_trajectories(run, iteration, problems)
    plans = planned_replays(run, trajectories, seats)
    replays = stored_replays(run, iteration, plans) or run_replays(run, iteration, plans)
    run.store.write_parquet(trajectories_to_frame(replays, iteration), *check_parts(run, iteration, REPLAYS))
    changed = sum(upstream_changed(p["trajectory"], r, p["index"]) for p, r in zip(plans, replays))
    pairs = []
    for name, config in configs.items():
        scores = score_replays(run, iteration, config, replays, name)
        pairs += blame_pairs(run, plans, replays, scores, name)
    report = {
        "run": run.run_id,
        "iteration": iteration,
        "problems": len(trajectories),
        "seats": seats,
        "coaches": coaches,
        "replays": len(replays),
        "upstream_changed": changed,
        "downstream": "generated anew, greedy, by the weights that rolled the iteration out",
        "rows": blame_rows(pairs),
        "pairs": [asdict(pair) for pair in pairs],
    }
    run.store.write_text(json.dumps(report, indent=2), *check_parts(run, iteration, "report.json"))
    return report
