"""The kind of a math problem, `operation/form` (e.g. `multiply/word`), so results can be split by it.

An average over a held-out set hides kinds: a team can gain on additions and lose on multiplications
(measured: a trained team printed one of the operands for "What is 5 times 4?"), and a held-out split that
shares the training mix of kinds shows a lift where a balanced set shows a loss. Evaluations record each
problem's kind and the learning benchmark reports the change per kind.

    operation   add | subtract | multiply | divide | two-step (two or more operations) | other
    form        expression (symbols: "What is 7 + 5?") | phrased (arithmetic in words, no story:
                "Add 7 and 5.") | word (a story with people or things)

Where a problem's `meta` says it (`operation`, `form`; or `kind` naming an operation, or `arithmetic` /
`word` as the generators write), that wins. Otherwise the operation is read from the numbers: the one
operation that turns two of the question's numbers (or `meta.numbers`) into the answer, ties broken by the
wording ("times", "left", ...); and the form from the text (an operator between two numbers, else a story
when the question is long or tells of someone). Not covered: fractions and decimals (`other`), numbers
written as words ("a dozen").
"""

from __future__ import annotations

import re
from fractions import Fraction

from mappa.envs.api import Problem

OPERATIONS = ("add", "subtract", "multiply", "divide", "two-step", "other")
FORMS = ("expression", "phrased", "word")
_OPERATION_ALIASES = {
    "addition": "add",
    "sum": "add",
    "subtraction": "subtract",
    "sub": "subtract",
    "multiplication": "multiply",
    "product": "multiply",
    "division": "divide",
    "multi-step": "two-step",
    "two_step": "two-step",
}
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_OPERATOR_BETWEEN_NUMBERS = re.compile(r"\d\s*[-+*/×÷x]\s*\(?\d")
_CUES = {  # words that say which operation a problem means, for numbers that fit two (2 + 2 = 2 * 2)
    "add": ("add", "plus", "sum", "more", "total", "together", "altogether", "in all", "and then"),
    "subtract": ("minus", "less", "left", "take away", "subtract", "difference", "fewer", "remain"),
    "multiply": ("times", "product", "each", "every", "multipl", "per", "double", "groups of", "rows of"),
    "divide": ("divide", "share", "split", "equally", "half", "quotient"),
}
_STORY_WORDS = 12  # a question this long (in words) without symbols is a story, not phrased arithmetic


def problem_kind(problem: Problem) -> str:
    """`operation/form` of a math problem (module docstring)."""
    return f"{problem_operation(problem)}/{problem_form(problem)}"


def problem_operation(problem: Problem) -> str:
    meta = problem.meta or {}
    for key in ("operation", "kind"):
        named = _operation_name(meta.get(key))
        if named:
            return named
    if int(meta.get("difficulty") or meta.get("steps") or 1) > 1:
        return "two-step"
    numbers = [Fraction(str(n)) for n in meta.get("numbers") or []] or _numbers(problem.question)
    try:
        answer = Fraction(problem.answer.strip().replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return "other"
    fitting = _fitting_operations(numbers, answer)
    if len(fitting) == 1:
        return fitting[0]
    if len(fitting) > 1:
        cued = [op for op in fitting if any(cue in problem.question.lower() for cue in _CUES[op])]
        return cued[0] if cued else fitting[0]
    return "two-step" if len(numbers) >= 3 else "other"


def problem_form(problem: Problem) -> str:
    meta = problem.meta or {}
    if meta.get("form") in FORMS:
        return meta["form"]
    question = problem.question
    if _OPERATOR_BETWEEN_NUMBERS.search(question.replace(",", "")):
        return "expression"
    if meta.get("kind") == "word" or len(question.split()) >= _STORY_WORDS:
        return "word"
    if meta.get("kind") == "arithmetic":
        return "phrased"
    return "word" if any(word[:1].isupper() for word in question.split()[1:]) else "phrased"


def _operation_name(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    name = _OPERATION_ALIASES.get(value.strip().lower(), value.strip().lower())
    return name if name in OPERATIONS else None


def _numbers(text: str) -> list[Fraction]:
    return [Fraction(match) for match in _NUMBER.findall(text.replace(",", ""))]


def _fitting_operations(numbers: list[Fraction], answer: Fraction) -> list[str]:
    """The operations that turn two of `numbers`, in either order, into `answer` (in OPERATIONS order)."""
    if len(numbers) != 2:
        return []
    a, b = numbers
    results = {
        "add": {a + b},
        "subtract": {a - b, b - a},
        "multiply": {a * b},
        "divide": {a / b if b else None, b / a if a else None},
    }
    return [op for op, values in results.items() if answer in values]
