"""An env's reference team: a fixed response per seat, played as agents.

Where the policy cannot do the task (a small model whose every program crashes), a corruption changes
nothing downstream and the blame check measures nothing. An env may declare `EnvSpec.reference_team`
(problem -> seat -> a response that does the seat's part); `reference_agents` turns it into agents that give
that response on every turn. The blame check's `--team reference` rolls them out and replays them: a
corrupted action's later seats run their own fixed response again, so a program that loads a file the
corrupted seat did not save really fails, and the corrupted seat gives its corrupted response on every turn
the env gives it (`erring`). They do not adapt to what they are shown, as a policy would.
"""

from __future__ import annotations

import dataclasses

from mappa.agents.agent import Agent, Chat
from mappa.core.types import Problem
from mappa.envs.spec import EnvSpec
from mappa.inference.engine import Generation, SamplingParams

REFERENCE = SamplingParams(temperature=0.0)  # recorded on the agents; nothing is sampled


def fixed_chat(text: str):
    """A policy that answers every chat with `text` (the prompt recorded is the chat's last message)."""

    async def chat(chats: list[Chat], params: SamplingParams):
        return [(chat[-1]["content"], Generation(text, (), (), (), "stop"), 0.0) for chat in chats]

    return chat


def reference_agents(spec: EnvSpec, problem: Problem) -> dict[str, Agent]:
    """One agent per seat of `spec`, each giving the env's reference response for `problem`."""
    if spec.reference_team is None:
        raise ValueError(
            f"env {spec.type!r} declares no reference team (EnvSpec.reference_team); check the policy's own "
            "trajectories instead (mappa coach-check without --team reference)"
        )
    responses = spec.reference_team(problem)
    missing = [seat for seat in spec.seats if seat not in responses]
    if missing:
        raise ValueError(f"env {spec.type!r}: its reference team has no response for seats {missing}")
    return {
        seat: Agent(seat, spec.roles[seat], fixed_chat(responses[seat]), REFERENCE) for seat in spec.seats
    }


def erring(agents: dict[str, Agent], seat: str, text: str) -> dict[str, Agent]:
    """The team with `seat` giving `text` on every turn: a corrupted seat keeps its mistake when the env
    gives it another turn (DSBench does, while its files are missing), as the reference seat keeps its
    response."""
    return {**agents, seat: dataclasses.replace(agents[seat], chat=fixed_chat(text))}
