"""Parsing tool calls out of agent text: fenced Python code blocks.

Accepts ```python / ```py / bare ``` fences; a block the model did not close (generation hit its token
limit) is taken up to the end of the text. Returns None when the text holds no code.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def replace_python_block(text: str, rewrite: Callable[[str], str | None]) -> str | None:
    """`text` with its first fenced code block's content (as written, unstripped) replaced by
    `rewrite(content)`; None where there is no block or `rewrite` gives None. The block is found as
    `extract_python_block` finds it, so an edit lands in the code the env will run (the blame check's
    corruptions)."""
    match = _FENCE.search(text)
    if match is None:
        return None
    code = rewrite(match.group(1))
    return None if code is None else text[: match.start(1)] + code + text[match.end(1) :]


def extract_python_block(text: str) -> str | None:
    """The first fenced code block's content, stripped; None if there is none or it is empty."""
    match = _FENCE.search(text)
    if match is None:
        return None
    code = match.group(1).strip("\n")
    return code if code.strip() else None
