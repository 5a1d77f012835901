"""The coach types `coach.type` can name: what each declares (`CoachSpec`) and where it is found.

One module per coach type holds one `CoachSpec`: its name, what it needs and how it is built. What a coach
needs is read from its spec, once, by everything that used to list coach types by name: config validation
(`coach.type` is known; an LLM coach must have a template), the score stage (a local model on the `coach`
worker), the pre-flight (its template checked and its endpoint reached before a run starts), the
empty-action rule (`mappa.coach.score`) and the team card. A spec is found by `coach.type`:

    local, openai, rubric, outcome  the built-ins (`mappa.coach.local:COACH`, `mappa.coach.openai:COACH`, ...)
    <name>                          a coach an installed package registers in the entry-point group
                                    `mappa.coaches` (pyproject: `[project.entry-points."mappa.coaches"]
                                    length = "my_team.length:COACH"`)
    <package.module>:<NAME>         an import path to a `CoachSpec` (no registration; e.g. a module of your
                                    own on PYTHONPATH)

A spec is loaded the first time it is asked for and kept. A name that is none of these, or a plug-in that
fails to import or holds no `CoachSpec`, raises `CoachNotFound` / `CoachPluginError` with one line naming
the coach, the package and what failed (the lookup all plug-ins share: `mappa.core.plugins`). A new coach
is one module, plus its config section when it has settings of its own (docs/coaches.md, "A new coach"):

    class LengthConfig(CoachConfig):             # optional: the settings `coach:` may add for this type
        per_char: float = 0.5

    def build(config: LengthConfig, inputs: CoachInputs) -> Coach:
        return LengthCoach(config.per_char)

    COACH = CoachSpec(name="length", build=build, config=LengthConfig)

It lives with the config, below the coaches, because validating a config reads it; the coaches' modules
are loaded by name (`importlib`), never imported here. Not covered: the scoring (`mappa.coach`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from mappa.core.plugins import PluginKind, load_plugin
from mappa.envs.spec import EnvSpec

ENTRY_POINT_GROUP = "mappa.coaches"
BUILTIN_COACHES = {
    "local": "mappa.coach.local:COACH",
    "openai": "mappa.coach.openai:COACH",
    "rubric": "mappa.coach.rubric:COACH",
    "outcome": "mappa.coach.outcome:COACH",
}


@dataclass(frozen=True)
class CoachInputs:
    """What the caller of `build_coach` hands a coach's `build`, beside its config section."""

    env: EnvSpec | None = None
    """The run's env (`RunConfig.env_spec`): the rubric coach's rules are its env's."""
    chat_fn: Callable[..., Awaitable[Any]] | None = None
    """For a coach that `runs_local_model`: the coach engine's batch chat (`mappa.coach.base.ChatFn`)."""
    logprob_fn: Callable[..., Awaitable[Any]] | None = None
    """For a local model: its next-token logprobs over score tokens (`mappa.coach.expected.LogprobFn`)."""
    grouped_logprob_fn: Callable[..., Awaitable[Any]] | None = None
    """For a local model: its next-token logprobs over grouped questions
    (`mappa.coach.criteria.GroupedLogprobFn`)."""
    features_fn: Callable[..., Awaitable[Any]] | None = None
    """For a local model whose coach learns (`coach.learn`): the features its answers are read from, over
    grouped questions (`mappa.coach.learned.FeaturesFn`)."""
    head: Any = None
    """For a coach that learns: the head it reads answers with this iteration (`mappa.coach.head`)."""


@dataclass(frozen=True)
class CoachSpec:
    """One coach type: the name `coach.type` gives it, what it needs, how it is built."""

    name: str
    """The `coach.type` value (a plug-in's registered name, or its import path, may differ)."""
    build: Callable[[Any, CoachInputs], Any]
    """(its validated config section, what the caller has) -> the coach (`mappa.coach.base.Coach`: a
    `model_name` and `async score(requests)`); a ValueError names what is missing (e.g. a local coach built
    without a chat function)."""
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


class CoachNotFound(ValueError):
    """`coach.type` names no built-in, no registered plug-in and no import path."""


class CoachPluginError(ValueError):
    """A coach was found but could not be loaded: its module failed to import, or it holds no `CoachSpec`."""


COACHES = PluginKind(
    "coach",
    ENTRY_POINT_GROUP,
    CoachSpec,
    "COACH",
    CoachNotFound,
    CoachPluginError,
    builtins=BUILTIN_COACHES,
    plural="coaches",
)
"""What `coach.type` names (`registered_plugins(COACHES)`: every name it can give)."""


@cache
def get_coach_spec(coach_type: str) -> CoachSpec:
    """The spec of coach `coach_type`, loaded the first time and kept."""
    return load_plugin(COACHES, coach_type)
