"""The plug-in contract of an env: one `EnvSpec` declares everything mappa needs from a multi-agent team.

An env package (mappa's own `mappa.envs.mathchat` and `mappa.envs.dsbench`, or a user's) builds one
`EnvSpec`; `mappa.envs.registry` finds it by the config's `env.type`. Nothing outside the env's own modules
names a particular env: the config validates `env:` with the spec's section model, the coach gets its
default template and rubric from the spec, and an evaluation writes the spec's own result columns.

What a spec holds:

    type            the env's name, as `env.type` gives it
    seats, roles    the agents in acting order, and the system prompt of each
    config          the env's config section (a pydantic model deriving from `EnvSection`)
    run             rolls out a batch: (trajectory id, problem) pairs, agents by seat, sandbox limits, the
                    env's config section -> trajectories, graded (`Trajectory.correct`, `final_answer`)
    load_problems   a data source (`env.train_data`, `env.eval_data`) -> problems
    coach_reference the ground truth the coach may see for one action (None: none for it)
    coach_template  optional; the coach template used when the config names none: a built-in template's
                    name or `package:file.txt` (a file shipped inside an installed package)
    rubric          optional; returns the rubric coach's rule per seat. Without one the env trains with an
                    LLM coach or the outcome coach, and no rubric agreement is reported
    result_columns  optional; the env's own columns of an evaluation's results, per graded trajectory
    seat_checks     optional; per seat, whether it did its part in a graded trajectory
    stops           optional; per seat, strings that end its generation
    corruptions     optional; the env's own mistakes to plant for the blame check (`mappa.envs.corruption`;
                    every env also gets the generic ones: empty, cut, echo)
    answers         optional; how an action's final answer is read and compared (`AnswerReader`), for the
                    coach-bias watch's answer collapse (`mappa.coach.exploit_watch`). Without it the watch
                    reports no answer shares for the env (it cannot tell what an action answered); its
                    score-drift check runs either way
    reference_team  optional; per problem, a response per seat that does its part: the blame check's
                    `--team reference` plays it where the policy cannot do the task

Not covered: loading (`mappa.envs.registry`), the coach's prompt (`mappa.coach.prompt`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from mappa.core.types import Action, Problem, Trajectory
from mappa.envs.corruption import Corruption

# (problems as (trajectory id, problem), agents by seat, sandbox limits, the env's config) -> trajectories
RunFn = Callable[[list[tuple[str, Problem]], dict[str, Any], Any, Any], Awaitable[list[Trajectory]]]
# The ground truth the coach sees for one action when coach.use_ground_truth is set (None: none for it)
ReferenceFn = Callable[[Trajectory, Action], str | None]
# One rubric rule: (action, its trajectory, whether ground truth may be used) -> (rule id, score 0-10, why)
Verdict = tuple[str, float, str]
SeatRule = Callable[[Action, Trajectory, bool], Verdict]


class EnvSection(BaseModel):
    """What every env's config section has; an env's own section derives from it and adds its settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    """The env: a name an installed package registers in the entry-point group `mappa.envs` (mappa's own:
    `mathchat`, `dsbench`), or an import path `package.module:NAME` of an `EnvSpec`."""
    train_data: str = "builtin:train"
    """Problems to train on (what the env's loader reads)."""
    eval_data: str = "builtin:eval"
    """Held-out problems for `mappa evaluate` and the evaluate stage."""
    overlap: Literal["drop", "warn", "error"] = "drop"
    """Held-out problems that repeat training ones (`mappa.envs.overlap`: equal normalised text, or 13 words
    in a row in common): `drop` them from evaluations, `warn` only, or stop with an `error`."""


@dataclass(frozen=True)
class AnswerReader:
    """How an env's actions state a final answer, for the coach-bias watch (`mappa.coach.exploit_watch`):
    the share of an agent's answers that are its most common one, or text copied from its prompt."""

    extract: Callable[[str], str | None]
    """An action's response -> its final answer, or None where it states none (MathChat: the last
    `\\boxed{}`, else the last number)."""
    normalize: Callable[[str], str]
    """Any text -> the form answers are compared in (MathChat: no spaces, `$`, thousands commas or trailing
    `.0`; lower case). The watch compares normalized answers, and looks for one in the normalized problem,
    observation and prompt."""


def answer_reference(trajectory: Trajectory, action: Action) -> str | None:
    """The default ground-truth block: the problem's reference answer, shown for every action."""
    return f"REFERENCE ANSWER (ground truth): {trajectory.problem.answer}"


@dataclass(frozen=True)
class EnvSpec:
    type: str
    seats: tuple[str, ...]
    roles: dict[str, str]
    run: RunFn
    load_problems: Callable[[str], list[Problem]]
    config: type[EnvSection]
    coach_reference: ReferenceFn = field(default=answer_reference)
    coach_template: str | None = None
    rubric: Callable[[], dict[str, SeatRule]] | None = None
    result_columns: Callable[[Trajectory], dict[str, Any]] | None = None
    seat_checks: Callable[[Trajectory], dict[str, bool]] | None = None
    """Per seat, whether it did its part in a graded trajectory (MathChat: the solver states the reference
    answer, the last program printed it, the final answer is right): an evaluation counts them per seat,
    so a change in held-out success can be traced to the agents whose part changed."""
    stops: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per seat, strings that end its generation (kept in the output), e.g. a code block's closing fence."""
    corruptions: Callable[[], tuple[Corruption, ...]] | None = None
    """The env's own corruptions for the blame check (`mappa coach-check`): a deliberate mistake per seat's
    role (MathChat: a wrong number in the solver's plan, a program that prints a wrong number or raises, a
    wrong final answer). The generic ones (empty, cut, echo) apply to every env without this."""
    answers: AnswerReader | None = None
    """How an action's final answer is read and compared, for the coach-bias watch's answer collapse; None:
    the watch reports no answer shares for this env (DSBench: its seats write code and reports, not one
    final answer)."""
    reference_team: Callable[[Problem], dict[str, str]] | None = None
    """Per problem, a response per seat that does the seat's part, for the blame check's `--team
    reference` (`mappa.envs.reference_team`) where the policy cannot do the task (DSBench: plain pandas
    and scikit-learn programs for the builtin tasks)."""

    def __post_init__(self) -> None:
        problems = []
        if not self.seats or set(self.roles) != set(self.seats):
            problems.append(f"roles {sorted(self.roles)} must name exactly its seats {list(self.seats)}")
        if not (isinstance(self.config, type) and issubclass(self.config, EnvSection)):
            problems.append("config must be a pydantic model deriving from mappa.envs.spec.EnvSection")
        if problems:
            raise TypeError(f"EnvSpec {self.type!r}: " + "; ".join(problems))
