"""Scoring whole trajectories: render every action's request, ask the coach once for all, check alignment.

Not covered here: caching answers or writing scores as artifacts (the score stage does that).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mappa.coach.base import Coach
from mappa.coach.prompt import CoachRequest, ReferenceFn, build_requests, load_template
from mappa.config import CoachConfig
from mappa.core.types import ActionScore, Trajectory


def problem_task(trajectory: Trajectory) -> str:
    """The default task text: the problem statement."""
    return trajectory.problem.question


def build_all_requests(
    trajectories: Sequence[Trajectory],
    roles: dict[str, str],
    config: CoachConfig,
    task_fn: Callable[[Trajectory], str] = problem_task,
    reference_fn: ReferenceFn | None = None,
) -> list[CoachRequest]:
    """Requests for every action of every trajectory, in order, through `config.template`; ground truth as
    `reference_fn` gives it (default: the reference answer)."""
    template = load_template(config.template)
    requests: list[CoachRequest] = []
    for trajectory in trajectories:
        task = task_fn(trajectory)
        requests.extend(
            build_requests(
                trajectory, task, roles, template, config.use_ground_truth, reference_fn=reference_fn
            )
        )
    return requests


async def score_trajectories(
    coach: Coach,
    trajectories: Sequence[Trajectory],
    roles: dict[str, str],
    config: CoachConfig,
    task_fn: Callable[[Trajectory], str] = problem_task,
    reference_fn: ReferenceFn | None = None,
) -> list[ActionScore]:
    """One `ActionScore` per action of `trajectories`, in order; raises if the coach breaks alignment."""
    requests = build_all_requests(trajectories, roles, config, task_fn, reference_fn)
    scores = await coach.score(requests)
    got = [s.action_id for s in scores]
    want = [r.action_id for r in requests]
    if got != want:
        raise ValueError(
            f"coach {coach.model_name} returned {len(got)} scores not aligned with {len(want)} actions "
            f"(first mismatch near {next((w for g, w in zip(got, want, strict=False) if g != w), 'the end')})"
        )
    return scores
