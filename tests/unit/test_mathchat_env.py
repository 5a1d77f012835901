"""The MathChat topology with scripted agents (the test is about the env, not a model): turn order,
the executor's retry after a failed run, sandbox results on actions, grading, no ground truth in prompts."""

import asyncio

from scripted_chat import scripted

from mappa.agents.agent import Agent
from mappa.core.types import Problem
from mappa.envs.mathchat.team import ROLES, run_mathchat
from mappa.inference.engine import Generation, SamplingParams
from mappa.sandbox import SandboxLimits

PROBLEM = Problem("p1", "What is 6 times 7?", "42")
SLOW_MACHINE_S = 30.0  # a trivial program took 6 s beside heavy tests; no test here is about timeouts


def agents_for(script: dict[str, list[str]], seen: list) -> dict[str, Agent]:
    return {name: Agent(name, ROLES[name], scripted(script[name], seen), SamplingParams()) for name in ROLES}


def run(script):
    seen: list = []
    trajectories = asyncio.run(
        run_mathchat(
            [("t1", PROBLEM)],
            agents_for(script, seen),
            SandboxLimits(timeout_s=SLOW_MACHINE_S),
            max_executor_turns=2,
        )
    )
    return trajectories[0], seen


def test_executor_retries_after_a_crash_and_the_answer_is_graded():
    trajectory, seen = run(
        {
            "solver": ["6 times 7 is 42."],
            "executor": ["```python\nprint(6 * seven)\n```", "```python\nprint(6 * 7)\n```"],
            "verifier": ["The program printed 42. \\boxed{42}"],
        }
    )
    assert [(a.agent, a.turn) for a in trajectory.actions] == [
        ("solver", 0),
        ("executor", 0),
        ("executor", 1),
        ("verifier", 0),
    ]
    crashed, fixed = trajectory.actions[1].tool_result, trajectory.actions[2].tool_result
    assert crashed.exit_code != 0 and "NameError" in crashed.stderr
    assert fixed.ok and fixed.stdout.strip() == "42"
    assert "NameError" in trajectory.actions[2].observation  # the retry saw the error
    assert "42" in trajectory.actions[3].observation  # the verifier saw the output
    assert trajectory.final_answer == "42" and trajectory.correct
    assert all(a.trajectory_id == "t1" and a.index == i for i, a in enumerate(trajectory.actions))


def test_a_successful_first_run_ends_the_executor_turns():
    trajectory, _ = run(
        {"solver": ["42"], "executor": ["```python\nprint(42)\n```"], "verifier": ["\\boxed{41}"]}
    )
    assert [a.agent for a in trajectory.actions] == ["solver", "executor", "verifier"]
    assert not trajectory.correct and trajectory.final_answer == "41"


def test_missing_code_and_missing_box():
    trajectory, seen = run(
        {"solver": ["hmm"], "executor": ["no code here", "still none"], "verifier": ["I think 42"]}
    )
    executor = [a for a in trajectory.actions if a.agent == "executor"]
    assert [a.tool_call for a in executor] == [None, None]
    assert "no ```python block" in executor[1].observation
    assert trajectory.final_answer is None and not trajectory.correct
    for chat in seen:
        assert all(
            "42" not in m["content"] for m in chat if m["role"] == "user" and "hmm" not in m["content"]
        )


def test_concurrent_batches_overlap_agents_and_keep_the_problems_order():
    """`rollout.concurrent_batches`: while one batch is with the executor, the next is with the solver."""
    from mappa.stages.rollout import run_batches

    calls: list[tuple[str, int, str]] = []  # (agent, batch size, "start" | "end"), in time order

    def slow(name: str):
        lock = asyncio.Lock()  # one call at a time, as a Ray actor serves them

        async def chat(chats, params):
            async with lock:
                calls.append((name, len(chats), "start"))
                await asyncio.sleep(0.2 if name == "solver" else 0.01)
                calls.append((name, len(chats), "end"))
            text = {"solver": "Add them.", "executor": "```python\nprint(2)\n```", "verifier": "\\boxed{2}"}
            generation = Generation(text[name], (1,), (1, 2), (-0.1, -0.1), "stop")
            return [("prompt", generation, 0.0) for _ in chats]

        return chat

    agents = {name: Agent(name, ROLES[name], slow(name), SamplingParams()) for name in ROLES}
    problems = [(f"t{i}", Problem(f"p{i}", "What is 1 + 1?", "2")) for i in range(5)]

    def run_batch(batch):
        return run_mathchat(batch, agents, SandboxLimits(timeout_s=SLOW_MACHINE_S, isolation="none"))

    trajectories = asyncio.run(run_batches(run_batch, problems, batches=2))
    assert [t.id for t in trajectories] == [f"t{i}" for i in range(5)]
    assert all(t.correct for t in trajectories)
    assert sorted(n for agent, n, edge in calls if agent == "solver" and edge == "start") == [2, 3]
    first_executor = calls.index(next(c for c in calls if c[0] == "executor"))
    solver_ends = [i for i, c in enumerate(calls) if c[0] == "solver" and c[2] == "end"]
    assert solver_ends[0] < first_executor < solver_ends[1]  # the executor works while the solver does
