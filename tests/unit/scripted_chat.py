"""A scripted chat function for env tests (the tests are about the env, not a model): it answers each chat
with the next scripted reply and records what it saw."""

from __future__ import annotations

from mappa.inference.engine import Generation


def scripted(replies: list[str], seen: list[list[dict]]):
    """A chat function answering with the next scripted reply for each chat, recording the chats in `seen`."""
    queue = list(replies)

    async def chat(chats, params):
        seen.extend(chats)
        out = []
        for chat_ in chats:
            text = queue.pop(0)
            tokens = tuple(range(1, len(text.split()) + 2))
            generation = Generation(text, (1,), tokens, (-0.1,) * len(tokens), "stop")
            out.append((f"PROMPT:{chat_[-1]['content']}", generation, 0.0))
        return out

    return chat
