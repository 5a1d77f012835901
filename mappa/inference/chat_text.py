"""A chat as the prompt text a model continues: the tokenizer's chat template, with the assistant's turn open.

A chat whose last message is the assistant's is a reply already begun (a response prefix, e.g. MathChat's
`env.answer_prefix`): the template renders it without closing that turn, so the model continues it.
Otherwise the template adds the assistant's header (`add_generation_prompt`).
"""

from __future__ import annotations

from typing import Any


def render_chat(tokenizer: Any, chat: list[dict[str, str]]) -> str:
    if chat and chat[-1]["role"] == "assistant":
        return tokenizer.apply_chat_template(chat, tokenize=False, continue_final_message=True)
    return tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
