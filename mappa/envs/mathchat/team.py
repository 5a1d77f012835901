"""MathChat: Problem Solver -> Code Executor -> Verifier on math problems (MAPPA, section 4.1).

The Problem Solver reasons about the problem; the Code Executor writes one Python block that runs in the
sandbox, sees its stdout/stderr and, when the run failed or printed nothing, tries once more (turns are
capped by `env.max_executor_turns`; the code-writing seat, `run_code_seat`); the Verifier reads everything
and states the final answer in \\boxed{} (`env.answer_format: last_number` also reads its last number).
The answer is graded against the ground truth with math-verify. Every generation becomes an `Action`; the
executor's actions carry the code they ran and the sandbox's result.

`run_mathchat` runs a whole batch of problems agent by agent (all solvers, then all executors, ...), so
each agent's engine sees one large batch at a time. Ground truth never enters an agent's prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from mappa.envs.api import (
    Agent,
    AnswerReader,
    Attempt,
    EnvSection,
    EnvSpec,
    Episode,
    Problem,
    SandboxLimits,
    ToolResult,
    Trajectory,
    clip,
    describe_result,
    run_code_seat,
)
from mappa.envs.mathchat.corruptions import CORRUPTIONS
from mappa.envs.mathchat.grading import extract_boxed, extract_flexible, grade_answer, normalize_answer
from mappa.envs.mathchat.kinds import problem_kind
from mappa.envs.mathchat.levels import load_builtin_source
from mappa.envs.mathchat.problems import load_problems
from mappa.envs.mathchat.rubric import RULES

SEATS = ("solver", "executor", "verifier")


class MathChatEnvConfig(EnvSection):
    """Problem Solver -> Code Executor -> Verifier on math problems (`env.type: mathchat`)."""

    type: str = "mathchat"
    train_data: str = "builtin:train"
    """Problems to train on: `builtin:train`, or a JSON/JSONL/Parquet file (local path or fsspec URL) with
    `problem` and `answer` fields."""
    eval_data: str = "builtin:eval"
    """Held-out problems for `mappa evaluate` and the evaluate stage."""
    max_executor_turns: int = Field(2, ge=1, le=4)
    """How often the Code Executor may write code (it sees stdout/stderr and may try again)."""
    answer_format: Literal["boxed", "last_number"] = "boxed"
    """How the team's final answer is read from the verifier's reply: `boxed` (the paper's: the last
    `\\boxed{}`), or `last_number` (the boxed answer if any, else the reply's last number: for models too
    small to write `\\boxed{}`; SmolLM2-135M boxed 0-2 numbers in 64 samples under four prompt wordings).
    Evaluations report the strict boxed success either way."""


ROLES = {
    "solver": (
        "You are the Problem Solver in a team of three. Solve the math problem step by step, briefly and "
        "carefully. A Code Executor will check your work with Python and a Verifier will give the final "
        "answer."
    ),
    "executor": (
        "You are the Code Executor in a team of three. Write one short Python program in a ```python block "
        "that computes the answer to the problem and prints it. Use the Problem Solver's reasoning if it "
        "helps."
    ),
    "verifier": (
        "You are the Verifier in a team of three. Read the problem, the solver's reasoning and the program's "
        "output, decide the correct answer, and end your reply with the final number inside \\boxed{}."
    ),
}


@dataclass
class _Episode(Episode):
    """One trajectory while the batch is rolled out: the solver's reasoning, the executor's last program."""

    reasoning: str = ""
    code: str | None = None
    result: ToolResult | None = None


async def run_mathchat(
    problems: list[tuple[str, Problem]],
    agents: dict[str, Agent],
    limits: SandboxLimits,
    max_executor_turns: int = 2,
    sandbox_concurrency: int = 4,
    answer_format: str = "boxed",
) -> list[Trajectory]:
    """Roll out one trajectory per (trajectory id, problem); the topology reads top to bottom."""
    episodes = [_Episode(tid, problem) for tid, problem in problems]

    replies = await agents["solver"].act([solver_observation(e.problem) for e in episodes])
    for episode, reply in zip(episodes, replies):
        episode.reasoning = reply.generation.text
        episode.record("solver", 0, reply)

    programs = await run_code_seat(
        "executor",
        agents["executor"],
        episodes,
        executor_observation,
        max_turns=max_executor_turns,
        limits=limits,
        concurrency=sandbox_concurrency,
        done=lambda episode, attempt: _succeeded(attempt.result),  # ran and printed something
    )
    for episode, program in zip(episodes, programs):
        episode.code, episode.result = program.code, program.result

    replies = await agents["verifier"].act([verifier_observation(e) for e in episodes])
    read_answer = extract_flexible if answer_format == "last_number" else extract_boxed
    trajectories = []
    for episode, reply in zip(episodes, replies):
        episode.record("verifier", 0, reply)
        answer = read_answer(reply.generation.text)
        correct = answer is not None and grade_answer(answer, episode.problem.answer)
        kind = {"kind": problem_kind(episode.problem)}  # results and manifests split by it
        trajectories.append(
            Trajectory(episode.id, episode.problem, tuple(episode.actions), answer, correct, kind)
        )
    return trajectories


def solver_observation(problem: Problem) -> str:
    return f"Problem: {problem.question}"


def executor_observation(episode: _Episode, last: Attempt | None) -> str:
    """The executor's prompt: the problem and the solver's reasoning, then its last program, if any."""
    text = (
        f"Problem: {episode.problem.question}\n\nProblem Solver's reasoning:\n{clip(episode.reasoning)}\n\n"
    )
    if last is None:
        return text + "Write the Python program."
    if last.code is None:
        return text + "Your previous reply had no ```python block. Write the Python program in one."
    return (
        text
        + f"Your previous program:\n```python\n{clip(last.code)}\n```\n"
        + f"Its result:\n{describe_result(last.result)}\n\nFix the program."
    )


def verifier_observation(episode: _Episode) -> str:
    program = (
        f"```python\n{clip(episode.code)}\n```" if episode.code else "(the Code Executor wrote no program)"
    )
    output = describe_result(episode.result) if episode.result else "(nothing was run)"
    return (
        f"Problem: {episode.problem.question}\n\nProblem Solver's reasoning:\n{clip(episode.reasoning)}\n\n"
        f"Code Executor's program:\n{program}\n\nProgram output:\n{output}\n\n"
        "Give the final answer: the number inside \\boxed{}."
    )


def _succeeded(result: ToolResult | None) -> bool:
    return result is not None and result.ok and bool(result.stdout.strip())


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")


def seat_checks(trajectory: Trajectory) -> dict[str, bool]:
    """Per seat, whether it did its part: the solver's text states the reference answer, the executor's
    last program ran and printed it, the verifier's final answer is right (the team's success)."""
    answer = trajectory.problem.answer
    programs = [a for a in trajectory.actions if a.agent == "executor" and a.tool_call is not None]
    last = programs[-1].tool_result if programs else None
    return {
        "solver": any(a.agent == "solver" and _states(a.response, answer) for a in trajectory.actions),
        "executor": _succeeded(last) and _states(last.stdout, answer),
        "verifier": bool(trajectory.correct),
    }


def _states(text: str, answer: str) -> bool:
    """Whether some number in `text` is `answer` (graded as the final answer is)."""
    return any(grade_answer(number, answer) for number in set(_NUMBER.findall(text.replace(",", ""))))


def _load_problems(source: str) -> list[Problem]:
    """`builtin:<split>`, `builtin:<split>-level<N>`, or a JSON/JSONL/Parquet file (path or fsspec URL)."""
    if source.startswith("builtin:"):
        return load_builtin_source(source)
    return load_problems(source)


async def _run(problems, agents, limits, env) -> list[Trajectory]:
    return await run_mathchat(
        problems, agents, limits, env.max_executor_turns, answer_format=env.answer_format
    )


def result_columns(trajectory: Trajectory) -> dict[str, Any]:
    """An evaluation's answer columns: `correct_boxed` the strict grading (the verifier's last `\\boxed{}`),
    `correct_flexible` the lenient one (the env's answer, else the reply's last number; as lm-eval's GSM8K
    "flexible-extract"); `kind`, the problem's operation and form (`mappa.envs.mathchat.kinds`)."""
    stated = trajectory.actions[-1].response if trajectory.actions else ""
    reference = trajectory.problem.answer
    flexible = trajectory.final_answer or extract_flexible(stated)
    return {
        "correct_boxed": grade_answer(extract_boxed(stated), reference),
        "flexible_answer": flexible,
        "correct_flexible": flexible is not None and grade_answer(flexible, reference),
        "kind": problem_kind(trajectory.problem),
    }


# The executor's turn ends with its program's closing fence: what a small model writes after it is noise
# that the verifier would read and the trainer would train on (an opening fence is followed by `python`).
STOPS = {"executor": ("\n```\n",)}
SPEC = EnvSpec(
    type="mathchat",
    seats=SEATS,
    roles=ROLES,
    run=_run,
    load_problems=_load_problems,
    config=MathChatEnvConfig,
    coach_template="mathchat",
    rubric=lambda: RULES,
    result_columns=result_columns,
    seat_checks=seat_checks,
    stops=STOPS,
    corruptions=lambda: CORRUPTIONS,
    answers=AnswerReader(extract=extract_flexible, normalize=normalize_answer),
)
