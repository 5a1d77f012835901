"""Building the coach the config names: `build_coach(config)` looks `coach.type` up in the registry
(`mappa.config.coach_registry`) and calls its `CoachSpec.build`; `check_coach_ready` runs the checks the spec
declares (its template, its endpoint) before any work starts.

Not covered here: starting the coach's engine or server, or what each coach needs to be built (its module:
`mappa.coach.local`, `openai`, `rubric`, `outcome`).
"""

from __future__ import annotations

from mappa.coach.base import ChatFn, Coach, LLMCoach
from mappa.coach.cache import AnswerCache
from mappa.coach.criteria import GroupedLogprobFn
from mappa.coach.expected import LogprobFn
from mappa.coach.head import AnswerHead
from mappa.coach.learned import FeaturesFn
from mappa.coach.prompt import load_template
from mappa.config import CoachConfig
from mappa.config.coach_registry import CoachInputs, get_coach_spec
from mappa.envs.spec import EnvSpec


def build_coach(
    config: CoachConfig,
    chat_fn: ChatFn | None = None,
    env: EnvSpec | None = None,
    logprob_fn: LogprobFn | None = None,
    cache: AnswerCache | None = None,
    grouped_logprob_fn: GroupedLogprobFn | None = None,
    features_fn: FeaturesFn | None = None,
    head: AnswerHead | None = None,
) -> Coach:
    """The coach `config.type` names; `env` (the run's `RunConfig.env_spec`) gives the rubric its rules; LLM
    coaches answer from `cache` first and store their new answers in it; a coach that learns
    (`coach.learn`) reads its answers with `head` from `features_fn`."""
    inputs = CoachInputs(env, chat_fn, logprob_fn, grouped_logprob_fn, features_fn, head)
    coach = get_coach_spec(config.type).build(config, inputs)
    if isinstance(coach, LLMCoach):
        coach.cache = cache
    return coach


def check_coach_template(config: CoachConfig) -> None:
    """Raise a ValueError naming the fix, before any work starts, when a template of the coach (its
    schedule's too) is missing or lacks what `coach.scoring` needs (criteria questions for `criteria`)."""
    for name in config.templates()[1:]:
        check_coach_template(config.model_copy(update={"template": name, "schedule": []}))
    template = load_template(config.template)
    if config.runs_local_model and config.scoring == "criteria" and not template.criteria:
        raise ValueError(
            f"coach.scoring=criteria asks the template's yes/no questions, but template `{config.template}` "
            f"has no <<criteria>> section: add `seat: question` lines (as the templates in "
            f"mappa/coach/templates/ do) or set coach.scoring=expected"
        )


def cache_settings(config: CoachConfig) -> dict[str, object]:
    """What besides the chat shapes a coach's answer: part of every cache key."""
    return {
        "type": config.type,
        "scoring": config.scoring,
        "temperature": config.temperature,
        "max_new_tokens": config.max_new_tokens,
    }


def check_coach_ready(config: CoachConfig) -> None:
    """Before a run or a re-scoring starts: the template of a coach that reads one, the endpoint of a coach
    that calls one (as its `CoachSpec` declares); a ValueError names what is wrong and the fix."""
    spec = get_coach_spec(config.type)
    if spec.reads_template:
        check_coach_template(config)
    if spec.check_endpoint is not None:
        spec.check_endpoint(config)
