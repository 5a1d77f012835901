"""What every coach is, and the ask / re-ask / fallback logic shared by the LLM backends.

A coach turns `CoachRequest`s into `ActionScore`s, one per request and in the same order (`Coach.score`).
An LLM coach (`LLMCoach`) makes one call per action; if the answer has no parsable
`PROCESS_SCORE:` line it asks once more, appending its answer and a short correction; if that fails too it
records `fallback_score` with parse_status `fallback` (`retried` when the second answer parsed). Backends only
implement `_chat_batch`: answer a list of chats.

With an `AnswerCache` (`mappa.coach.cache`), every chat is looked up first and only the missing ones are
sent; each new answer is stored as soon as the backend has it (`on_answer`), so an interrupted stage
loses no paid answer. A fallback is never a final answer: an action whose answers, read back from the
cache, end in a fallback again is asked again from the start, without the cache (its new answers replace
the old ones), so a re-run of the score stage asks the coach about exactly those actions (NeMo Gym
likewise re-judges failed judge calls on resume); `asked_again` counts them. An action asked in this call
that falls back stays a fallback until the next call.

Not covered here: transport (HTTP retries live in `mappa.coach.openai`), prompt rendering.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Protocol

from mappa.coach.cache import AnswerCache
from mappa.coach.parse import parse_score
from mappa.coach.prompt import CoachRequest
from mappa.core.types import ActionScore

REASK_MESSAGE = (
    "Your answer did not end with the required score line. Reply with only this line, nothing else:\n"
    "PROCESS_SCORE: <integer 0-10>"
)


class CoachError(RuntimeError):
    """A coach backend failed in a way a retry will not fix; the message says what to change."""


class CoachUnavailableError(CoachError):
    """The coach endpoint could not be reached (or did not answer) after all retries."""


class CoachOutageError(CoachUnavailableError):
    """The coach endpoint stayed unreachable for longer than `coach.outage_budget_s`. The wait is spent:
    the score stage is not retried by Prefect (`waited_out`, `mappa.core.errors.worth_retrying`), which
    would only wait that long again; the run stops and `mappa resume` continues it."""

    waited_out = True


class Coach(Protocol):
    """Anything that scores actions: `score` returns one `ActionScore` per request, in order."""

    model_name: str

    async def score(self, requests: list[CoachRequest]) -> list[ActionScore]: ...


def trim_rationale(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def reask_messages(messages: list[dict[str, str]], bad_answer: str) -> list[dict[str, str]]:
    """The original chat, the unparsable answer, and a correction asking only for the score line."""
    correction = [{"role": "assistant", "content": bad_answer}, {"role": "user", "content": REASK_MESSAGE}]
    return [*messages, *correction]


OnAnswer = Callable[[int, str], None]
ChatFn = Callable[[list[list[dict[str, str]]]], Awaitable[list[str]]]
"""An engine's batch chat: one answer text per chat (the local coach's; `mappa.coach.local`)."""


class LLMCoach(ABC):
    """An LLM-backed coach: subclasses answer a batch of chats; parsing, re-ask and fallback live here."""

    model_name: str

    def __init__(self, model_name: str, fallback_score: float = 5.0, max_rationale_chars: int = 600) -> None:
        if not 0.0 <= fallback_score <= 10.0:
            raise ValueError(f"fallback_score must be in [0, 10], got {fallback_score}")
        self.model_name = model_name
        self.fallback_score = fallback_score
        self.max_rationale_chars = max_rationale_chars
        self.cache: AnswerCache | None = None
        self.asked_again = 0

    @abstractmethod
    async def _chat_batch(
        self, chats: list[list[dict[str, str]]], on_answer: OnAnswer | None = None
    ) -> list[str]:
        """One answer text per chat, in order; may call `on_answer(index, text)` as each answer arrives."""

    async def _answers(
        self, chats: list[list[dict[str, str]]], versions: list[str], read_cache: bool = True
    ) -> tuple[list[str], list[bool]]:
        """Answers for `chats` (rendered with template `versions`), and whether each was read back from
        the cache (`read_cache`) rather than asked; every answer asked is stored as it arrives."""
        cache = self.cache
        answers = [cache.get(v, c) if cache and read_cache else None for c, v in zip(chats, versions)]
        cached = [answer is not None for answer in answers]
        missing = [i for i, answer in enumerate(answers) if answer is None]
        if not missing:
            return [a or "" for a in answers], cached
        stored: set[int] = set()

        def on_answer(index: int, text: str) -> None:
            if cache is not None and index not in stored:
                cache.put(versions[missing[index]], chats[missing[index]], text or "")
                stored.add(index)

        fresh = await self._chat_batch([chats[i] for i in missing], on_answer)
        if len(fresh) != len(missing):
            raise CoachError(f"coach {self.model_name} gave {len(fresh)} answers for {len(missing)} chats")
        for index, (i, text) in enumerate(zip(missing, fresh)):
            on_answer(index, text)  # backends that answer a whole batch at once are stored here
            answers[i] = text
        return [a or "" for a in answers], cached

    async def score(self, requests: list[CoachRequest]) -> list[ActionScore]:
        if not requests:
            return []
        scores, stale = await self._ask(requests, read_cache=True)
        if stale:  # fallbacks read back from the cache are not final: ask about those actions again
            again, _ = await self._ask([requests[i] for i in stale], read_cache=False)
            for i, score in zip(stale, again, strict=True):
                scores[i] = score
            self.asked_again += len(stale)
        return scores

    async def _ask(
        self, requests: list[CoachRequest], read_cache: bool
    ) -> tuple[list[ActionScore], list[int]]:
        """Ask, re-ask once where the answer did not parse, else fall back; also the positions of the
        fallbacks whose two answers were both read back from the cache."""
        versions = [r.template_version for r in requests]
        first, first_cached = await self._answers([r.messages for r in requests], versions, read_cache)
        scores: list[ActionScore | None] = [None] * len(requests)
        bad: list[int] = []
        for i, (request, answer) in enumerate(zip(requests, first, strict=True)):
            value = parse_score(answer)
            if value is None:
                bad.append(i)
            else:
                scores[i] = self._make(request, value, answer, "ok")
        stale: list[int] = []
        if bad:
            reasks = [reask_messages(requests[i].messages, first[i]) for i in bad]
            second, second_cached = await self._answers(reasks, [versions[i] for i in bad], read_cache)
            for i, answer, cached in zip(bad, second, second_cached, strict=True):
                value = parse_score(answer)
                if value is None:
                    note = f"unparsable coach answer, fallback score: {first[i]} || {answer}"
                    scores[i] = self._make(requests[i], self.fallback_score, note, "fallback")
                    if cached and first_cached[i]:
                        stale.append(i)
                else:
                    scores[i] = self._make(requests[i], value, f"{first[i]}\n{answer}", "retried")
        return [s for s in scores if s is not None], stale

    def _make(self, request: CoachRequest, value: float, rationale: str, status: str) -> ActionScore:
        return request.verdict(
            self.model_name, value, trim_rationale(rationale, self.max_rationale_chars), status
        )
