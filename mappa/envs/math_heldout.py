"""Held-out one-step problems phrased unlike anything the training split uses: `builtin:heldout-level1`.

The level-1 training split (`mappa.envs.math_levels`) asks "What is 7 + 5?", "Compute 6 * 3." and tells
three stories (gets more, gives away, bags of things) with its own names and things. A lift measured on
its own eval split may be the team learning those phrasings. These 320 problems test the same skill
(one addition, subtraction or one-digit multiplication, numbers up to 20) in other words: template
families none of the training ones share ("Add 7 and 5.", "What is 12 minus 4?", "the product of 6 and 3",
"8 more than 9"; stories of shelves, birds, buses, pages, ropes, egg boxes, ages, packs of pencils), with
other names. Disjoint from training by problem (no question text is a training one) and by template
family (`meta.template` starts with `heldout_`); a test keeps both.

The set is generated deterministically here (the same on every machine), in order: the first 256 are
what `rollout.eval_problems: 256` evaluates. Not covered: harder problems (levels 2 and 3), other
languages.
"""

from __future__ import annotations

import random

from mappa.core.types import Problem
from mappa.envs.math_problems import OneStepMaker, draw_in_turn

SIZE = 320
_NAMES = (
    "Hana",
    "Diego",
    "Priya",
    "Kofi",
    "Elena",
    "Jonas",
    "Amara",
    "Yusuf",
    "Clara",
    "Mateo",
    "Ines",
    "Theo",
)


def _pair(rng: random.Random, low: int = 2, high: int = 20) -> tuple[int, int]:
    return rng.randint(low, high), rng.randint(low, high)


def _ordered(rng: random.Random) -> tuple[int, int]:
    """a > b, a up to 20: a difference that stays positive."""
    a = rng.randint(6, 20)
    return a, rng.randint(1, a - 1)


def _digits(rng: random.Random) -> tuple[int, int]:
    return rng.randint(2, 9), rng.randint(2, 9)


def _add_words(rng):
    a, b = _pair(rng)
    form = rng.choice(
        ("Add {a} and {b}.", "What do you get when you add {a} and {b}?", "Find the sum of {a} and {b}.")
    )
    return form.format(a=a, b=b), a + b, (a, b)


def _more_than(rng):
    a, b = _pair(rng)
    form = rng.choice(("What number is {a} more than {b}?", "What is {b} increased by {a}?"))
    return form.format(a=a, b=b), a + b, (a, b)


def _minus_words(rng):
    a, b = _ordered(rng)
    form = rng.choice(
        ("What is {a} minus {b}?", "Subtract {b} from {a}.", "Take {b} away from {a}. What is left?")
    )
    return form.format(a=a, b=b), a - b, (a, b)


def _less_than(rng):
    a, b = _ordered(rng)
    form = rng.choice(("What number is {b} less than {a}?", "What is {a} decreased by {b}?"))
    return form.format(a=a, b=b), a - b, (a, b)


def _product_words(rng):
    a, b = _digits(rng)
    form = rng.choice(
        ("Multiply {a} by {b}.", "What is the product of {a} and {b}?", "What is {a} multiplied by {b}?")
    )
    return form.format(a=a, b=b), a * b, (a, b)


def _shelf(rng):
    a, b = _pair(rng)
    return (
        f"A shelf holds {a} books. {b} more books are put on it. How many books are on the shelf?",
        a + b,
        (a, b),
    )


def _pages(rng):
    a, b, name = *_pair(rng), rng.choice(_NAMES)
    return (
        f"{name} read {a} pages on Monday and {b} pages on Tuesday. How many pages did {name} read?",
        a + b,
        (a, b),
    )


def _age(rng):
    a, b, name = *_pair(rng), rng.choice(_NAMES)
    question = f"{name} is {a} years old. {name}'s cousin is {b} years older. How old is the cousin?"
    return question, a + b, (a, b)


def _birds(rng):
    a, b = _ordered(rng)
    return (
        f"There are {a} birds on a fence. {b} of them fly away. How many birds are still on the fence?",
        a - b,
        (a, b),
    )


def _bus(rng):
    a, b = _ordered(rng)
    question = (
        f"A bus has {a} passengers. At a stop, {b} of them get off. How many passengers are on the bus now?"
    )
    return question, a - b, (a, b)


def _rope(rng):
    a, b, name = *_ordered(rng), rng.choice(_NAMES)
    return (
        f"A rope is {a} meters long. {name} cuts off {b} meters. How many meters of rope are left?",
        a - b,
        (a, b),
    )


def _eggs(rng):
    rows, each = _digits(rng)
    return (
        f"An egg box has {rows} rows with {each} eggs in each row. How many eggs are in the box?",
        rows * each,
        (rows, each),
    )


def _pencils(rng):
    packs, each, name = *_digits(rng), rng.choice(_NAMES)
    return (
        f"Each pack has {each} pencils. {name} buys {packs} packs. How many pencils does {name} have?",
        packs * each,
        (packs, each),
    )


# template -> (kind, maker); every name starts with heldout_
TEMPLATES: dict[str, tuple[str, OneStepMaker]] = {
    "heldout_add_words": ("arithmetic", _add_words),
    "heldout_more_than": ("arithmetic", _more_than),
    "heldout_minus_words": ("arithmetic", _minus_words),
    "heldout_less_than": ("arithmetic", _less_than),
    "heldout_product_words": ("arithmetic", _product_words),
    "heldout_shelf": ("word", _shelf),
    "heldout_pages": ("word", _pages),
    "heldout_age": ("word", _age),
    "heldout_birds": ("word", _birds),
    "heldout_bus": ("word", _bus),
    "heldout_rope": ("word", _rope),
    "heldout_eggs": ("word", _eggs),
    "heldout_pencils": ("word", _pencils),
}


def generate_heldout(n: int = SIZE, seed: int = 0) -> list[Problem]:
    """`n` distinct held-out problems, the templates in turn (so every family is in any prefix of 13)."""
    return draw_in_turn(
        TEMPLATES, n, random.Random(f"mappa-math-heldout-level1-{seed}"), "l1-heldout", "heldout"
    )
