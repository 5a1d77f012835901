"""The learning coach's scoring: the criteria coach with its yes/no readout replaced by a head that learns.

`LearnedCriteriaCoach` asks the same questions as `CriteriaCoach` (`mappa.coach.criteria`: the template's
questions for the seat, `(no)` marks, questions without a value answered No by rule) but reads each
answer as the head's P(Yes) on the model's features (`mappa.coach.head.AnswerHead`). With the head at its
start (the model's own Yes/No readout, `HFEngine.answer_direction`) its scores are the criteria coach's;
the `coach-update` stage (`mappa.stages.coach_update`) moves it. Its `model_name` carries the head's
version (`qwen2.5-coder-0.5b:criteria+head@3f2a...`), so every score row says which head gave it.

Not covered: learning the questions themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mappa.coach.criteria import CriteriaCoach, question_chat, wants_no
from mappa.coach.evidence import split_tag
from mappa.coach.head import AnswerHead
from mappa.coach.prompt import CoachRequest, PromptTemplate

# groups of chats (one action's questions each) -> [group][chat] the features its answer is read from
FeaturesFn = Callable[[list[list[list[dict[str, str]]]]], Awaitable[list[list[list[float]]]]]


class LearnedCriteriaCoach(CriteriaCoach):
    """Scores each action with the mean of its questions' credit, P(Yes) read by `head`."""

    def __init__(
        self, features_fn: FeaturesFn, model_name: str, template: PromptTemplate, head: AnswerHead
    ) -> None:
        super().__init__(logprob_fn=None, model_name=model_name, template=template)
        self.model_name = f"{model_name}:criteria+head@{head.version}"
        self.head = head
        self._features_fn = features_fn

    async def _yes_probabilities(self, groups: list[list[list[dict[str, str]]]]) -> list[list[float]]:
        features = await self._features_fn(groups)
        return [[self.head.p_yes(h) for h in group] for group in features]

    async def question_features(
        self, requests: list[CoachRequest]
    ) -> list[tuple[list[str], list[list[float]]]]:
        """Per request, the questions the model is asked about its action and each one's features (what
        the `coach-update` stage pairs)."""
        asked = [self.asked(r) for r in requests]
        groups = [[question_chat(r, q) for q in qs] for r, qs in zip(requests, asked) if qs]
        rows = iter(await self._features_fn(groups) if groups else [])
        return [(qs, next(rows) if qs else []) for qs in asked]


def is_no_question(question: str) -> bool:
    """Whether a criteria question's good answer is No (`(no)` after its evidence tag)."""
    return wants_no(split_tag(question)[1])[0]
