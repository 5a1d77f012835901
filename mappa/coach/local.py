"""A coach answered by an engine of this project (usually behind a Ray actor), through a batch chat function.

`chat_fn(chats) -> answers` takes a list of chats (each a list of {"role", "content"} messages) and returns
one answer text per chat. The caller binds the sampling settings (coach.temperature, coach.max_new_tokens)
into `chat_fn`; this class only passes chats through and applies the shared parse / re-ask / fallback logic.

Not covered here: loading the coach model or batching inside the engine (the engine does that).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mappa.coach.base import LLMCoach, OnAnswer

ChatFn = Callable[[list[list[dict[str, str]]]], Awaitable[list[str]]]


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
