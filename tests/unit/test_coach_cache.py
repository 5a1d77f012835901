"""The coach's answer cache: content-addressed, in the run folder, consulted before any request."""

from __future__ import annotations

import asyncio

import pytest

from mappa.coach.cache import AnswerCache
from mappa.coach.local import LocalCoach
from mappa.coach.prompt import CoachRequest
from mappa.storage.store import ArtifactStore


def _requests(n: int, version: str = "v1") -> list[CoachRequest]:
    return [
        CoachRequest(
            action_id=f"t/{i}",
            trajectory_id="t",
            agent="solver",
            messages=[{"role": "user", "content": f"judge action {i}"}],
            used_ground_truth=False,
            template_version=version,
        )
        for i in range(n)
    ]


class CountingChat:
    """A scripted coach model: answers `PROCESS_SCORE: i` for action i, or garbage when told to."""

    def __init__(self, garbage_for: set[int] = frozenset()) -> None:
        self.chats: list[list[dict]] = []
        self.garbage_for = garbage_for

    async def __call__(self, chats: list[list[dict]]) -> list[str]:
        self.chats.extend(chats)
        answers = []
        for chat in chats:
            i = int(chat[0]["content"].rsplit(" ", 1)[1])
            reask = len(chat) > 1
            answers.append("no idea" if i in self.garbage_for and not reask else f"ok\nPROCESS_SCORE: {i}")
        return answers


def _coach(chat: CountingChat, cache: AnswerCache) -> LocalCoach:
    coach = LocalCoach(chat, "coach-model")
    coach.cache = cache
    return coach


@pytest.fixture
def cache(tmp_path) -> AnswerCache:
    return AnswerCache(ArtifactStore(str(tmp_path)), "run", "coach-model", {"temperature": 0.0})


def test_second_scoring_reads_every_answer_from_the_cache(cache):
    first_chat, second_chat = CountingChat(garbage_for={2}), CountingChat(garbage_for={2})
    first = asyncio.run(_coach(first_chat, cache).score(_requests(4)))
    assert len(first_chat.chats) == 5  # four asks and one re-ask
    again = asyncio.run(_coach(second_chat, cache).score(_requests(4)))
    assert second_chat.chats == []
    assert [s.score for s in again] == [s.score for s in first] == [0, 1, 2, 3]
    assert [s.parse_status for s in again] == ["ok", "ok", "retried", "ok"]
    assert cache.stats() == {"hits": 5, "new_answers": 5}


def test_only_missing_answers_are_asked(cache):
    asyncio.run(_coach(CountingChat(), cache).score(_requests(2)))
    chat = CountingChat()
    asyncio.run(_coach(chat, cache).score(_requests(5)))
    assert [c[0]["content"] for c in chat.chats] == ["judge action 2", "judge action 3", "judge action 4"]


def test_key_covers_model_settings_template_and_chat(tmp_path):
    store = ArtifactStore(str(tmp_path))
    chat = [{"role": "user", "content": "x"}]
    base = AnswerCache(store, "run", "m", {"temperature": 0.0})
    keys = {
        base.key("v1", chat),
        base.key("v2", chat),
        base.key("v1", [{"role": "user", "content": "y"}]),
        AnswerCache(store, "run", "other-model", {"temperature": 0.0}).key("v1", chat),
        AnswerCache(store, "run", "m", {"temperature": 0.7}).key("v1", chat),
    }
    assert len(keys) == 5
    base.put("v1", chat, "PROCESS_SCORE: 4")
    assert AnswerCache(store, "run", "m", {"temperature": 0.0}).get("v1", chat) == "PROCESS_SCORE: 4"
    assert AnswerCache(store, "other-run", "m", {"temperature": 0.0}).get("v1", chat) is None
