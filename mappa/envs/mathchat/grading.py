"""Final-answer extraction and grading for MathChat episodes.

`extract_boxed` pulls the content of the last `\\boxed{...}` (or `\\fbox{...}`) out of a model's text;
`grade_answer` decides whether a predicted answer equals the gold one, using `math_verify` (symbolic and
numeric equality: `\\frac{1}{2}` == `0.5`, `1,000` == `1000`) with a normalised string comparison as the
fallback. `grade_answer` never raises and is safe to call from worker threads and asyncio tasks.

Thread safety: math-verify bounds its work with `signal.alarm`, which only works in the main thread. Off
the main thread this module turns those timeouts off and instead refuses to hand sympy expressions that
could take unbounded time (huge powers such as `10^{10^{10}}`, big factorials, very long answers); those
are graded by string comparison only.

`extract_flexible` is the lenient reading (the last number when nothing is boxed), reported beside the strict
one. What this module does not do: decide which agent's message holds the final answer, score partial credit,
or judge the reasoning; that belongs to the flows and the coach.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from math_verify import parse, verify
from sympy import Basic, Pow, factorial

logger = logging.getLogger(__name__)

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*(\{)?")
_MAIN_THREAD_TIMEOUT_S = 5
_MAX_ANSWER_CHARS = 400  # longer "answers" are compared as strings only
_MAX_EXPONENT = 1000  # a power with a bigger numeric exponent is not handed to sympy
_MAX_FACTORIAL = 1000
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


class _DropTimeoutDisabledWarning(logging.Filter):
    """math-verify warns once that its timeout is off; we bound the work ourselves (see module doc)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropTimeoutDisabledWarning())


def _closing_brace(text: str, open_index: int) -> int | None:
    """Index of the brace closing the one at `open_index`, skipping backslash escapes; None if unclosed."""
    depth = 0
    i = open_index
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def extract_boxed(text: str | None) -> str | None:
    """Content of the last `\\boxed{...}` / `\\fbox{...}` in `text` (nested braces allowed), stripped.

    Also reads the brace-less form `\\boxed 42` (up to the next space or `$`). Returns None when there is
    no box, or when the last one is never closed (a truncated generation).
    """
    if not text:
        return None
    matches = list(_BOX_RE.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    if last.group(1) is None:
        token = re.match(r"\s*([^\s$]+)", text[last.end() :])
        return token.group(1) if token else None
    close = _closing_brace(text, last.start(1))
    if close is None:
        return None
    return text[last.end() : close].strip()


_LAST_NUMBER_RE = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")  # a comma only between digit groups


def extract_flexible(text: str | None) -> str | None:
    """The flexible reading of a final answer (as lm-eval reports GSM8K's "flexible-extract"): the boxed
    answer if there is one, else the last number in the text (`1,000` -> `1000`; the sentence's comma or
    `.` after it dropped: "is 40, which" reads 40)."""
    boxed = extract_boxed(text)
    if boxed is not None or not text:
        return boxed
    numbers = _LAST_NUMBER_RE.findall(text)
    return _THOUSANDS_RE.sub("", numbers[-1]).rstrip(".") if numbers else None


def normalize_answer(answer: str) -> str:
    """Plain-text form used for the string comparison: no spaces, `$`, thousands commas or trailing `.0`."""
    text = answer.strip()
    boxed = extract_boxed(text)
    if boxed is not None:
        text = boxed
    text = re.sub(r"\\[,;:! ]", "", text)  # LaTeX spacing commands
    text = text.replace("\\$", "").replace("$", "").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = re.sub(r"\s+", "", text)
    text = _THOUSANDS_RE.sub("", text)
    text = re.sub(r"(?<=\d)\.0+$", "", text)
    return text.rstrip(".").lower()


def _too_costly(value: Any) -> bool:
    """Whether sympy could spend unbounded time on `value` (a parsed answer); strings are harmless."""
    if not isinstance(value, Basic):
        return False
    for power in sorted(value.atoms(Pow), key=lambda p: p.count_ops()):  # inner powers first
        exponent = power.exp
        if not exponent.is_number:
            continue
        try:
            size = abs(complex(exponent.evalf(15)))
        except (OverflowError, TypeError, ValueError):
            return True
        if size > _MAX_EXPONENT:
            return True
    for fact in value.atoms(factorial):
        arg = fact.args[0]
        if not arg.is_Number or abs(arg) > _MAX_FACTORIAL:
            return True
    return False


def _math_verify_equal(predicted: str, gold: str) -> bool:
    """math-verify's verdict; timeouts only in the main thread (signal.alarm), sympy guarded elsewhere."""
    in_main = threading.current_thread() is threading.main_thread()
    limit = _MAIN_THREAD_TIMEOUT_S if in_main else None
    gold_parsed = parse(f"\\boxed{{{gold}}}", parsing_timeout=limit)
    pred_parsed = parse(f"\\boxed{{{predicted}}}", parsing_timeout=limit)
    if not gold_parsed or not pred_parsed:
        return False
    if any(_too_costly(v) for v in (*gold_parsed, *pred_parsed)):
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=limit))


def grade_answer(predicted: str | None, gold: str) -> bool:
    """True when `predicted` (an answer, or text holding a `\\boxed{}`) equals `gold`; never raises.

    Equal normalised strings count as correct outright; otherwise math-verify decides. If math-verify
    fails in any way the normalised string comparison stands.
    """
    try:
        if predicted is None or gold is None:
            return False
        text = str(predicted)
        if "\\boxed" in text or "\\fbox" in text:
            boxed = extract_boxed(text)
            if boxed is None:
                return False
            text = boxed
        text, gold_text = text.strip(), str(gold).strip()
        if not text or not gold_text:
            return False
        if normalize_answer(text) == normalize_answer(gold_text):
            return True
        if len(text) > _MAX_ANSWER_CHARS or len(gold_text) > _MAX_ANSWER_CHARS:
            return False
        return _math_verify_equal(text, gold_text)
    except Exception:  # noqa: BLE001 - grading must never take a worker down; a failure grades as wrong
        logger.debug("grading %r against %r failed; graded as wrong", predicted, gold, exc_info=True)
        return False
