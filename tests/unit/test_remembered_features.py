"""The coach-update stage asks the coach model for each chat's features once: the blame pass and the
pairs read the same replayed actions (`mappa.stages.coach_update.remembered`)."""

import asyncio

from mappa.stages.coach_update import remembered


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_each_chat_is_computed_once_and_groups_keep_their_order():
    sent = []

    async def features(groups):
        sent.append(groups)
        return [[[float(len(c[0]["content"])), float(k)] for c in group] for k, group in enumerate(groups)]

    once = remembered(features)
    first = asyncio.run(once([[chat("a"), chat("bb")], [chat("ccc")]]))
    assert first == [[[1.0, 0.0], [2.0, 0.0]], [[3.0, 1.0]]]
    # a group seen whole is not sent again; a group with one new chat is sent whole (the worker batches it)
    second = asyncio.run(once([[chat("ccc")], [chat("bb"), chat("dddd")], [chat("a"), chat("bb")]]))
    assert sent[1] == [[chat("bb"), chat("dddd")]]
    assert second == [[[3.0, 1.0]], [[2.0, 0.0], [4.0, 0.0]], [[1.0, 0.0], [2.0, 0.0]]]
    asyncio.run(once([[chat("dddd")]]))
    assert len(sent) == 2
