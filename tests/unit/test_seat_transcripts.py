"""MathChat's, CodePair's and DSBench's rollouts, recorded whole: every agent call with its observations
(byte for byte), every sandbox run in the order it was asked for, every action and the graded trajectories.
The transcripts' hashes were computed before the code-writing seat (`mappa.envs.code_seat`) replaced the
envs' own retry loops, and must not change: the seat is a refactoring, not a new behaviour.

Agents are scripted (the test is about the envs, not a model) and answer by what they read, so a change in
the order of calls shows in the transcript rather than scrambling it. The sandbox is faked at
`mappa.sandbox.runner.run_python_async` (what `run_programs_async` calls per program), so no program runs
and each result is a function of its code."""

import asyncio
import dataclasses
import hashlib
import json
import re

import pytest

from mappa.agents.agent import Agent
from mappa.core.types import Problem, ToolResult
from mappa.envs.mathchat.team import ROLES, run_mathchat
from mappa.inference.engine import Generation, SamplingParams
from mappa.sandbox import SandboxLimits

LONG = "\n".join(f"step_{i} = {i} * 1234567  # a long program: the retry prompt clips it" for i in range(40))
EXECUTOR_SCRIPT = {  # question -> the executor's reply per turn
    "Q0: What is 6 times 7?": ["```python\nprint(42)\n```"],  # right at once
    "Q1: What is 2 + 3?": ["```python\nprint(2 + three)\n```", "```python\nprint(5)\n```"],  # crash, fix
    "Q2: What is 10 - 3?": ["no code", "still none", "```python\nprint(7)\n```"],  # no block twice
    "Q3: What is 8 / 2?": ["```python\nx = 8 / 2\n```", "```python\nraise SystemExit(1)\n```", "gave up"],
    "Q4: What is 9 * 9?": [f"```python\n{LONG}\nprint(eighty_one)\n```", "```python\nprint(81)\n```"],
}
MATHCHAT_HASH = "3426646f7da630c40230396bef66f4da16a6dc3f5a58d9aa719a85395345eb93"


def fake_sandbox(log: list):
    """A sandbox that runs nothing: a NameError for unknown names, SystemExit(1) as exit status 1, else what
    the program's `print(...)` calls name, as stdout."""

    async def run_python_async(code, workdir=None, limits=None):
        log.append(["sandbox", code])
        harness = re.search(r"print\('([0-9a-f]+)', passed\)", code)
        if harness:  # CodePair's hidden-test harness: it prints the marker and a count
            return ToolResult(f"{harness.group(1)} {len(code) % 3}\n", "", 0, False, 0.5)
        if "three" in code or "eighty_one" in code:
            error = "Traceback (most recent call last):\nNameError: name is not defined\n"
            return ToolResult("", error, 1, False, 0.5)
        if "SystemExit(1)" in code:
            return ToolResult("", "", 1, False, 0.5)
        printed = "".join(f"{shown}\n" for shown in re.findall(r"print\((.*)\)", code))
        return ToolResult(printed, "", 0, False, 0.5, files=("out.txt",))

    return run_python_async


def answering(name: str, log: list, answer, key=lambda observation: observation.splitlines()[0]):
    """A chat function for seat `name`: `answer(observation, turn)` is its reply, where `turn` counts the
    calls this seat has had for the same `key(observation)` (the episode it reads about)."""
    turns: dict[str, int] = {}

    async def chat(chats, params):
        observations = [c[-1]["content"] for c in chats]
        log.append(["agent", name, observations])
        out = []
        for observation in observations:
            episode = key(observation)
            turn = turns[episode] = turns.get(episode, -1) + 1
            text = answer(observation, turn)
            tokens = tuple(range(1, len(text.split()) + 2))
            out.append(
                (f"PROMPT:{observation}", Generation(text, (1,), tokens, (-0.1,) * len(tokens), "stop"), 0.0)
            )
        return out

    return chat


def transcript_hash(log: list, trajectories) -> str:
    record = {"log": log, "trajectories": [dataclasses.asdict(t) for t in trajectories]}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def test_mathchat_rollout_is_the_same_transcript(monkeypatch):
    log: list = []
    monkeypatch.setattr("mappa.sandbox.runner.run_python_async", fake_sandbox(log))
    question = {q.partition(":")[0]: q for q in EXECUTOR_SCRIPT}
    replies = {
        "solver": lambda obs, turn: f"Reasoning about {obs.splitlines()[0]}",
        "executor": lambda obs, turn: EXECUTOR_SCRIPT[obs.splitlines()[0].removeprefix("Problem: ")][turn],
        "verifier": lambda obs, turn: "The program printed it. \\boxed{42}",
    }
    agents = {
        name: Agent(name, ROLES[name], answering(name, log, replies[name]), SamplingParams())
        for name in ROLES
    }
    answers = ["42", "5", "7", "4", "81"]
    problems = [(f"t{i}", Problem(f"p{i}", question[f"Q{i}"], answers[i])) for i in range(5)]
    trajectories = asyncio.run(run_mathchat(problems, agents, SandboxLimits(), max_executor_turns=3))

    calls = [(entry[0], entry[1] if entry[0] == "agent" else None) for entry in log]
    batches = [len(entry[2]) for entry in log if entry[0] == "agent"]
    assert batches == [5, 5, 4, 2, 5]  # solver, executor turns 0-2 (only the unsucceeded retry), verifier
    assert calls[:2] == [("agent", "solver"), ("agent", "executor")]
    assert calls[2:6] == [("sandbox", None)] * 4  # Q2 wrote no code: nothing runs for it
    assert [len(t.actions) for t in trajectories] == [3, 4, 5, 5, 4]
    assert trajectories[0].correct and not trajectories[1].correct
    assert "[... trimmed" in trajectories[4].actions[2].observation  # the long program, clipped
    assert transcript_hash(log, trajectories) == MATHCHAT_HASH


CODER_SCRIPT = {  # task id -> the coder's reply per turn; the reviewer approves every other task
    "square": ["```python\ndef square(x):\n    return x * x\n```"],
    "add": ["no code", "```python\ndef add(a, b):\n    return a + three\n```"],
    "neg": [
        "```python\ndef neg(x):\n    raise SystemExit(1)\n```",
        "```python\ndef neg(x):\n    return -x\n```",
    ],
}
CODEPAIR_HASH = "679ff04cc84366ac79a927672c4e58a06e74e1fd7718e62eb7dbad3ce35f8557"


def test_codepair_rollout_is_the_same_transcript(monkeypatch):
    env = pytest.importorskip("mappa_codepair.env")
    log: list = []
    monkeypatch.setattr("mappa.sandbox.runner.run_python_async", fake_sandbox(log))
    monkeypatch.setattr(env.secrets, "token_hex", lambda n: "ab" * n)

    def coder(obs, turn):
        return CODER_SCRIPT[re.search(r"def (\w+)\(", obs).group(1)][turn]

    def reviewer(obs, turn):
        name = re.search(r"def (\w+)\(", obs).group(1)
        return "APPROVE" if name != "neg" else f"```python\ndef {name}(x):\n    return 0 - x\n```"

    def task(observation):
        return re.search(r"def (\w+)\(", observation).group(1)

    replies = {"coder": coder, "reviewer": reviewer}
    agents = {
        name: Agent(name, env.ROLES[name], answering(name, log, replies[name], task), SamplingParams())
        for name in env.SEATS
    }
    problems = [
        (
            f"t{i}",
            Problem(name, f"def {name}(x):\n    '''...'''", "", {"example": f"{name}(3)", "tests": ["1"]}),
        )
        for i, name in enumerate(CODER_SCRIPT)
    ]
    trajectories = asyncio.run(env.run_codepair(problems, agents, SandboxLimits(), coder_turns=2))

    batches = [len(entry[2]) for entry in log if entry[0] == "agent"]
    assert batches == [3, 2, 3]  # coder turns 0-1 (only the failed ones retry), reviewer
    assert [len(t.actions) for t in trajectories] == [2, 3, 3]
    assert transcript_hash(log, trajectories) == CODEPAIR_HASH


SEAT_SCRIPT = {  # seat -> task -> its reply per turn; `save(...)` writes those files in the workspace
    "data_engineer": {
        "Task A": [
            "```python\nsave('X_train.pkl')\n```",
            "```python\nsave('y_train.pkl', 'X_test.pkl')\n```",
        ],
        "Task B": ["```python\nsave('X_train.pkl', 'y_train.pkl', 'X_test.pkl')\n```"],
    },
    "modeler": {
        "Task A": ["no code", "```python\nprint(oops_three)\n```", "```python\nsave('model.pkl')\n```"],
        "Task B": ["```python\nsave('model.pkl')\n```"],
    },
    "analyst": {
        "Task A": ["```python\nsave('submission.csv')\n```"],
        "Task B": ["```python\nx = 1\n```", "nothing", "```python\nsave('other.csv')\n```"],
    },
}
DSBENCH_HASH = "fb9537af6cf7a0dd31a448980d05481132bce7f37715236cd3ef57eaaa3f39b8"


def test_dsbench_rollout_is_the_same_transcript(monkeypatch, tmp_path):
    """The workspaces and grading are stubbed (fixed public files, a grade by whether submission.csv
    exists): the transcript is about turns, observations and hand-overs, not about scikit-learn."""
    from types import SimpleNamespace

    from mappa.envs.dsbench import team

    log: list = []
    sandbox = fake_sandbox(log)

    async def saving(code, workdir=None, limits=None):
        for names in re.findall(r"save\((.*)\)", code):
            for name in re.findall(r"'([^']+)'", names):
                (workdir / name).write_text(f"{name} by the fake sandbox\n")
        result = await sandbox(code, workdir, limits)
        return dataclasses.replace(result, files=tuple(sorted(p.name for p in workdir.iterdir())))

    def workspace(task, folder):
        folder.mkdir(parents=True)
        (folder / "train.csv").write_text("id,x,y\n1,0.5,a\n2,1.5,b\n3,2.5,a\n4,3.5,b\n")
        (folder / "test.csv").write_text("id,x\n5,4.5\n")
        (folder / "sample_submission.csv").write_text("id,y\n5,a\n")

    def grade(task, submission):
        valid = submission.is_file()
        return SimpleNamespace(valid=valid, metric="accuracy", value=1.0, as_dict=lambda: {"valid": valid})

    monkeypatch.setattr("mappa.sandbox.runner.run_python_async", saving)
    monkeypatch.setattr(team, "problem_to_task", lambda problem: SimpleNamespace(kind="classification"))
    monkeypatch.setattr(team, "write_workspace", workspace)
    monkeypatch.setattr(team, "paths_to_hide", lambda task: ("/nonexistent/labels.csv",))
    monkeypatch.setattr(team, "grade_submission", grade)

    def seat(name):
        def reply(observation, turn):
            return SEAT_SCRIPT[name][observation.splitlines()[0]][turn]

        return Agent(name, team.ROLES[name], answering(name, log, reply), SamplingParams())

    agents = {name: seat(name) for name in team.SEATS}
    problems = [(f"t{i}", Problem(f"p{i}", f"Task {name}\nPredict y.", "")) for i, name in enumerate("AB")]
    trajectories = asyncio.run(
        team.run_dsbench(problems, agents, SandboxLimits(), max_turns=3, workspace_root=str(tmp_path))
    )

    batches = [(entry[1], len(entry[2])) for entry in log if entry[0] == "agent"]
    assert batches == [
        ("data_engineer", 2),
        ("data_engineer", 1),
        ("modeler", 2),
        ("modeler", 1),
        ("modeler", 1),
        ("analyst", 2),
        ("analyst", 1),
        ("analyst", 1),
    ]
    assert [t.correct for t in trajectories] == [True, False]
    for t in trajectories:  # the workspaces' folder differs per run: the transcript leaves it out
        assert all(a.tool_result is None or a.tool_result.duration_s == 0.5 for a in t.actions)
    assert transcript_hash(log, trajectories) == DSBENCH_HASH
