"""An agent asks its policy with a seed of its own: seats that share a base seed must not sample alike."""

import asyncio
import dataclasses

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


def test_a_seat_with_its_own_token_limit_gets_it_and_the_other_seats_keep_the_rollouts(tmp_path):
    from mappa.config import load_config
    from mappa.envs.registry import get_env_spec
    from mappa.resources import longest_action
    from mappa.stages.rollout import build_agents
    from mappa.storage.run import Run

    settings = [f"storage.root={tmp_path}", "rollout.max_new_tokens=64", "agents.executor.max_new_tokens=160"]
    run = Run.create(load_config("configs/mathchat-cpu.yaml", settings), "r1")
    asked: dict[str, SamplingParams] = {}

    def worker(name: str):
        async def remote(chats, fields):
            asked[name] = SamplingParams.from_fields(fields)
            answer = dataclasses.asdict(Generation("x", (1,), (2,), (-0.5,), "stop"))
            return [("p", answer, 0.0) for _ in chats]

        return type("Worker", (), {"chat": type("Method", (), {"remote": staticmethod(remote)})})

    seats = ("solver", "executor", "verifier")
    agents = build_agents(run, {name: worker(name) for name in seats}, SamplingParams(max_new_tokens=64))
    for name in seats:
        asyncio.run(agents[name].act(["Problem: 1 + 1?"]))
    limits = {name: asked[name].max_new_tokens for name in seats}
    assert limits == {"solver": 64, "executor": 160, "verifier": 64}
    assert asked["executor"].stop == get_env_spec("mathchat").stops["executor"]  # the env's stop strings stay
    assert longest_action(run.config) == 160  # what the memory and disk estimates plan for
