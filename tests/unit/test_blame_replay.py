"""The blame check's corruptions and replays on MathChat with scripted policies (the test is about the
replay, not a model): upstream actions as stored, the corrupted action forced, downstream agents acting on
what the corruption produced (the sandbox re-runs the corrupted program), and CoalescingChat batching."""

import asyncio

from scripted_chat import scripted

from mappa.agents.agent import Agent
from mappa.core.types import Problem
from mappa.envs.corruption import GENERIC, corruptions_for
from mappa.envs.mathchat import SPEC
from mappa.envs.mathchat.corruptions import CORRUPTIONS, wrong_number
from mappa.envs.mathchat.team import ROLES, MathChatEnvConfig
from mappa.envs.replay import CoalescingChat, forced_scripts, replay, upstream_changed
from mappa.inference.engine import SamplingParams
from mappa.sandbox import SandboxLimits

PROBLEM = Problem("p1", "What is 6 times 7?", "42")
LIMITS = SandboxLimits(timeout_s=30.0)  # a trivial program took 6 s beside heavy tests
ENV = MathChatEnvConfig(max_executor_turns=1, answer_format="last_number")


def agents_for(script, seen):
    return {name: Agent(name, ROLES[name], scripted(script[name], seen), SamplingParams()) for name in ROLES}


def stored_trajectory():
    """The trajectory as the run stored it: right all along."""
    script = {
        "solver": ["6 times 7 is 42."],
        "executor": ["```python\nprint(6 * 7)\n```"],
        "verifier": ["The program printed 42. \\boxed{42}"],
    }
    return asyncio.run(SPEC.run([("t1", PROBLEM)], agents_for(script, []), LIMITS, ENV))[0]


def corruption(name):
    return next(c for c in CORRUPTIONS if c.name == name)


def test_each_seat_gets_its_own_corruptions_and_the_generic_ones():
    assert [c.name for c in corruptions_for(CORRUPTIONS, "executor")] == ["prints-wrong", "raises", *(
        c.name for c in GENERIC
    )]  # fmt: skip
    trajectory = stored_trajectory()
    solver, executor, verifier = trajectory.actions
    assert corruption("wrong-number").apply(solver, trajectory) == "6 times 7 is 43."
    assert corruption("wrong-operation").apply(solver, trajectory) is None  # "times": no sign to swap
    assert corruption("prints-wrong").apply(executor, trajectory) == "```python\nprint(43)\n```"
    assert corruption("raises").apply(executor, trajectory) == "```python\nx = 1 / 0\nprint(6 * 7)\n```"
    assert corruption("wrong-final").apply(verifier, trajectory) == "The program printed 42. \\boxed{43}"
    echo = next(c for c in GENERIC if c.name == "echo")
    assert echo.apply(solver, trajectory) is None and echo.apply(executor, trajectory) == solver.response
    assert wrong_number("7/2") == "7" and wrong_number("7") == "8"


def test_a_replay_forces_upstream_and_target_and_lets_downstream_react():
    trajectory = stored_trajectory()
    executor = trajectory.actions[1]
    corrupted = corruption("prints-wrong").apply(executor, trajectory)
    assert forced_scripts(trajectory, 1, corrupted) == {
        "solver": ["6 times 7 is 42."],
        "executor": [corrupted],
    }
    seen: list = []
    # the policy: only the verifier is asked (upstream and the target are forced)
    policy = agents_for(
        {"solver": [], "executor": [], "verifier": ["The program printed 43. \\boxed{43}"]}, seen
    )
    replayed = asyncio.run(
        replay(SPEC, trajectory, 1, corrupted, policy, LIMITS, ENV, "check:t1:1:prints-wrong")
    )
    solver, new_executor, verifier = replayed.actions
    assert solver.response == trajectory.actions[0].response and not upstream_changed(trajectory, replayed, 1)
    assert new_executor.response == corrupted and new_executor.tool_result.stdout.strip() == "43"
    assert len(seen) == 1 and "43" in seen[0][-1]["content"]  # the verifier saw the corrupted output
    assert verifier.response.endswith("\\boxed{43}") and not replayed.correct
    assert replayed.id == "check:t1:1:prints-wrong"


def test_concurrent_calls_reach_the_policy_as_one_batch():
    calls = []

    async def chat(chats, params):
        calls.append(len(chats))
        return [(f"P{i}", chat_[-1]["content"], 0.0) for i, chat_ in enumerate(chats)]

    coalescing = CoalescingChat(chat, window_s=0.01)

    async def three():
        one = [[{"role": "user", "content": "a"}]]
        two = [[{"role": "user", "content": "b"}], [{"role": "user", "content": "c"}]]
        return await asyncio.gather(
            coalescing(one, SamplingParams(seed=1)), coalescing(two, SamplingParams(seed=2))
        )

    first, second = asyncio.run(three())
    assert calls == [3]  # one call for both callers (their seeds differ; greedy ignores them)
    assert [text for _, text, _ in first] == ["a"] and [text for _, text, _ in second] == ["b", "c"]


def test_a_call_made_while_a_batch_generates_goes_in_the_next_batch():
    """A replay's next seat asks while another batch is generating: it must not wait forever."""
    calls = []

    async def slow_chat(chats, params):
        calls.append(len(chats))
        await asyncio.sleep(0.05)
        return [("P", chat_[-1]["content"], 0.0) for chat_ in chats]

    coalescing = CoalescingChat(slow_chat, window_s=0.01)

    async def late(text):
        await asyncio.sleep(0.03)  # after the first batch left, before it came back
        return await coalescing([[{"role": "user", "content": text}]], SamplingParams())

    async def both():
        first = coalescing([[{"role": "user", "content": "a"}]], SamplingParams())
        return await asyncio.wait_for(asyncio.gather(first, late("b")), timeout=5)

    first, second = asyncio.run(both())
    assert calls == [1, 1] and first[0][1] == "a" and second[0][1] == "b"
