"""What a coach is (`Coach`) and what a coach type declares (`CoachSpec`): its name, what it needs, and how
it is built.

One module per coach type holds one `CoachSpec` (the built-ins: `mappa.coach.local:COACH`, `openai`,
`rubric`, `outcome`); `mappa.coach.registry` finds it by the config's `coach.type`. What a coach needs is
read from here, once, by everything that used to list coach types by name: config validation (an LLM
coach must have a template), the score stage (a local model on the `coach` worker), preflight (the
template is checked and the endpoint reached before a run starts), the empty-action rule
(`mappa.coach.score`) and the team card.

A new coach is one module like this, plus its config section when it has settings of its own:

    class MyConfig(CoachConfig):            # optional: the fields `coach:` may add for this type
        strictness: float = 1.0

    def build(config: MyConfig, inputs: CoachInputs) -> Coach:
        return MyCoach(config.strictness)

    COACH = CoachSpec(name="mine", build=build, config=MyConfig)

registered under its name in the entry-point group `mappa.coaches`, or named by its import path
(`coach.type: my_package.my_coach:COACH`).

Not covered here: finding a spec by name (`mappa.coach.registry`), the scoring itself (`mappa.coach.base`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mappa.coach.criteria import GroupedLogprobFn
from mappa.coach.expected import LogprobFn
from mappa.coach.prompt import CoachRequest
from mappa.core.types import ActionScore

ChatFn = Callable[[list[list[dict[str, str]]]], Awaitable[list[str]]]
"""An engine's batch chat: one answer text per chat (`mappa.coach.local`)."""


class Coach(Protocol):
    """Anything that scores actions: `score` returns one `ActionScore` per request, in order."""

    model_name: str

    async def score(self, requests: list[CoachRequest]) -> list[ActionScore]: ...


@dataclass(frozen=True)
class CoachInputs:
    """What the caller of `build_coach` hands a coach's `build`, beside its config section."""

    env_type: str | None = None
    """The run's `env.type` (the rubric coach's rules are its env's)."""
    chat_fn: ChatFn | None = None
    """For a coach that `runs_local_model`: the coach engine's batch chat (greedy generation)."""
    logprob_fn: LogprobFn | None = None
    """For a local model: its next-token logprobs over score candidates (`mappa.coach.expected`)."""
    grouped_logprob_fn: GroupedLogprobFn | None = None
    """For a local model: its next-token logprobs over grouped questions (`mappa.coach.criteria`)."""


@dataclass(frozen=True)
class CoachSpec:
    """One coach type: the name `coach.type` gives it, what it needs, how it is built."""

    name: str
    """The `coach.type` value (a plug-in's registered name, or its import path, may differ)."""
    build: Callable[[Any, CoachInputs], Coach]
    """(its validated config section, what the caller has) -> the coach; a ValueError names what is
    missing (e.g. a local coach built without a chat function)."""
    is_llm: bool = False
    """An LLM coach: asks the language model `coach.model`. An action with no usable output gets
    `coach.empty_action_score` by rule instead of a question (`mappa.coach.score.rule_verdict`), and the
    team card names the model (and its licence)."""
    reads_template: bool = False
    """Renders `coach.template` (and its schedule's) for every action: a run config on an env that ships
    no template must name one, and the template is checked before a run starts."""
    runs_local_model: bool = False
    """Needs `coach.model` loaded on the run's own `coach` worker: prepared, counted in the memory
    estimate, released between score stages; its `build` gets the engine's functions in `CoachInputs`."""
    check_endpoint: Callable[[Any], None] | None = None
    """For a coach behind an endpoint: (its config) -> None, reaching the endpoint before a run starts
    (key present, server answering, model served); a ValueError names what to fix. None: no endpoint."""
    config: type | None = None
    """Its config section, a subclass of `mappa.config.CoachConfig` adding this type's own settings;
    None: `CoachConfig` itself (every built-in)."""
    summary: str = ""
    """One line for listings and docs: what it scores with."""

    @property
    def calls_endpoint(self) -> bool:
        return self.check_endpoint is not None
