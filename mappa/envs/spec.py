"""What an env declares: its seats, roles, task text, problem loader, batch runner and coach reference.

Each env module (`mappa.envs.mathchat`, `mappa.envs.dsbench`) builds one `EnvSpec`; `mappa.envs.registry`
finds it by the config's `env.type`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mappa.core.types import Action, Problem, Trajectory

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
    seat_checks: Callable[[Trajectory], dict[str, bool]] | None = None
    """Per seat, whether it did its part in a graded trajectory (MathChat: the solver states the reference
    answer, the last program printed it, the final answer is right): an evaluation counts them per seat,
    so a change in held-out success can be traced to the agents whose part changed."""


def answer_reference(trajectory: Trajectory, action: Action) -> str | None:
    """The default ground-truth block: the problem's reference answer, shown for every action."""
    return f"REFERENCE ANSWER (ground truth): {trajectory.problem.answer}"
