"""The local coach (`coach.type: local`): an engine of this project (usually behind a Ray actor) answers,
through a batch chat function.

`chat_fn(chats) -> answers` takes a list of chats (each a list of {"role", "content"} messages) and returns
one answer text per chat. The caller binds the sampling settings (coach.temperature, coach.max_new_tokens)
into `chat_fn`; this class only passes chats through and applies the shared parse / re-ask / fallback logic.

`COACH` declares the type: an LLM coach on a model of the run's own `coach` worker, reading a template.
Its `coach.scoring` picks the class: `generate` this one, `expected` the score-token probabilities
(`mappa.coach.expected`), `criteria` the yes/no questions (`mappa.coach.criteria`).

Not covered here: loading the coach model or batching inside the engine (the engine does that).
"""

from __future__ import annotations

from mappa.coach.base import ChatFn, Coach, LLMCoach, OnAnswer
from mappa.coach.build import check_coach_template
from mappa.coach.criteria import CriteriaCoach
from mappa.coach.expected import ExpectedScoreCoach
from mappa.coach.learned import LearnedCriteriaCoach
from mappa.coach.prompt import load_template
from mappa.config import CoachConfig
from mappa.config.coach_registry import CoachInputs, CoachSpec


class LocalCoach(LLMCoach):
    """Scores actions with `chat_fn`, one chat per action and one batch per round (first ask, re-ask)."""

    def __init__(
        self, chat_fn: ChatFn, model_name: str, fallback_score: float = 5.0, max_rationale_chars: int = 600
    ) -> None:
        super().__init__(model_name, fallback_score, max_rationale_chars)
        self._chat_fn = chat_fn

    async def _chat_batch(
        self, chats: list[list[dict[str, str]]], on_answer: OnAnswer | None = None
    ) -> list[str]:
        return list(await self._chat_fn(chats))  # one engine call: the caller stores the batch


def build(config: CoachConfig, inputs: CoachInputs) -> Coach:
    """The local coach of `config.scoring`, on the engine functions the caller passes."""
    if config.scoring == "criteria" and config.learn.reads_head:
        if inputs.features_fn is None or inputs.head is None:
            raise ValueError(
                "coach.learn needs a features_fn (the coach model's features) and the head to read"
            )
        check_coach_template(config)
        return LearnedCriteriaCoach(
            inputs.features_fn, config.model, load_template(config.template), inputs.head
        )
    if config.scoring == "criteria":
        if inputs.grouped_logprob_fn is None:
            raise ValueError(
                "coach.scoring=criteria needs a grouped_logprob_fn (an engine's next-token logprobs)"
            )
        check_coach_template(config)
        return CriteriaCoach(inputs.grouped_logprob_fn, config.model, load_template(config.template))
    if config.scoring == "expected":
        if inputs.logprob_fn is None:
            raise ValueError("coach.scoring=expected needs a logprob_fn (an engine's next-token logprobs)")
        return ExpectedScoreCoach(inputs.logprob_fn, config.model)
    if inputs.chat_fn is None:
        raise ValueError(
            "coach.type=local needs a chat_fn (an engine's batch chat function) from the caller; "
            "or set coach.type=openai (with coach.base_url) or coach.type=rubric"
        )
    return LocalCoach(inputs.chat_fn, config.model, config.fallback_score)


COACH = CoachSpec(
    name="local",
    build=build,
    is_llm=True,
    reads_template=True,
    runs_local_model=True,
    summary="a model of the run's own `coach` worker (`coach.model`), asked through `coach.template`",
)
