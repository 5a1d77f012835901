"""The difficulty dial for the built-in math problems: `builtin:<split>-level<N>`.

level 1  one step: a sum or difference of numbers up to 20, a one-digit product, a one-step word problem
         ("What is 7 + 5?", "Tom has 4 apples and gets 3 more. How many apples does Tom have now?")
level 2  two steps: an expression with two operators ("What is 3 + 4 * 5?") or a two-step word problem
level 3  today's mix (`builtin:train` / `builtin:eval`): expressions of 2-4 operators, word problems of
         1-4 steps ("(17 + 25) * 3 - 48 / 4")

Each level has a train split (256 problems) and an eval split (64), generated here deterministically (the
same on every machine); level 3 is the shipped files. As in `mappa.envs.mathchat.problems`, a stable hash of a
problem's signature (template and numbers) puts it in exactly one split, so train and eval never share a
problem. meta holds `level`, `kind`, `template`, `difficulty` (steps) and `params`.

Not covered: levels beyond today's mix (use a data-set file, e.g. GSM8K as JSONL, via `env.train_data`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from fractions import Fraction

from mappa.envs.api import Problem
from mappa.envs.mathchat.heldout import generate_heldout
from mappa.envs.mathchat.problems import (
    SPLITS,
    WORD_TEMPLATES,
    Draft,
    Reject,
    format_answer,
    load_builtin,
    split_of,
)
from mappa.envs.mathchat.variety import generate_stories, generate_variety

LEVELS = (1, 2, 3)
SIZES = {"train": 256, "eval": 64}
_NAMES = ("Tom", "Maya", "Liam", "Ava", "Noah", "Zoe", "Omar", "Lena", "Ravi", "Sofia", "Ben", "Mia")
_THINGS = ("apples", "pens", "stickers", "marbles", "cards", "books", "shells", "coins")
_ASK = ("What is {e}?", "Compute {e}.", "Calculate {e}.")
_SOURCE = re.compile(r"^builtin:(train|eval)-level(\d+)$")

Level1Maker = Callable[[random.Random], tuple[str, int, dict[str, int]]]  # question, answer, params


def _sum(rng: random.Random) -> tuple[str, int, dict[str, int]]:
    a, b = rng.randint(2, 20), rng.randint(2, 20)
    return rng.choice(_ASK).format(e=f"{a} + {b}"), a + b, {"a": a, "b": b}


def _difference(rng: random.Random) -> tuple[str, int, dict[str, int]]:
    a, b = rng.randint(5, 20), rng.randint(1, 9)
    if b >= a:
        b = a - 1
    return rng.choice(_ASK).format(e=f"{a} - {b}"), a - b, {"a": a, "b": b}


def _product(rng: random.Random) -> tuple[str, int, dict[str, int]]:
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    text = rng.choice((f"{a} * {b}", f"{a} times {b}"))
    return rng.choice(_ASK).format(e=text), a * b, {"a": a, "b": b}


def _buys_more(rng: random.Random) -> tuple[str, int, dict[str, int]]:
    name, thing, a, b = rng.choice(_NAMES), rng.choice(_THINGS), rng.randint(2, 15), rng.randint(2, 15)
    q = f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?"
    return q, a + b, {"a": a, "b": b, "thing": _THINGS.index(thing)}


def _gives_away(rng: random.Random) -> tuple[str, int, dict[str, int]]:
    name, thing, a = rng.choice(_NAMES), rng.choice(_THINGS), rng.randint(6, 20)
    b = rng.randint(1, a - 1)
    q = f"{name} has {a} {thing} and gives {b} of them away. How many {thing} does {name} have left?"
    return q, a - b, {"a": a, "b": b, "thing": _THINGS.index(thing)}


def _bags(rng: random.Random) -> tuple[str, int, dict[str, int]]:
    name, thing, bags, each = rng.choice(_NAMES), rng.choice(_THINGS), rng.randint(2, 9), rng.randint(2, 9)
    q = f"{name} has {bags} bags with {each} {thing} in each bag. How many {thing} does {name} have?"
    return q, bags * each, {"bags": bags, "each": each, "thing": _THINGS.index(thing)}


LEVEL1_TEMPLATES: dict[str, tuple[str, Level1Maker]] = {  # template -> (kind, maker)
    "sum": ("arithmetic", _sum),
    "difference": ("arithmetic", _difference),
    "product": ("arithmetic", _product),
    "buys_more": ("word", _buys_more),
    "gives_away": ("word", _gives_away),
    "bags": ("word", _bags),
}
_TWO_STEP_WORDS = (  # the level-3 generator's word templates of exactly two arithmetic steps
    "age_future",
    "age_sum",
    "boxes_needed",
    "discount",
    "percent_of",
    "pizza_left",
    "savings",
    "sharing",
    "shopping_change",
    "unit_price",
)


def _level1(rng: random.Random) -> tuple[Draft, str, str]:
    template = rng.choice(sorted(LEVEL1_TEMPLATES))
    kind, make = LEVEL1_TEMPLATES[template]
    question, answer, params = make(rng)
    return (question, answer, 1, params), kind, template


_TWO_OPERATOR_FORMS = {  # text form -> value
    "{a} + {b} * {c}": lambda a, b, c: a + b * c,
    "{a} * {b} - {c}": lambda a, b, c: a * b - c,
    "({a} + {b}) * {c}": lambda a, b, c: (a + b) * c,
    "{a} - {b} + {c}": lambda a, b, c: a - b + c,
}


def _two_operators(rng: random.Random) -> Draft:
    a, b, c = rng.randint(2, 20), rng.randint(2, 9), rng.randint(2, 9)
    form = rng.choice(sorted(_TWO_OPERATOR_FORMS))
    value = _TWO_OPERATOR_FORMS[form](a, b, c)
    if value <= 0 or value > 999:
        raise Reject
    params = {"form": form, "a": a, "b": b, "c": c}
    return rng.choice(_ASK).format(e=form.format(a=a, b=b, c=c)), value, 2, params


def _level2(rng: random.Random) -> tuple[Draft, str, str]:
    if rng.random() < 0.5:
        return _two_operators(rng), "arithmetic", "two_operators"
    template = rng.choice(_TWO_STEP_WORDS)
    kind, make = WORD_TEMPLATES[template]
    return make(rng, rng.choice(_NAMES)), kind, template


_DRAWERS = {1: _level1, 2: _level2}


def generate_level(level: int, split: str, n: int | None = None, seed: int = 0) -> list[Problem]:
    """`n` (default: the split's size) distinct problems of `level` (1 or 2) in `split`, deterministic.

    IDs are `l<level>-<split>-0000`, ...; a problem's split follows from its signature alone.
    """
    if level not in _DRAWERS or split not in SIZES:
        raise ValueError(f"need level 1 or 2 and a split in {tuple(SIZES)}, got {level!r}, {split!r}")
    n = SIZES[split] if n is None else n
    rng = random.Random(f"mappa-math-level{level}-{split}-{seed}")
    problems, seen = [], set()
    for _ in range(500 * n + 100):
        if len(problems) == n:
            break
        try:
            (question, answer, steps, params), kind, template = _DRAWERS[level](rng)
        except Reject:
            continue
        signature = f"level{level}:{template}:" + ",".join(f"{k}={v}" for k, v in sorted(params.items()))
        if signature in seen or split_of(signature) != split or Fraction(answer) <= 0:
            continue
        seen.add(signature)
        meta = {"level": level, "kind": kind, "template": template, "difficulty": steps, "params": params}
        problem_id = f"l{level}-{split}-{len(problems):04d}"
        problems.append(Problem(problem_id, question, format_answer(answer), meta | {"split": split}))
    if len(problems) < n:
        raise RuntimeError(f"only {len(problems)} distinct level-{level} {split} problems; ask for fewer")
    return problems


def load_builtin_source(source: str) -> list[Problem]:
    """The problems of `builtin:<split>` (level 3, the shipped files), `builtin:<split>-level<N>`,
    `builtin:heldout-level1` (other phrasings: `mappa.envs.mathchat.heldout`), `builtin:train-level1-mix`
    (the level-1 training split and eight more families: `mappa.envs.mathchat.variety`) or
    `builtin:train-level1-wide` (the mix and twelve story families, most of them subtractions)."""
    name = source.removeprefix("builtin:")
    if name in SPLITS:
        return load_builtin(name)
    if name == "heldout-level1":
        return generate_heldout()
    if name == "train-level1-mix":
        return generate_level(1, "train") + generate_variety()
    if name == "train-level1-wide":
        return generate_level(1, "train") + generate_variety() + generate_stories()
    match = _SOURCE.match(source)
    if match is None or int(match.group(2)) not in LEVELS:
        forms = ", ".join(
            [
                *(f"builtin:{s}-level{n}" for s in SIZES for n in LEVELS),
                "builtin:heldout-level1",
                "builtin:train-level1-mix",
                "builtin:train-level1-wide",
            ]
        )
        raise ValueError(f"unknown built-in problem set {source!r}; use builtin:train, builtin:eval, {forms}")
    split, level = match.group(1), int(match.group(2))
    return load_builtin(split) if level == 3 else generate_level(level, split)
