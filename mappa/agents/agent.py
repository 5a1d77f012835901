"""An agent: a seat's name and role (its system prompt) plus a handle to the policy that answers for it.

`Agent.act` turns a batch of observations into chats, asks the policy (usually a Ray actor holding the
agent's own weights, see `mappa.cluster.model_worker`) for one generation each, and returns what the env
needs to record an `Action`. The policy handle is any async function over chats, so an env never knows
where the weights live.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mappa.core.types import Action, ToolResult
from mappa.inference.engine import Generation, SamplingParams

Chat = list[dict[str, str]]


@dataclass(frozen=True)
class Reply:
    """One generation with the exact prompt text it answered."""

    observation: str
    prompt: str
    generation: Generation
    seconds: float

    def action(
        self,
        trajectory_id: str,
        problem_id: str,
        agent: str,
        index: int,
        turn: int,
        tool_call: str | None = None,
        tool_result: ToolResult | None = None,
    ) -> Action:
        """This reply recorded as the `index`-th action of a trajectory, with the tool call it made."""
        gen = self.generation
        return Action(
            trajectory_id=trajectory_id,
            problem_id=problem_id,
            agent=agent,
            index=index,
            turn=turn,
            observation=self.observation,
            prompt=self.prompt,
            response=gen.text,
            prompt_token_ids=gen.prompt_token_ids,
            response_token_ids=gen.token_ids,
            logprobs=gen.logprobs,
            finish_reason=gen.finish_reason,
            tool_call=tool_call,
            tool_result=tool_result,
            generation_s=self.seconds,
        )


ChatFn = Callable[[list[Chat], SamplingParams], Awaitable[list[tuple[str, Generation, float]]]]


@dataclass(frozen=True)
class Agent:
    name: str
    role: str
    chat: ChatFn
    params: SamplingParams

    async def act(self, observations: list[str]) -> list[Reply]:
        """One reply per observation, in order."""
        if not observations:
            return []
        chats = [
            [{"role": "system", "content": self.role}, {"role": "user", "content": o}] for o in observations
        ]
        answers = await self.chat(chats, self._call_params(observations))
        return [Reply(o, prompt, gen, seconds) for o, (prompt, gen, seconds) in zip(observations, answers)]

    def _call_params(self, observations: list[str]) -> SamplingParams:
        """A seed of its own per agent and call, so agents sharing a base seed do not sample alike."""
        if self.params.seed is None:
            return self.params
        salt = zlib.crc32(f"{self.name}\n{observations[0]}".encode())
        return dataclasses.replace(self.params, seed=(self.params.seed + salt) % 2**31)
