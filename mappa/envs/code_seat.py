"""The code-writing seat: write a program, run it in the sandbox, see the result, try again, up to N turns.

MathChat's Code Executor, each DSBench seat and the example plug-in's Coder act this way; `run_code_seat`
is the loop once, for a whole batch of episodes:

    turn 0      the agent answers every episode's first observation in one call (`agent.act`, so its
                engine sees one large batch); the first ```python block of each reply is its code
                (`extract_python_block`; None: the reply had none); every code found runs in the sandbox
                (`run_programs_async`: at most `concurrency` at a time, results in order; no code, no run);
                each reply becomes an action of its episode (`Episode.record`: the reply, the code, the
                result)
    turn 1...   the same for the episodes the last attempt did not finish (`done`), each observation
                built from the episode's last attempt (`observe(episode, last)`), until none is left or
                `max_turns` turns have passed

It returns each episode's last `Attempt`, for the seats after it to read. The texts the agent reads are the
env's own (`observe`); `describe_result` and `clip` (`mappa.envs.feedback`) say a result and a program
the way the built-in envs do. Not covered: tools other than one Python program per turn, several programs
per reply (the first block counts), and turns that differ per episode in anything but their observation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mappa.agents.agent import Agent
from mappa.agents.tool_calls import extract_python_block
from mappa.core.types import ToolResult
from mappa.envs.episode import Episode
from mappa.sandbox import SandboxLimits, run_programs_async

E = TypeVar("E", bound=Episode)


@dataclass(frozen=True)
class Attempt:
    """One turn of a code-writing seat: `code`, what the agent wrote (its first ```python block, None: its
    reply had none); `result`, what the sandbox answered (None: nothing ran)."""

    code: str | None
    result: ToolResult | None

    @property
    def ran_ok(self) -> bool:
        """The program ran and exited 0, within its limits."""
        return self.result is not None and self.result.ok


def ran_ok(episode: Episode, attempt: Attempt) -> bool:
    """The default `done`: the attempt's program ran without an error."""
    return attempt.ran_ok


def as_written(episode: Episode, code: str) -> str:
    """The default `program`: the code runs as the agent wrote it."""
    return code


async def run_code_seat(
    seat: str,
    agent: Agent,
    episodes: Sequence[E],
    observe: Callable[[E, Attempt | None], str],
    *,
    max_turns: int,
    limits: SandboxLimits | Callable[[E], SandboxLimits],
    concurrency: int = 4,
    done: Callable[[E, Attempt], bool] = ran_ok,
    program: Callable[[E, str], str] = as_written,
    workdir: Callable[[E], str | Path | None] | None = None,
) -> list[Attempt]:
    """Up to `max_turns` attempts per episode by the agent in `seat` (module docstring); each episode's last.

    seat         the seat's name, recorded on its actions
    agent        the seat's agent
    episodes     the batch, in order
    observe      (episode, its last attempt) -> what the agent reads; the attempt is None on the first turn
    max_turns    attempts at most per episode (1 or more)
    limits       the sandbox's limits, or per episode a function giving them (DSBench: its hidden labels)
    concurrency  programs running at once
    done         (episode, attempt) -> whether the episode leaves the seat; default: the program ran ok
    program      (episode, code) -> the program the sandbox runs (e.g. a function, then a call of it);
                 default: the code as written. The action records the code as written
    workdir      per episode, the folder its programs run in (DSBench's workspace); default: a fresh one
    """
    if max_turns < 1:
        raise ValueError(f"a code-writing seat needs max_turns >= 1, got {max_turns}")
    last: list[Attempt | None] = [None] * len(episodes)
    pending = list(range(len(episodes)))
    for turn in range(max_turns):
        if not pending:
            break
        replies = await agent.act([observe(episodes[i], last[i]) for i in pending])
        codes = [extract_python_block(reply.generation.text) for reply in replies]
        runs = [_run_of(episodes[i], code, limits, program, workdir) for i, code in zip(pending, codes)]
        results = await run_programs_async(runs, concurrency)
        for i, reply, code, result in zip(pending, replies, codes, results, strict=True):
            episodes[i].record(seat, turn, reply, code, result)
            last[i] = Attempt(code, result)
        pending = [i for i in pending if not done(episodes[i], last[i])]
    return [attempt for attempt in last if attempt is not None]  # all: turn 0 asks every episode


def _run_of(episode, code, limits, program, workdir) -> tuple[str | None, str | Path | None, SandboxLimits]:
    """What `run_programs_async` runs for one attempt: (program or None, folder, limits)."""
    folder = workdir(episode) if workdir is not None else None
    own = limits(episode) if callable(limits) else limits
    return (None if code is None else program(episode, code), folder, own)
