"""The coach section: which coach scores every action 0-10, how it is asked, and its schedule of
templates (read by `mappa.coach`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from mappa.config.coach_registry import get_coach_spec
from mappa.config.origins import Origins, origins_in
from mappa.config.section import Section

TYPE_BOUND: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("scoring", "expected"): (("local",), "it reads the coach model's token probabilities"),
    ("scoring", "criteria"): (("local",), "it reads the coach model's token probabilities"),
}
"""Coach settings only some coach types can use: (field, value) -> (those types, why). See
`CoachConfig.type` for what happens to one the coach's type cannot use."""


class CoachPhase(Section):
    """One phase of `coach.schedule`: `template` scores the iterations before `until` (the last phase may
    leave `until` out: every later iteration)."""

    until: int | None = Field(None, ge=1)
    template: str


class CoachLearnConfig(Section):
    """A coach that learns from the run (`coach.learn`): a local criteria coach whose yes/no readout is a
    head on the coach model's features (`mappa.coach.head`), updated after every score stage by the
    `coach-update` stage (`mappa.stages.coach_update`) from what the iteration's rollout shows."""

    signal: Literal["off", "pairs"] = "off"
    """`off`: a fixed coach; `pairs`: the head learns that an action scores above its counterfactual
    corruption (the env's and the generic corruptions, replayed as the blame check does), Bradley-Terry on
    the action's log-odds. Needs coach.type=local and coach.scoring=criteria; with no env-specific
    questions, use the seat-agnostic `judge` template."""
    replays: int = Field(8, ge=1, le=512)
    """Trajectories per iteration (the rollout's successes first) each of whose seats gets one corruption,
    its later seats replayed greedily with the iteration's weights: up to replays x seats pairs."""
    anchor: float = Field(1.0, gt=0)
    """How strongly each update keeps the head near the one it started from (the penalty's weight, scaled
    by the features' size: `mappa.coach.head`); larger: smaller steps."""
    max_steps: int = Field(200, ge=1, le=10_000)
    """L-BFGS iterations per update (the objective is convex: it usually converges sooner)."""
    start: str | None = None
    """A head another run learned (its `RUN/iter-K/coach-update/head.json`, local or an fsspec URL) to
    start from instead of the coach model's own Yes/No readout. With `signal: off` the coach reads every
    answer with that head and never changes it: a learned coach, frozen (say, for `mappa coach-check` of
    a head, or to carry it into a new run). Needs coach.type=local and coach.scoring=criteria, on the
    coach model the head was learned on."""

    @property
    def enabled(self) -> bool:
        """The head learns during the run (a `coach-update` stage after every score stage)."""
        return self.signal != "off"

    @property
    def reads_head(self) -> bool:
        """The coach reads its yes/no answers with a head (one that learns, or a learned one)."""
        return self.enabled or self.start is not None


class CoachConfig(Section):
    """The coach that scores every action 0-10 (`mappa.coach`)."""

    type: str = "local"
    """The coach, by its registry name (`mappa.config.coach_registry`): `local`: an engine of this project;
    `openai`: any OpenAI-compatible endpoint; `rubric`: programmatic rules; `outcome`: the trajectory's
    success (10 or 0) for every action, the outcome-only baseline; or a plug-in's name (entry-point group
    `mappa.coaches`) or import path (`package.module:COACH`). What the type needs (a template, a local
    model, an endpoint) is its `CoachSpec`'s declaration; a plug-in may add settings of its own (its
    `CoachSpec.config`, a subclass of this section).

    Switching types (`--set coach.type=outcome` on a config written for a local coach): a setting that
    this type cannot use (`TYPE_BOUND`: `scoring: expected` or `criteria`, local only) is reset to its
    default when it came from the config file (or the stored run's config, for `mappa rescore`), and is an
    error naming `--set` and the fix when written with `--set`. Settings this type merely ignores (`model`,
    `base_url`, `template` for the outcome coach) are kept as written, so no existing run's hash changes."""
    model: str = "smollm2"
    """For `local`: a model spec as for agents; for `openai`: the model name the endpoint serves."""
    base_url: str | None = None
    """For `openai`: the endpoint, e.g. http://127.0.0.1:8000/v1 (the key comes from `api_key_env`)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable that holds the API key (never the key itself)."""
    scoring: Literal["generate", "expected", "criteria"] = "generate"
    """`generate`: the coach writes a rationale and `PROCESS_SCORE: x`; `expected` (local coach only): the
    probability-weighted score from the coach model's score tokens, for small models that cannot follow
    the answer format (`mappa.coach.expected`); `criteria` (local coach only): 10 x the mean P(Yes) over
    the template's yes/no questions for the seat (`mappa.coach.criteria`). A local-only value from the
    config file is reset to `generate` when `coach.type` is another type (see `type`)."""
    template: str = "mathchat"
    """Prompt template file under mappa/coach/templates/ (without .txt) or a path to a .txt file; when a
    run config leaves it out, the env's own template (named like `env.type`)."""
    use_ground_truth: bool = False
    """Show the coach the reference answer; recorded in every score row."""
    max_concurrency: int = Field(8, ge=1, le=256)
    max_retries: int = Field(3, ge=0, le=10)
    """For `openai`: how often one request is retried after a connection error, a timeout, HTTP 408, 429 or
    5xx (exponential backoff with full jitter, a numeric Retry-After honoured up to 30 s). An endpoint
    that is down (no connection, a timeout, 502/503/504) is retried for `outage_budget_s` as well."""
    outage_budget_s: float = Field(600.0, ge=0)
    """For `openai`: how long the score stage waits for an endpoint that is down (refuses connections,
    times out, answers 502/503/504) before it stops the run. A vLLM server's restart with its model load
    takes 1-5 minutes, so the default (10 minutes) rides one out. The coach's requests share one outage
    clock: they try again together, at most 30 s apart, with one log line per wait; every answer that
    arrived stays in the run's coach cache. Past the budget the stage fails with `CoachOutageError` (the
    endpoint, the wait, the fix) and is not retried by `retries.score`, whose retries would wait as long
    again. So the longest a score stage waits for a dead endpoint is this budget plus the last tries in
    flight (one `timeout_s` for a server that hangs instead of refusing; more only for a request that
    has not yet made `max_retries` tries). Then `mappa resume` (with `--set coach.outage_budget_s=...` or
    another `coach.base_url` if needed) asks only for the missing answers. 0: no waiting, only
    `max_retries` (and `retries.score`, up to `retries.score + 1` times as long) count."""
    timeout_s: float = Field(60.0, gt=0)
    temperature: float = Field(0.0, ge=0, le=2)
    max_new_tokens: int = Field(160, ge=8, le=4096)
    fallback_score: float = Field(5.0, ge=0, le=10)
    """Score recorded (and marked `fallback`) when the coach's answer cannot be parsed after one re-ask.
    Such an action gets no advantage (it stays out of the gradient), and a re-run asks the coach again."""
    strip_reasoning: bool = True
    """Remove reasoning blocks (`<think>...</think>`, an unclosed `<think>` to the end, everything before a
    lone `</think>`) from the agent output the coach sees; the prompt says that it was removed."""
    empty_action_score: float | None = Field(0.0, ge=0, le=10)
    """LLM coaches (local, openai): an action with no usable output (blank, or nothing but reasoning, e.g.
    cut at the token limit inside its `<think>` block) gets this score by rule, without a coach call
    (parse_status `rule`, the rule named in the rationale); 0, as the rubric gives an empty solver.
    None: ask the coach about it like any other action."""
    schedule: list[CoachPhase] = Field(default_factory=list)
    """Phase-aware coaching: the template by iteration, e.g. `[{until: 5, template: mathchat-reliability},
    {template: mathchat}]` (iterations 0-4 with the first, then the second); empty: `template` throughout.
    The template in force is recorded on every score row and in the score manifest."""
    learn: CoachLearnConfig = Field(default_factory=CoachLearnConfig)
    """A coach that learns from the run (`CoachLearnConfig`); off by default. A learning section from the
    config file is reset when `coach.type` is not `local` (as `scoring` is)."""

    @field_validator("schedule")
    @classmethod
    def _phases_in_order(cls, schedule: list[CoachPhase]) -> list[CoachPhase]:
        ends = [phase.until for phase in schedule]
        if any(end is None for end in ends[:-1]):
            raise ValueError("only the last phase of coach.schedule may leave out `until`")
        bounded = [end for end in ends if end is not None]
        if bounded != sorted(set(bounded)):
            raise ValueError("the phases' `until` must increase: [{until: 5, ...}, {until: 10, ...}, {...}]")
        return schedule

    def for_iteration(self, iteration: int) -> CoachConfig:
        """This coach as it scores iteration `iteration`: the template its schedule gives it there."""
        for phase in self.schedule:
            if phase.until is None or iteration < phase.until:
                return self.model_copy(update={"template": phase.template})
        return self

    def templates(self) -> list[str]:
        """Every template this coach may use."""
        return list(dict.fromkeys([self.template, *(phase.template for phase in self.schedule)]))

    @field_validator("api_key_env")
    @classmethod
    def _names_a_variable(cls, name: str) -> str:
        if not (name.isidentifier() and name.isascii()):  # a pasted key would be stored with the run
            raise ValueError(
                "must be the name of an environment variable (e.g. OPENAI_API_KEY) that holds the key, "
                "not the key itself"
            )
        return name

    @field_validator("type")
    @classmethod
    def _registered(cls, coach_type: str) -> str:
        get_coach_spec(coach_type)  # an unknown name, or a plug-in that does not load, fails here in one line
        return coach_type

    @property
    def is_llm(self) -> bool:
        """An LLM coach (local, openai: `CoachSpec.is_llm`): asks `model`; empty actions get a rule score."""
        return get_coach_spec(self.type).is_llm

    @property
    def reads_template(self) -> bool:
        """The coach renders a prompt template (local, openai: `CoachSpec.reads_template`)."""
        return get_coach_spec(self.type).reads_template

    @property
    def calls_endpoint(self) -> bool:
        """The coach is behind an endpoint, to be reached before a run starts (openai: `base_url`)."""
        return get_coach_spec(self.type).calls_endpoint

    @property
    def runs_local_model(self) -> bool:
        """The coach is a model the run loads on its own `coach` worker (local: memory, preparation)."""
        return get_coach_spec(self.type).runs_local_model

    @model_validator(mode="before")
    @classmethod
    def _reset_settings_of_other_types(cls, data: Any, info: ValidationInfo) -> Any:
        """Drop the settings from the config file that this coach type cannot use (`TYPE_BOUND`): their
        defaults apply. A config built in code (no origins) and `--set` settings are left to be refused."""
        origins = origins_in(info.context)
        if origins is None or not isinstance(data, dict):
            return data
        coach_type = data.get("type", "local")
        return {
            name: value
            for name, value in data.items()
            if _written_with_set(origins, f"coach.{name}") or _usable_by(name, value, coach_type)
        }

    @model_validator(mode="after")
    def _check_backend(self, info: ValidationInfo) -> CoachConfig:
        origins = origins_in(info.context)
        if self.type == "openai" and not self.base_url:
            raise ValueError(
                f"coach.type=openai{_from(origins, 'coach.type')} needs coach.base_url, the endpoint: "
                f"{_fix(origins, 'coach.base_url', 'http://127.0.0.1:8000/v1', beside='coach.type')}"
            )
        if self.learn.reads_head and (self.type != "local" or self.scoring != "criteria"):
            key = "coach.learn.signal" if self.learn.enabled else "coach.learn.start"
            value, off = (self.learn.signal, "off") if self.learn.enabled else (self.learn.start, "null")
            raise ValueError(
                f"{key}={value}{_from(origins, key)} reads a local model's yes/no answers with a head: "
                f"it needs coach.type=local and coach.scoring=criteria (now {self.type} and "
                f"{self.scoring}); set them, or {_fix(origins, key, off)}"
            )
        for name in type(self).model_fields:
            value = getattr(self, name)
            if not _usable_by(name, value, self.type):
                types, why = TYPE_BOUND[(name, value)]
                key, default = f"coach.{name}", type(self).model_fields[name].default
                raise ValueError(
                    f"{key}={value}{_from(origins, key)} needs coach.type={' or '.join(types)} ({why}), but "
                    f"coach.type={self.type}{_from(origins, 'coach.type')}: use "
                    f"{_fix(origins, key, default)}, or {_fix(origins, 'coach.type', types[0])}"
                )
        return self


def _usable_by(name: str, value: Any, coach_type: Any) -> bool:
    """Whether a coach of `coach_type` can use `name: value` (`TYPE_BOUND`; a `learn` section: local only)."""
    if name == "learn":
        return coach_type == "local" or not isinstance(value, dict | CoachLearnConfig) or not _learns(value)
    bound = TYPE_BOUND.get((name, value)) if isinstance(value, str) else None
    return bound is None or coach_type in bound[0]


def _written_with_set(origins: Origins, key: str) -> bool:
    """`--set` wrote `key`, a section holding it, or a setting in it (`--set coach.learn.signal=pairs`)."""
    return origins.set_by_user(key) or any(written.startswith(f"{key}.") for written in origins.set_keys)


def _learns(value: dict | CoachLearnConfig) -> bool:
    """The section reads answers with a head: it learns one, or starts from one."""
    if isinstance(value, CoachLearnConfig):
        return value.reads_head
    return value.get("signal", "off") != "off" or value.get("start") is not None


def _from(origins: Origins | None, key: str) -> str:
    """` (from --set)` or ` (from FILE)`; empty for a config built in code."""
    return "" if origins is None else f" (from {origins.of(key)})"


def _fix(origins: Origins | None, key: str, value: Any, beside: str | None = None) -> str:
    return f"{key}={value}" if origins is None else origins.fix(key, value, beside)
