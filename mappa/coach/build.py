"""Choosing a coach from the config: `build_coach(config)` with registry keys equal to `coach.type`.

The openai backend reads its API key from the environment variable named by `coach.api_key_env`, once,
here. A missing key is allowed only for loopback endpoints (a local vLLM server needs none); otherwise the
error names the variable to set. The local backend needs the caller's `chat_fn` (an engine's batch chat).

Not covered here: starting the coach's engine or server.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlparse

from mappa.coach.base import Coach, LLMCoach
from mappa.coach.cache import AnswerCache
from mappa.coach.criteria import CriteriaCoach, GroupedLogprobFn
from mappa.coach.expected import ExpectedScoreCoach, LogprobFn
from mappa.coach.local import ChatFn, LocalCoach
from mappa.coach.openai import OpenAICoach, check_endpoint
from mappa.coach.outcome import OutcomeCoach
from mappa.coach.prompt import load_template
from mappa.coach.rubric import RubricCoach
from mappa.config import CoachConfig


def build_coach(
    config: CoachConfig,
    chat_fn: ChatFn | None = None,
    env_type: str | None = None,
    logprob_fn: LogprobFn | None = None,
    cache: AnswerCache | None = None,
    grouped_logprob_fn: GroupedLogprobFn | None = None,
) -> Coach:
    """The coach `config.type` names; `env_type` (the run's `env.type`) gives the rubric its rules; LLM
    coaches answer from `cache` first and store their new answers in it."""
    coach = _build(config, chat_fn, env_type, logprob_fn, grouped_logprob_fn)
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


def _build(
    config: CoachConfig,
    chat_fn: ChatFn | None,
    env_type: str | None,
    logprob_fn: LogprobFn | None,
    grouped_logprob_fn: GroupedLogprobFn | None,
) -> Coach:
    if config.type == "rubric":
        if env_type is None:
            raise ValueError("the rubric coach's rules are its env's: pass build_coach the run's env.type")
        return RubricCoach(config.use_ground_truth, env_type)
    if config.type == "outcome":
        return OutcomeCoach()
    if config.type == "local" and config.scoring == "criteria":
        if grouped_logprob_fn is None:
            raise ValueError(
                "coach.scoring=criteria needs a grouped_logprob_fn (an engine's next-token logprobs)"
            )
        check_coach_template(config)
        return CriteriaCoach(grouped_logprob_fn, config.model, load_template(config.template))
    if config.type == "local" and config.scoring == "expected":
        if logprob_fn is None:
            raise ValueError("coach.scoring=expected needs a logprob_fn (an engine's next-token logprobs)")
        return ExpectedScoreCoach(logprob_fn, config.model)
    if config.type == "local":
        if chat_fn is None:
            raise ValueError(
                "coach.type=local needs a chat_fn (an engine's batch chat function) from the caller; "
                "or set coach.type=openai (with coach.base_url) or coach.type=rubric"
            )
        return LocalCoach(chat_fn, config.model, config.fallback_score)
    if config.type == "openai":
        return OpenAICoach(config, _api_key(config))
    raise ValueError(f"unknown coach.type {config.type!r}; choose local, openai, rubric or outcome")


def check_coach_ready(config: CoachConfig) -> None:
    """Before a run or a re-scoring starts: the template of a coach that reads one, the endpoint of a coach
    that calls one; a ValueError names what is wrong and the fix."""
    if config.reads_template:
        check_coach_template(config)
    if config.calls_endpoint:
        check_coach_endpoint(config)


def check_coach_endpoint(config: CoachConfig) -> None:
    """For `coach.type: openai`: the key is there and the endpoint answers, takes it and serves the model
    (one GET, seconds), so a run does not roll out for minutes and then fail at the score stage."""
    check_endpoint(config, _api_key(config))


def _api_key(config: CoachConfig) -> str | None:
    key = os.environ.get(config.api_key_env) or None
    if key is None and not is_loopback(config.base_url or ""):
        raise ValueError(
            f"coach.type=openai at {config.base_url} needs an API key in the environment variable "
            f"${config.api_key_env} (set it, or point coach.api_key_env at the variable that holds it); "
            f"only loopback endpoints (127.0.0.1, localhost) may go without a key"
        )
    return key


def is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
