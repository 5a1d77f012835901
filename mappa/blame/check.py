"""The blame check of a run: corrupt one action at a time, replay, score with several coaches, compare.

`check_blame(run, iteration, coaches, seats, problems[, evaluated])` takes `problems` trajectories (one per
problem, successful ones first) of iteration `iteration`'s rollout, or with `evaluated` of the held-out
evaluation of checkpoint `iteration` (-1: the base team's; greedy, so an original replay reproduces the
stored trajectory). For each seat in `seats` it takes the seat's last action (what the seats after it saw;
DSBench's engineer may run several programs before it) and replays the trajectory with that action as
stored (the original) and once per corruption the env declares or every env gets
(`mappa.envs.corruption`), later actions generated anew, greedily, by the weights that made the stored
trajectories (`mappa.envs.replay`). Every replay is scored by every coach (`coaches`: a name and the
`coach.*` overrides of the run's config, as `mappa rescore` takes them; answers through the run's cache),
and the pairs give each coach's blame accuracy and innocent-seat penalty per corrupted seat
(`mappa.core.blame`).

With `team="reference"` (`--team reference`) the trajectories are the env's reference team's
(`EnvSpec.reference_team`: a fixed response per seat that does its part) on the first `problems` held-out
problems, and later seats of a replay run their fixed responses again: for envs whose policy cannot do the
task, so that a corruption has consequences downstream (DSBench's "file not found").

Writes `RUN/coach-check/iter-K/` (an evaluation's: `evaluate-base/`, `evaluate-iter-K/`): `replays.parquet`
(every replay, reused by a later check with the same trajectories, seats and corruptions: greedy replays
are deterministic), `scores-<coach>.parquet`, and `report.json` (the rows, each pair's per-seat scores, the
settings); the reference team's check writes `reference-team/`. Not covered: envs whose rollout is random
beyond the policy's sampling (`upstream_changed` counts such replays).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import asdict
from typing import Any

from mappa.agents.agent import Agent
from mappa.cluster.ray_cluster import release_workers
from mappa.coach.prompt import load_template
from mappa.coach.score import score_trajectories
from mappa.config import CoachConfig, RunConfig
from mappa.core.blame import ORIGINAL, blame_rows, replay_pairs
from mappa.core.types import Problem, Trajectory
from mappa.envs.corruption import corruptions_for
from mappa.envs.reference_team import erring, reference_agents
from mappa.envs.replay import replay, upstream_changed
from mappa.stages.coach_update import read_head
from mappa.stages.evaluate import TRAJECTORIES, evaluation_complete, evaluation_label, evaluation_parts
from mappa.stages.replays import run_replays
from mappa.stages.rescore import rescore_settings
from mappa.stages.rollout import sandbox_limits
from mappa.stages.score import stage_coach
from mappa.stages.stage import output_parts, stage_complete
from mappa.storage.frames import frame_to_trajectories, scores_to_frame, trajectories_to_frame
from mappa.storage.run import Run, iteration_name

REPLAYS = "replays.parquet"
REFERENCE_AT_ONCE = 4  # reference-team episodes running at once (each runs its programs in the sandbox)
REFERENCE_FOLDER = "reference-team"  # RUN/coach-check/<this>/: the check of the env's reference team


def check_folder(iteration: int, evaluated: bool = False) -> str:
    """Where a check keeps its files under RUN/coach-check/: `iter-000K` for a rollout's trajectories,
    `evaluate-<label>` for an evaluation's (`base` or `iter-000K`)."""
    return f"evaluate-{evaluation_label(iteration)}" if evaluated else iteration_name(iteration)


def check_parts(run: Run, folder: str, name: str) -> tuple[str, ...]:
    return (run.run_id, "coach-check", folder, name)


def coach_configs(run: Run, coaches: dict[str, list[str]]) -> dict[str, RunConfig]:
    """Each coach's config: the run's with its `coach.*` overrides; checked before any work."""
    return {name: rescore_settings(run, overrides) for name, overrides in coaches.items()}


def stored_trajectories(run: Run, iteration: int, evaluated: bool) -> list[Trajectory]:
    """Iteration `iteration`'s rollout (sampled), or with `evaluated` the held-out evaluation of checkpoint
    `iteration` (-1: the base team; greedy, so a replay's original reproduces it)."""
    if evaluated:
        if not evaluation_complete(run, iteration):
            raise ValueError(
                f"run {run.run_id} has no finished evaluation of {evaluation_label(iteration)}; run `mappa "
                f"evaluate {run.run_id} --iteration {iteration}` first, or check a rollout (no --evaluation)"
            )
        return frame_to_trajectories(run.store.read_parquet(*evaluation_parts(run, iteration, TRAJECTORIES)))
    if not stage_complete(run, iteration, "rollout"):
        raise ValueError(
            f"iteration {iteration} of run {run.run_id} has no finished rollout to check; pick another "
            f"--iteration (0 is the base team's rollout)"
        )
    return frame_to_trajectories(run.store.read_parquet(*output_parts(run, iteration, "rollout")))


def weights_of(iteration: int, evaluated: bool) -> int:
    """The iteration whose rollout weights replay the agents: an evaluation of checkpoint K was made with
    what iteration K + 1 rolls out with."""
    return iteration + 1 if evaluated else iteration


def sample_trajectories(run: Run, iteration: int, problems: int, evaluated: bool = False) -> list[Trajectory]:
    """One trajectory per problem of the stored ones (`stored_trajectories`), `problems` of them: a
    successful one where the problem has one, problems with a success first (from a success, the
    corruption alone makes the difference), in the stored order otherwise."""
    chosen: dict[str, Trajectory] = {}
    rollout = stored_trajectories(run, iteration, evaluated)
    for trajectory in sorted(rollout, key=lambda t: not t.correct):  # successes first: the sharpest pairs
        chosen.setdefault(trajectory.problem.id, trajectory)
    return sorted(chosen.values(), key=lambda t: not t.correct)[:problems]


def planned_replays(run: Run, trajectories: list[Trajectory], seats: list[str]) -> list[dict[str, Any]]:
    """One plan per (trajectory, seat's last action, original or corruption): ids and the forced text."""
    spec = run.config.env_spec
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


def score_replays(run: Run, folder: str, config: RunConfig, replays: list[Trajectory], name: str):
    """Each action's score by the coach of `config` (action id -> score), through the run's answer cache;
    scores an earlier check stored for the same coach and the same actions are read back instead
    (`scores_identity`): a check stopped after some coaches goes on with the next."""
    parts = check_parts(run, folder, f"scores-{name}.parquet")
    identity = scores_identity(run, config, replays)
    if (
        identity is not None
        and same_scores(stored_identity(run, parts), identity, type(config.coach))
        and run.store.exists(*parts)
    ):
        frame = run.store.read_parquet(*parts)
        return dict(zip(frame["action_id"], frame["score"], strict=True))
    spec = run.config.env_spec
    coach, _ = stage_coach(run, config.coach, worker_name=f"coach-check-{name}")
    scores = asyncio.run(
        score_trajectories(coach, replays, spec.roles, config.coach, reference_fn=spec.coach_reference)
    )
    run.store.write_parquet(scores_to_frame(scores), *parts)
    if identity is not None:
        run.store.write_text(json.dumps(identity, indent=2), *identity_parts(parts))
    return {score.action_id: score.score for score in scores}


def scores_identity(run: Run, config: RunConfig, replays: list[Trajectory]) -> dict[str, Any] | None:
    """What a coach's scores of these replays depend on: its settings, its template's version and the
    actions (ids, responses, tool answers), and a learned head's version (`coach.learn.start`'s file, not
    its path). None for a learning coach, whose head changes as the run goes on: scored anew each time."""
    coach = config.coach
    if coach.learn.enabled:
        return None
    head = read_head(coach.learn.start).version if coach.learn.start else None
    template = coach.template or run.config.env_spec.coach_template
    actions = sorted(  # what each action said and its tool answered: a replay made anew may differ
        json.dumps([trajectory.id, action.index, action.response, str(action.tool_result)])
        for trajectory in replays
        for action in trajectory.actions
    )
    return {
        "coach": coach_settings(coach),
        "template_version": load_template(template).version if template else None,
        **({"head": head} if head else {}),
        "actions": hashlib.sha256("\n".join(actions).encode()).hexdigest(),
    }


def coach_settings(coach: CoachConfig) -> dict[str, Any]:
    """The coach's settings that differ from their defaults, and its type (as `RunConfig.config_hash`
    counts them): a release that adds a setting keeps the stored scores of every coach. A learned head
    (`coach.learn.start`) counts by its version (`scores_identity`), not by where its file lies."""
    settings = {**coach.model_dump(mode="json", exclude_defaults=True), "type": coach.type}
    learn = settings.get("learn", {})
    if learn.pop("start", None) is not None and not learn:  # a learned head counts by its version, not path
        del settings["learn"]
    return settings


def same_scores(stored: dict[str, Any] | None, identity: dict[str, Any], section: type[CoachConfig]) -> bool:
    """Whether stored scores' identity is `identity`: its coach read as this release reads it (a sidecar
    may hold every setting, defaults too, as identities did before `coach_settings`)."""
    if stored is None:
        return False
    try:
        coach = coach_settings(section.model_validate(stored.get("coach")))
    except ValueError:  # a setting this release no longer has: scored anew
        return False
    return {**stored, "coach": coach} == identity


def identity_parts(parts: tuple[str, ...]) -> tuple[str, ...]:
    return (*parts[:-1], parts[-1].removesuffix(".parquet") + ".json")


def stored_identity(run: Run, parts: tuple[str, ...]) -> dict[str, Any] | None:
    sidecar = identity_parts(parts)
    return json.loads(run.store.read_text(*sidecar)) if run.store.exists(*sidecar) else None


def stored_replays(run: Run, folder: str, plans: list[dict[str, Any]]) -> list[Trajectory] | None:
    """The replays an earlier check wrote, if it planned exactly these (greedy replays do not change)."""
    parts = check_parts(run, folder, REPLAYS)
    if not run.store.exists(*parts):
        return None
    stored = {t.id: t for t in frame_to_trajectories(run.store.read_parquet(*parts))}
    if set(stored) != {plan["id"] for plan in plans}:
        return None
    return [stored[plan["id"]] for plan in plans]


def reference_team_problems(run: Run, problems: int) -> tuple[list[Problem], dict[str, dict[str, Agent]]]:
    """The first `problems` held-out problems of the run's env and its reference team for each (raises,
    naming the fix, where the env has none)."""
    spec = run.config.env_spec
    chosen = spec.load_problems(run.config.env.eval_data)[:problems]
    return chosen, {problem.id: reference_agents(spec, problem) for problem in chosen}


def reference_team_replays(run: Run, problems: int) -> tuple[list[Trajectory], Any]:
    """The env's reference team (`mappa.envs.reference_team`) on the first `problems` held-out problems,
    and a function that replays plans with it: later seats run their fixed responses again, the corrupted
    seat its corrupted one on each of its turns (`erring`). At most
    `REFERENCE_AT_ONCE` episodes run at a time (their programs are the whole cost: no model answers)."""
    spec, env, limits = run.config.env_spec, run.config.env, sandbox_limits(run)
    chosen, teams = reference_team_problems(run, problems)

    async def bounded(episodes) -> list[Trajectory]:
        gate = asyncio.Semaphore(REFERENCE_AT_ONCE)

        async def one(episode):
            async with gate:
                return await episode

        return await asyncio.gather(*(one(episode) for episode in episodes))

    def originals() -> list[Trajectory]:
        rolled = [spec.run([(f"reference:{p.id}", p)], teams[p.id], limits, env) for p in chosen]
        return [trajectory for (trajectory,) in asyncio.run(bounded(rolled))]

    def replays(plans: list[dict[str, Any]]) -> list[Trajectory]:
        episodes = [
            replay(
                spec,
                p["trajectory"],
                p["index"],
                p["text"],
                erring(teams[p["trajectory"].problem.id], p["seat"], p["text"]),
                limits,
                env,
                p["id"],
            )
            for p in plans
        ]
        return asyncio.run(bounded(episodes))

    return originals(), replays


def check_blame(
    run: Run,
    iteration: int,
    coaches: dict[str, list[str]],
    seats: list[str],
    problems: int,
    evaluated: bool = False,
    team: str = "policy",
) -> dict[str, Any]:
    """The blame check (module docstring); returns the report it writes. `team="reference"` checks the
    env's reference team instead of the run's trajectories (`reference_team_replays`)."""
    configs = coach_configs(run, coaches)
    if team == "reference":
        trajectories, replay_with_team = reference_team_replays(run, problems)
        folder = REFERENCE_FOLDER
        made_by = "the env's reference team on the first held-out problems"
        downstream = "the env's reference team: each later seat runs its fixed response again (no adapting)"
    else:
        trajectories = sample_trajectories(run, iteration, problems, evaluated)
        folder = check_folder(iteration, evaluated)
        made_by = "evaluation (greedy)" if evaluated else "rollout (sampled)"
        downstream = "generated anew, greedy, by the weights that made the stored trajectories"

        def replay_with_team(plans):
            return run_replays(run, weights_of(iteration, evaluated), plans)

    plans = planned_replays(run, trajectories, seats)
    replays = stored_replays(run, folder, plans) or replay_with_team(plans)
    frame = trajectories_to_frame(replays, max(iteration, 0))
    run.store.write_parquet(frame, *check_parts(run, folder, REPLAYS))
    changed = sum(upstream_changed(p["trajectory"], r, p["index"]) for p, r in zip(plans, replays))
    spec, pairs = run.config.env_spec, []
    for name, config in configs.items():
        try:
            scores = score_replays(run, folder, config, replays, name)
        finally:  # one coach model in memory at a time: a check of six LLM coaches held six
            release_workers(run.run_id, [f"coach-check-{name}"])
        pairs += replay_pairs(plans, replays, scores, name, tuple(spec.seats), spec.seat_checks)
    report = {
        "run": run.run_id,
        "iteration": iteration,
        "trajectories": made_by,
        "folder": folder,
        "problems": len(trajectories),
        "seats": seats,
        "coaches": coaches,
        "replays": len(replays),
        "upstream_changed": changed,
        "downstream": downstream,
        "rows": blame_rows(pairs),
        "pairs": [asdict(pair) for pair in pairs],
    }
    run.store.write_text(json.dumps(report, indent=2), *check_parts(run, folder, "report.json"))
    return report
