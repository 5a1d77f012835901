"""CodePair: a Coder writes a Python function, a Reviewer approves it or corrects it; hidden tests grade it.

The team, in acting order:

    coder     writes the function in a ```python block; the sandbox runs it with the task's public example
              call and shows the Coder what it printed; on an error (or no code) it tries again, up to
              `env.coder_turns` turns (mappa's code-writing seat, `run_code_seat`)
    reviewer  reads the task, the Coder's function and the example's result, and replies APPROVE or a
              corrected function in a ```python block (that block is then the team's code)

The team's final code (the Reviewer's correction if it wrote one, else the Coder's last function) runs
against the task's hidden unit tests in mappa's sandbox: success means every test passes. The Coder's own
last function is graded too, so the coach (with `coach.use_ground_truth`) and the evaluation's per-seat
checks can tell a Coder that was right from a Reviewer that repaired it, or broke it. Hidden tests never
enter an agent's prompt.

This env is written as a user of mappa would write one: it lives outside `mappa/`, imports mappa only
through its public module for env authors (`mappa.envs.api`) and plugs in through the entry-point group
`mappa.envs` (this package's pyproject.toml). It has no rubric: train it with an LLM coach
(its template, `codepair.txt`, asks yes/no questions about each step) or the outcome coach.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from mappa.envs.api import (
    Action,
    Agent,
    Attempt,
    Corruption,
    EnvSection,
    EnvSpec,
    Episode,
    Problem,
    SandboxLimits,
    ToolResult,
    Trajectory,
    clip,
    describe_result,
    extract_python_block,
    replace_python_block,
    run_code_seat,
    run_programs_async,
)
from mappa_codepair.tasks import load_tasks

SEATS = ("coder", "reviewer")
ROLES = {
    "coder": (
        "You are the Coder in a team of two. Write the requested Python function in one ```python block. "
        "Write only the function; a Reviewer checks it next."
    ),
    "reviewer": (
        "You are the Reviewer in a team of two. Read the task, the Coder's function and what its example "
        "call printed. If the function is correct, reply APPROVE. Otherwise reply with the corrected "
        "function in one ```python block."
    ),
}
SANDBOX_CONCURRENCY = 4


class CodePairConfig(EnvSection):
    """The `env:` section of a CodePair run (`env.type: codepair`)."""

    type: str = "codepair"
    train_data: str = "builtin:train"
    """`builtin:train` (32 tasks shipped with this package), or a JSONL file of rows with `problem`, `answer`
    (a reference solution) and `meta` {`entry_point`, `example`, `tests`: list of boolean expressions}."""
    eval_data: str = "builtin:eval"
    """`builtin:eval` (16 other functions), or a JSONL file as for train_data."""
    coder_turns: int = Field(2, ge=1, le=4)
    """Programs the Coder may run (it sees the example's output and may try again after an error)."""


@dataclass
class _Episode(Episode):
    """One trajectory while the batch is rolled out: the Coder's last function and what its example gave."""

    code: str | None = None
    result: ToolResult | None = None


async def run_codepair(
    problems: list[tuple[str, Problem]], agents: dict[str, Agent], limits: SandboxLimits, coder_turns: int = 2
) -> list[Trajectory]:
    """Roll out one trajectory per (trajectory id, problem), seat by seat, and grade each."""
    episodes = [_Episode(tid, problem) for tid, problem in problems]
    functions = await run_code_seat(  # until the example call runs without an error
        "coder",
        agents["coder"],
        episodes,
        coder_observation,
        max_turns=coder_turns,
        limits=limits,
        concurrency=SANDBOX_CONCURRENCY,
        program=lambda episode, code: _with_example(code, episode.problem),
    )
    for episode, function in zip(episodes, functions):
        episode.code, episode.result = function.code, function.result

    replies = await agents["reviewer"].act([reviewer_observation(e) for e in episodes])
    corrections = [extract_python_block(r.generation.text) for r in replies]  # None: approved as it is
    runs = [(_with_example(code, e.problem), None, limits) for code, e in zip(corrections, episodes)]
    results = await run_programs_async(runs, SANDBOX_CONCURRENCY)
    for episode, reply, correction, result in zip(episodes, replies, corrections, results):
        episode.record("reviewer", 0, reply, correction, result)
    finals = [c if c is not None else e.code for c, e in zip(corrections, episodes)]

    marker = secrets.token_hex(8)  # the harness prints its count after it: code cannot print a fake one
    to_grade = [(code, e.problem) for e, final in zip(episodes, finals) for code in (final, e.code)]
    graded = await run_programs_async(
        [(_with_tests(code, problem, marker), None, limits) for code, problem in to_grade],
        SANDBOX_CONCURRENCY,
    )
    trajectories = []
    for i, episode in enumerate(episodes):
        team, coder = (_passed(result, marker) for result in graded[2 * i : 2 * i + 2])
        total = len(episode.problem.meta["tests"])
        outcome = {
            "tests_passed": team,
            "tests_total": total,
            "coder_tests_passed": coder,
            "reviewer_rewrote": episode.actions[-1].tool_call is not None,
        }
        answer = f"{team}/{total} tests passed"
        actions = tuple(episode.actions)
        trajectories.append(Trajectory(episode.id, episode.problem, actions, answer, team == total, outcome))
    return trajectories


def coder_observation(episode: _Episode, last: Attempt | None) -> str:
    """The task and its example call, then the Coder's last function and what the example gave, if any."""
    task = f"Task:\n{episode.problem.question}\n\nExample call: {episode.problem.meta['example']}\n\n"
    if last is None:
        return task + "Write the function."
    if last.code is None:
        return task + "Your previous reply had no ```python block. Write the function in one."
    return (
        task
        + f"Your previous function:\n```python\n{clip(last.code)}\n```\n"
        + f"Running the example call gave:\n{describe_result(last.result)}\n\nFix the function."
    )


def reviewer_observation(episode: _Episode) -> str:
    code = f"```python\n{clip(episode.code)}\n```" if episode.code else "(the Coder wrote no function)"
    ran = describe_result(episode.result) if episode.code else "(nothing was run)"
    return (
        f"Task:\n{episode.problem.question}\n\nThe Coder's function:\n{code}\n\n"
        f"Running the example call {episode.problem.meta['example']} gave:\n{ran}\n\n"
        "Reply APPROVE if the function is correct, else the corrected function in a ```python block."
    )


def _with_example(code: str | None, problem: Problem) -> str | None:
    """The function, then its public example call printed (None: no code, nothing to run)."""
    if code is None:
        return None
    return f"{code}\n\nprint(repr({problem.meta['example']}))\n"


def _with_tests(code: str | None, problem: Problem, marker: str) -> str:
    """A program that defines `code` and prints how many hidden tests pass, after `marker` (random per
    batch; the harness's line comes last, as code that exits early is caught)."""
    tests = problem.meta["tests"]
    checks = "\n".join(f"try:\n    passed += bool({test})\nexcept BaseException:\n    pass" for test in tests)
    body = code if code is not None else "pass"
    return (
        f"passed = 0\ntry:\n    exec(compile({body!r}, 'solution', 'exec'))\n"
        f"except BaseException:\n    pass\n{checks}\nprint({marker!r}, passed)\n"
    )


def _passed(result: ToolResult | None, marker: str) -> int:
    """The hidden tests passed, read from the harness's last marked line (0 when it did not get there)."""
    if result is None:
        return 0
    counts = [line.split()[-1] for line in result.stdout.splitlines() if line.startswith(marker + " ")]
    return int(counts[-1]) if counts and counts[-1].isdigit() else 0


def hidden_test_reference(trajectory: Trajectory, action: Action) -> str | None:
    """The coach's ground truth: how many hidden tests the Coder's function and the team's code passed."""
    out = trajectory.outcome
    if "tests_total" not in out:
        return None
    total = out["tests_total"]
    team = f"the team's final code passed {out['tests_passed']} of {total} hidden unit tests"
    if action.agent == "coder":
        coder = f"the Coder's function passed {out['coder_tests_passed']} of {total}"
        return f"HIDDEN TESTS (ground truth): {coder}; {team}."
    source = "the Reviewer's correction" if out["reviewer_rewrote"] else "the Coder's function, approved"
    return f"HIDDEN TESTS (ground truth): {team} (the final code is {source})."


def result_columns(trajectory: Trajectory) -> dict[str, Any]:
    """An evaluation's columns: the share of hidden tests passed, by the team and by the Coder alone."""
    out = trajectory.outcome
    total = out.get("tests_total") or 1
    return {
        "tests_passed_share": out.get("tests_passed", 0) / total,
        "coder_tests_passed_share": out.get("coder_tests_passed", 0) / total,
        "reviewer_rewrote": bool(out.get("reviewer_rewrote")),
    }


def seat_checks(trajectory: Trajectory) -> dict[str, bool]:
    """The Coder did its part when its own function passes every hidden test; the Reviewer when the team's
    final code does."""
    out = trajectory.outcome
    return {
        "coder": out.get("coder_tests_passed") == out.get("tests_total"),
        "reviewer": bool(trajectory.correct),
    }


async def _run(problems, agents, limits, env: CodePairConfig) -> list[Trajectory]:
    return await run_codepair(problems, agents, limits, env.coder_turns)


def _wrong_body(action: Action, trajectory: Trajectory) -> str | None:
    """The Coder's function keeps its `def` line but returns None: every hidden test fails."""

    def rewrite(code: str) -> str | None:
        header = next((line for line in code.splitlines() if line.lstrip().startswith("def ")), None)
        if header is None:
            return None
        indent = " " * (len(header) - len(header.lstrip()) + 4)
        return f"{header}\n{indent}return None\n"

    return replace_python_block(action.response, rewrite)


# for `mappa coach-check`: the blame check plants this mistake in the Coder's function; the generic ones
# (empty, cut, echo) apply to both seats without being declared
CORRUPTIONS = (Corruption("wrong-body", "coder", _wrong_body, "the Coder's function returns None"),)


SPEC = EnvSpec(
    type="codepair",
    seats=SEATS,
    roles=ROLES,
    run=_run,
    load_problems=load_tasks,
    config=CodePairConfig,
    coach_reference=hidden_test_reference,
    coach_template="mappa_codepair:codepair.txt",
    result_columns=result_columns,
    seat_checks=seat_checks,
    stops={"coder": ("\n```\n",), "reviewer": ("\n```\n",)},
    corruptions=lambda: CORRUPTIONS,
)
