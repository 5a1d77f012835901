"""Corruptions: a deliberate mistake put into one agent's action, to check whom a coach blames for it.

A `Corruption` rewrites one action's response text (the tool call, a code block, is part of the text: the
env parses it again on replay, and the sandbox runs the corrupted program for real). An env declares its
own (`EnvSpec.corruptions`: MathChat's solver states a wrong number, its executor prints a wrong number or
raises, its verifier states a wrong final answer); every env also gets the generic ones below. `apply`
returns None where the corruption does not apply to that action (an echo of nothing, a text with no number
to change), and the blame check then skips the action.

    empty   the agent said nothing
    cut     its output stops half-way (the first half of its characters)
    echo    it repeated the previous action's output (the seat before it)

Not covered: corruptions of the tool's answer alone (the sandbox is re-run, not faked).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mappa.core.types import Action, Trajectory

Rewrite = Callable[[Action, Trajectory], "str | None"]


@dataclass(frozen=True)
class Corruption:
    """`name`; `seat`, the seat whose actions it corrupts (None: any seat); `rewrite(action, trajectory)`,
    the corrupted response text, or None where it does not apply; `what`, one line a report shows."""

    name: str
    seat: str | None
    rewrite: Rewrite
    what: str = ""

    def applies_to(self, seat: str) -> bool:
        return self.seat is None or self.seat == seat

    def apply(self, action: Action, trajectory: Trajectory) -> str | None:
        """The corrupted response, or None when it would not differ from the original (or not apply)."""
        text = self.rewrite(action, trajectory)
        return None if text is None or text == action.response else text


def _empty(action: Action, trajectory: Trajectory) -> str | None:
    return ""


def _cut(action: Action, trajectory: Trajectory) -> str | None:
    return action.response[: len(action.response) // 2] if len(action.response) >= 2 else None


def _echo(action: Action, trajectory: Trajectory) -> str | None:
    earlier = [a for a in trajectory.actions if a.index < action.index]
    return earlier[-1].response if earlier else None


GENERIC = (
    Corruption("empty", None, _empty, "the agent said nothing"),
    Corruption("cut", None, _cut, "its output stops half-way"),
    Corruption("echo", None, _echo, "it repeated the previous agent's output"),
)


def corruptions_for(declared: tuple[Corruption, ...] | list[Corruption], seat: str) -> list[Corruption]:
    """The corruptions that apply to `seat`: the env's declared ones, then the generic ones."""
    return [c for c in (*declared, *GENERIC) if c.applies_to(seat)]
