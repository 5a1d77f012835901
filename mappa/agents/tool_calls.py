"""Parsing tool calls out of agent text: fenced Python code blocks.

Accepts ```python / ```py / bare ``` fences; a block the model did not close (generation hit its token
limit) is taken up to the end of the text. Returns None when the text holds no code.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def extract_python_block(text: str) -> str | None:
    """The first fenced code block's content, stripped; None if there is none or it is empty."""
    match = _FENCE.search(text)
    if match is None:
        return None
    code = match.group(1).strip("\n")
    return code if code.strip() else None
