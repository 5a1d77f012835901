"""Data that flows between mappa's stages.

Small frozen dataclasses with no behaviour beyond (de)serialisation to plain dicts, so that every stage
can write them to parquet and read them back. Nothing here knows about models, Ray or Prefect.

A *problem* is one row of a data set; a *trajectory* is one multi-agent episode on one problem; an
*action* is one generation of one agent inside a trajectory (with the tool call it made and what the tool
answered); an *action score* is the coach's verdict on one action; an *experience* is one action turned into
per-token training data by REINFORCE++ (see `mappa.core.advantages`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One row of a data set: a question and its ground-truth answer."""

    id: str
    question: str
    answer: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    """What running a tool call (model-written code) produced; recorded on the action as data."""

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    duration_s: float
    files: tuple[str, ...] = ()
    error: str | None = None  # why the sandbox itself refused or killed the run (memory, limits), if it did

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None


@dataclass(frozen=True)
class Action:
    """One generation of one agent inside a trajectory.

    `observation` is what the agent saw (its user message), `prompt` the full chat-formatted text the
    engine received; `response_token_ids` and `logprobs` are aligned one to one (sampling logprobs).
    """

    trajectory_id: str
    problem_id: str
    agent: str
    index: int  # position of this action in its trajectory (0-based)
    turn: int  # the agent's own turn number within the trajectory (0-based)
    observation: str
    prompt: str
    response: str
    prompt_token_ids: tuple[int, ...]
    response_token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str = "stop"
    tool_call: str | None = None
    tool_result: ToolResult | None = None
    generation_s: float = 0.0

    def __post_init__(self) -> None:
        if len(self.response_token_ids) != len(self.logprobs):
            raise ValueError(
                f"action {self.trajectory_id}/{self.index}: {len(self.response_token_ids)} response tokens "
                f"but {len(self.logprobs)} logprobs; the engine must return one logprob per sampled token"
            )

    @property
    def id(self) -> str:
        return action_id(self.trajectory_id, self.index)


@dataclass(frozen=True)
class Trajectory:
    """One multi-agent episode on one problem, with its outcome.

    `correct` is the env's success (MathChat: the right answer; DSBench: a valid submission); `outcome`
    holds the env's graded figures as JSON-able values (DSBench: task kind, metric, value, fair score)."""

    id: str
    problem: Problem
    actions: tuple[Action, ...]
    final_answer: str | None
    correct: bool
    outcome: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ActionScore:
    """The coach's verdict on one action. `parse_status` is `ok`, `retried`, `fallback` (no parsable score:
    `fallback_score` recorded, the action gets no advantage) or `rule` (no usable output: scored by rule)."""

    action_id: str
    trajectory_id: str
    agent: str
    score: float
    rationale: str
    coach_model: str
    parse_status: str = "ok"
    used_ground_truth: bool = False
    template: str | None = None
    """The coach template in force for the action's iteration (`coach.schedule`), set by the score stage."""
    criteria: dict[str, float] | None = None
    """The criteria coach's P(Yes) per yes/no question (question -> probability); None for other coaches."""


UNSCORED = "fallback"
"""The parse status of an action the coach gave no score: no advantage (`mappa.core.advantages`)."""
RULE = "rule"
"""The parse status of an action scored by rule, without a coach call (no usable output)."""


def action_id(trajectory_id: str, index: int) -> str:
    """The id of action `index` of a trajectory: how scores and experiences name the action they are of."""
    return f"{trajectory_id}/{index}"


@dataclass(frozen=True)
class Experience:
    """One action as REINFORCE++ training data; all token lists align with `response_token_ids`."""

    action_id: str
    agent: str
    prompt_token_ids: tuple[int, ...]
    response_token_ids: tuple[int, ...]
    old_logprobs: tuple[float, ...]
    ref_logprobs: tuple[float, ...]
    kl: tuple[float, ...]
    rewards: tuple[float, ...]
    returns: tuple[float, ...]
    advantages: tuple[float, ...]
    score: float

    def train_sample(self) -> TrainSample:
        """What the trainer needs of it."""
        return TrainSample(self.prompt_token_ids, self.response_token_ids, self.old_logprobs, self.advantages)


@dataclass(frozen=True)
class TrainSample:
    """One action's training data, as the trainer reads it (sent to an agent's worker as it is); token
    lists align with `response_token_ids`."""

    prompt_token_ids: Sequence[int]
    response_token_ids: Sequence[int]
    old_logprobs: Sequence[float]
    advantages: Sequence[float]


def to_record(obj: Any) -> dict[str, Any]:
    """A dataclass as a flat-ish dict for parquet (nested dataclasses become dicts, tuples lists)."""
    return dataclasses.asdict(obj)


def action_from_record(row: dict[str, Any]) -> Action:
    """Rebuild an `Action` from a parquet row written with `to_record`."""
    tool = row.get("tool_result")
    tool_result = None
    if isinstance(tool, dict) and tool.get("duration_s") is not None:
        tool_result = tool_result_from_record(tool)
    return Action(
        trajectory_id=row["trajectory_id"],
        problem_id=row["problem_id"],
        agent=row["agent"],
        index=int(row["index"]),
        turn=int(row["turn"]),
        observation=row["observation"],
        prompt=row["prompt"],
        response=row["response"],
        prompt_token_ids=tuple(int(t) for t in row["prompt_token_ids"]),
        response_token_ids=tuple(int(t) for t in row["response_token_ids"]),
        logprobs=tuple(float(x) for x in row["logprobs"]),
        finish_reason=row.get("finish_reason") or "stop",
        tool_call=row.get("tool_call"),
        tool_result=tool_result,
        generation_s=float(row.get("generation_s") or 0.0),
    )


def tool_result_from_record(tool: dict[str, Any]) -> ToolResult:
    """Parquet gives list columns back as arrays and nullable ints as floats; undo both."""
    exit_code = tool.get("exit_code")
    files = tool.get("files")
    return ToolResult(
        stdout=tool.get("stdout") or "",
        stderr=tool.get("stderr") or "",
        exit_code=None if exit_code is None or exit_code != exit_code else int(exit_code),
        timed_out=bool(tool.get("timed_out")),
        duration_s=float(tool["duration_s"]),
        files=tuple(str(f) for f in files) if files is not None else (),
        error=tool.get("error"),
    )
