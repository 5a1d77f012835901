"""`mappa ask`: a run's team, trained or base or exported, on one problem of the user's, in this process.

The problem goes through the env's own rollout (`EnvSpec.run`, `mappa.envs.registry`) with the agents the
evaluate stage builds (`mappa.stages.rollout.build_agents`: each seat's role, stop strings and token
limit), on workers loaded as an evaluation loads them (`mappa.team.in_process`), greedy at
`rollout.eval_temperature` with the run's seed, and the model-written code runs in the run's sandbox. So
the same problem asked of the same checkpoint gives the actions its evaluation gave. With an answer the
trajectory is graded as the env grades; with `coach` each action is scored by the run's coach as its score
stage would (the template its schedule gives the iteration the weights rolled out), without the run's
coach cache: nothing is written into the run.

Every check comes first, before a model loads: the checkpoint (or the export: its team.json names this
run, and a folder per trainable seat), the sandbox, the coach (a coach that reads the ground truth needs
the answer; an endpoint must answer), every model resolves. Not covered: several problems at once
(`mappa evaluate --eval-data FILE` does that), sampling settings other than the evaluation's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from mappa.config import CoachConfig
from mappa.core.types import ActionScore, Problem, Trajectory
from mappa.storage.run import Run, iteration_label
from mappa.team.checkpoint import BASE, base_model_path, check_checkpoint, trainable_seats
from mappa.team.export import read_team

ASK_ID = "ask"
"""The problem id and trajectory id of an asked problem (its actions are `ask/0`, `ask/1`, ...)."""


@dataclass(frozen=True)
class Asked:
    """One asked problem: the team's trajectory, the coach's verdicts (None: not asked) and whether an
    answer was given to grade it against."""

    trajectory: Trajectory
    scores: list[ActionScore] | None
    graded: bool
    weights: str
    """Where the seats' weights came from, in words."""


def ask_coach_config(run: Run, iteration: int) -> CoachConfig:
    """The run's coach as it scored the rollout of checkpoint `iteration`'s weights (iteration + 1)."""
    return run.config.coach.for_iteration(iteration + 1)


def check_ask(run: Run, iteration: int, exported: Path | None, answer: str | None, coach: bool) -> None:
    """Every reason `ask_team` would fail, as one error, before any model loads."""
    from mappa.coach.build import check_coach_ready
    from mappa.sandbox import check_isolation

    coach_config = ask_coach_config(run, iteration)
    if coach:
        check_answer_for(coach_config, answer)
    if exported is not None:
        check_export_of(run, exported)
    else:
        check_checkpoint(run, iteration, f"asking iteration {iteration}")
    check_isolation(run.config.sandbox.isolation)  # the env runs model-written code
    if coach:
        check_coach_ready(coach_config)
    for agent in run.config.agents.values():
        if exported is None or not agent.trainable:
            base_model_path(agent)  # a ValueError names a model that does not resolve


def check_export_of(run: Run, exported: Path) -> None:
    team = read_team(exported)
    if team.get("run_id") != run.run_id:
        raise ValueError(
            f"{Path(exported).resolve()} was exported from run {team.get('run_id')}, not {run.run_id}: give "
            f"that run, or export this one (mappa export {run.run_id} DIR)"
        )
    missing = [s for s in trainable_seats(run) if not (Path(exported) / s / "config.json").is_file()]
    if missing:
        raise ValueError(f"{Path(exported).resolve()} lacks the model folder of {missing}; export it again")


def check_answer_for(coach: CoachConfig, answer: str | None) -> None:
    """A coach that reads the reference answer, or the outcome, cannot score without one."""
    if answer is not None or not (coach.use_ground_truth or coach.type == "outcome"):
        return
    why = (
        "sees the reference answer (coach.use_ground_truth: true)"
        if coach.use_ground_truth
        else "scores the outcome (coach.type: outcome)"
    )
    raise ValueError(f"the run's coach {why}: give the problem's answer with --answer, or leave out --coach")


def asked_iteration(run: Run, iteration: int, exported: Path | None) -> int:
    """The checkpoint the seats serve: `iteration`, or the one the export was made of."""
    return int(read_team(exported)["iteration"]) if exported is not None else iteration


def ask_team(
    run: Run,
    question: str,
    answer: str | None = None,
    iteration: int = BASE,
    exported: Path | None = None,
    coach: bool = False,
) -> Asked:
    """The team of `run` at checkpoint `iteration` (or the export in `exported`) on `question`; graded
    against `answer` where one is given; each action scored by the run's coach with `coach`."""
    from mappa.inference.engine import SamplingParams
    from mappa.stages.rollout import build_agents, sandbox_limits
    from mappa.team.in_process import seat_worker

    iteration = asked_iteration(run, iteration, exported)
    check_ask(run, iteration, exported, answer, coach)
    config = run.config
    coach_score = _coach_scorer(run, iteration) if coach else None  # loaded first: it is checked already
    workers = {seat: seat_worker(run, seat, iteration, exported) for seat in config.agents}
    params = SamplingParams(
        temperature=config.rollout.eval_temperature,
        top_p=1.0,
        max_new_tokens=config.rollout.max_new_tokens,
        seed=config.seed,
    )
    agents = build_agents(run, workers, params)
    spec = config.env_spec
    problem = Problem(ASK_ID, question, "" if answer is None else answer)
    runs = spec.run([(ASK_ID, problem)], agents, sandbox_limits(run), config.env)
    trajectory = asyncio.run(runs)[0]
    scores = asyncio.run(coach_score(trajectory)) if coach_score else None
    where = f"export {Path(exported).resolve()}" if exported is not None else "the run's checkpoint"
    weights = f"{iteration_label(iteration)} ({where})"
    return Asked(trajectory, scores, answer is not None, weights)


def _coach_scorer(run: Run, iteration: int):
    """An async function scoring one trajectory's actions with the run's coach (a local one loaded here)."""
    from mappa.coach.build import build_coach
    from mappa.coach.score import score_trajectories
    from mappa.stages.score import coach_fns
    from mappa.team.in_process import coach_worker

    coach_config = ask_coach_config(run, iteration)
    fns = (None, None, None)
    if coach_config.runs_local_model:
        fns = coach_fns(coach_worker(run, coach_config), coach_config, run.config.seed)
    chat_fn, logprob_fn, grouped_fn = fns
    spec = run.config.env_spec
    coach = build_coach(coach_config, chat_fn, spec, logprob_fn, None, grouped_fn)

    async def score(trajectory: Trajectory) -> list[ActionScore]:
        return await score_trajectories(
            coach, [trajectory], spec.roles, coach_config, reference_fn=spec.coach_reference
        )

    return score
