"""Which envs exist: their seats, roles, task text, how to load their problems, run a batch of them, and
what ground truth the coach may see for an action.

Registry keys equal the config's `env.type` values. Env modules are imported only when their spec is asked
for, so config validation (which asks for an env's seats) stays cheap.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mappa.core.types import Action, Problem, Trajectory

ENV_TYPES = ("mathchat", "dsbench")

# (problems as (trajectory id, problem), agents by seat, sandbox limits, the env's config) -> trajectories
RunFn = Callable[[list[tuple[str, Problem]], dict[str, Any], Any, Any], Awaitable[list[Trajectory]]]
# The ground truth the coach sees for one action when coach.use_ground_truth is set (None: none for it)
ReferenceFn = Callable[[Trajectory, Action], str | None]


@dataclass(frozen=True)
class EnvSpec:
    type: str
    seats: tuple[str, ...]
    roles: dict[str, str]
    task: str
    run: RunFn
    load_problems: Callable[[str], list[Problem]]
    coach_reference: ReferenceFn
    stops: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per seat, strings that end its generation (kept in the output), e.g. a code block's closing fence."""


def env_seats(env_type: str) -> tuple[str, ...]:
    return get_env_spec(env_type).seats


def get_env_spec(env_type: str) -> EnvSpec:
    if env_type == "mathchat":
        from mappa.envs import mathchat

        return mathchat.SPEC
    if env_type == "dsbench":
        from mappa.envs import dsbench

        return dsbench.SPEC
    raise ValueError(f"unknown env type {env_type!r}; known: {', '.join(ENV_TYPES)}")


def load_env_problems(env_type: str, source: str) -> list[Problem]:
    """The problems of `source` (an env's `train_data` / `eval_data` value) for env `env_type`."""
    return get_env_spec(env_type).load_problems(source)


def answer_reference(trajectory: Trajectory, action: Action) -> str | None:
    """The default ground-truth block: the problem's reference answer, shown for every action."""
    return f"REFERENCE ANSWER (ground truth): {trajectory.problem.answer}"
