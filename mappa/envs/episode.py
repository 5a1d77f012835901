"""An episode: one trajectory while its batch is rolled out, gathering its actions in order.

An env's rollout keeps one episode per (trajectory id, problem) it was given, lets each seat act on all of
them and records every reply with `record`, which numbers the actions in the order they happen (an
`Action`'s `index`). Envs subclass it for the state their next prompts read (MathChat: the solver's
reasoning, the last program and its result); the code-writing seat (`mappa.envs.code_seat`) records its
turns through it. When the rollout ends, `Trajectory(episode.id, episode.problem, tuple(episode.actions),
...)` is the graded result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mappa.agents.agent import Reply
from mappa.core.types import Action, Problem, ToolResult


@dataclass
class Episode:
    """`id`, the trajectory's id (as the rollout was given it); `problem`, what the team works on;
    `actions`, every reply recorded so far, in acting order."""

    id: str
    problem: Problem
    actions: list[Action] = field(default_factory=list)

    def record(
        self,
        agent: str,
        turn: int,
        reply: Reply,
        tool_call: str | None = None,
        tool_result: ToolResult | None = None,
    ) -> Action:
        """`reply` recorded as the next action, by seat `agent` at its own `turn` (0-based), with the code
        it ran (`tool_call`, None: none) and the sandbox's result (None: nothing ran)."""
        index = len(self.actions)
        action = reply.action(self.id, self.problem.id, agent, index, turn, tool_call, tool_result)
        self.actions.append(action)
        return action
