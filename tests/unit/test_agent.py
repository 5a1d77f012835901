"""An agent asks its policy with a seed of its own: seats that share a base seed must not sample alike."""

import asyncio

from mappa.agents.agent import Agent
from mappa.inference.engine import Generation, SamplingParams


def _recording_chat(seeds: list):
    async def chat(chats, params):
        seeds.append(params.seed)
        return [("p", Generation("x", (1,), (2,), (-0.5,), "stop"), 0.0) for _ in chats]

    return chat


def test_each_agent_and_call_gets_its_own_seed_and_calls_repeat_exactly():
    seeds: list = []
    params = SamplingParams(seed=7)
    solver, verifier = (
        Agent(name, "role", _recording_chat(seeds), params) for name in ("solver", "verifier")
    )
    for agent in (solver, verifier, solver):
        asyncio.run(agent.act(["Problem: 1 + 1?"]))
    asyncio.run(solver.act(["Problem: 2 + 2?"]))
    first_solver, first_verifier, again, other_problem = seeds
    assert first_solver != first_verifier  # two seats, one base seed: different samples
    assert again == first_solver  # the same call reproduces (a resumed rollout samples alike)
    assert other_problem != first_solver
    assert asyncio.run(Agent("a", "r", _recording_chat(seeds), SamplingParams(seed=None)).act(["q"]))
    assert seeds[-1] is None  # no base seed: none is made up
