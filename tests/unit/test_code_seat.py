"""The code-writing seat (`mappa.envs.code_seat`) on a batch, with a scripted agent and a faked sandbox (the
tests are about the loop, not a model or the sandbox): who is asked again, what each turn reads, what is
recorded and run, and what comes back."""

import asyncio
from pathlib import Path

import pytest
from scripted_chat import scripted

from mappa.envs.api import (
    Agent,
    Episode,
    Problem,
    SamplingParams,
    SandboxLimits,
    ToolResult,
    run_code_seat,
)

LIMITS = SandboxLimits(timeout_s=5)


def fake_sandbox(monkeypatch) -> list[tuple]:
    """Runs nothing: `fail` in a program exits 1, anything else prints `ran`; returns the runs' log."""
    runs: list[tuple] = []

    async def run_python_async(code, workdir=None, limits=None):
        runs.append((code, workdir, limits))
        return (
            ToolResult("", "boom", 1, False, 0.1)
            if "fail" in code
            else ToolResult("ran\n", "", 0, False, 0.1)
        )

    monkeypatch.setattr("mappa.sandbox.runner.run_python_async", run_python_async)
    return runs


def observe(episode, last):
    return f"{episode.id}: " + ("first" if last is None else f"again after {last.code}")


def test_only_the_unfinished_episodes_try_again_and_each_sees_its_last_attempt(monkeypatch):
    runs = fake_sandbox(monkeypatch)
    seen: list = []
    replies = ["```python\nfail()\n```", "```python\nok()\n```", "no code", "```python\nok()\n```"]
    agent = Agent("coder", "Write code.", scripted(replies, seen), SamplingParams())
    episodes = [Episode("a", Problem("p", "q", "")), Episode("b", Problem("p", "q", ""))]

    attempts = asyncio.run(run_code_seat("coder", agent, episodes, observe, max_turns=4, limits=LIMITS))

    assert [chat[-1]["content"] for chat in seen] == [
        "a: first",
        "b: first",
        "a: again after fail()",
        "a: again after None",
    ]  # a fifth call would find no scripted reply: turn 3 asked nobody
    assert [code for code, _, _ in runs] == ["fail()", "ok()", "ok()"]  # "no code" ran nothing
    assert [(a.turn, a.index, a.tool_call) for a in episodes[0].actions] == [
        (0, 0, "fail()"),
        (1, 1, None),
        (2, 2, "ok()"),
    ]
    assert [(a.turn, a.tool_call, a.tool_result.ok) for a in episodes[1].actions] == [(0, "ok()", True)]
    assert [(x.code, x.ran_ok) for x in attempts] == [("ok()", True), ("ok()", True)]


def test_the_program_folder_and_limits_are_the_envs_and_the_action_keeps_the_code_as_written(monkeypatch):
    runs = fake_sandbox(monkeypatch)
    agent = Agent("coder", "Write code.", scripted(["```python\ndef f(): pass\n```"], []), SamplingParams())
    episode = Episode("a", Problem("p", "q", ""))
    own = SandboxLimits(timeout_s=7)
    asyncio.run(
        run_code_seat(
            "coder",
            agent,
            [episode],
            observe,
            max_turns=2,
            limits=lambda e: own,
            program=lambda e, code: f"{code}\nprint(f())",
            workdir=lambda e: Path("/work/space"),
        )
    )
    assert runs == [("def f(): pass\nprint(f())", Path("/work/space"), own)]
    assert episode.actions[0].tool_call == "def f(): pass"


def test_done_decides_who_leaves(monkeypatch):
    fake_sandbox(monkeypatch)
    seen: list = []
    agent = Agent("coder", "Write code.", scripted(["```python\nok()\n```"] * 2, seen), SamplingParams())
    episode = Episode("a", Problem("p", "q", ""))
    never = asyncio.run(
        run_code_seat("coder", agent, [episode], observe, max_turns=2, limits=LIMITS, done=lambda e, a: False)
    )
    assert len(seen) == 2 and [a.turn for a in episode.actions] == [0, 1] and never[0].ran_ok


def test_no_call_once_every_episode_is_done_and_at_least_one_turn(monkeypatch):
    """An agent that may only be asked about one episode (a blame-check replay) is never asked about none."""
    fake_sandbox(monkeypatch)

    class OneAtATime:
        name = "coder"

        async def act(self, observations):
            assert len(observations) == 1, observations
            return await Agent("coder", "", scripted(["```python\nok()\n```"], []), SamplingParams()).act(
                observations
            )

    episode = Episode("a", Problem("p", "q", ""))
    asyncio.run(run_code_seat("coder", OneAtATime(), [episode], observe, max_turns=3, limits=LIMITS))
    assert len(episode.actions) == 1
    with pytest.raises(ValueError, match="max_turns >= 1"):
        asyncio.run(run_code_seat("coder", OneAtATime(), [episode], observe, max_turns=0, limits=LIMITS))


def test_a_mathchat_replay_whose_executor_succeeded_at_once_runs_with_two_executor_turns(monkeypatch):
    """The blame check replays one trajectory with scripted agents that refuse an empty batch; MathChat's
    executor loop used to ask for its second turn with nobody left."""
    from mappa.envs.mathchat import SPEC
    from mappa.envs.mathchat.team import ROLES, MathChatEnvConfig
    from mappa.envs.replay import replay

    fake_sandbox(monkeypatch)
    env = MathChatEnvConfig(max_executor_turns=2)
    script = {"solver": ["42"], "executor": ["```python\nok()\n```"], "verifier": ["\\boxed{42}"]}
    agents = {name: Agent(name, ROLES[name], scripted(script[name], []), SamplingParams()) for name in ROLES}
    problem = Problem("p", "What is 6 times 7?", "42")
    (stored,) = asyncio.run(SPEC.run([("t", problem)], agents, LIMITS, env))
    policy = {
        name: Agent(name, ROLES[name], scripted(["\\boxed{42}"], []), SamplingParams()) for name in ROLES
    }
    replayed = asyncio.run(replay(SPEC, stored, 2, stored.actions[2].response, policy, LIMITS, env, "r"))
    assert [a.agent for a in replayed.actions] == ["solver", "executor", "verifier"] and replayed.correct
