"""Held-out one-step problems phrased unlike anything the training split uses: `builtin:heldout-level1`.

The level-1 training split (`mappa.envs.mathchat.levels`) asks "What is 7 + 5?", "Compute 6 * 3." and tells
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
from operator import add, mul, sub

from mappa.envs.api import Problem
from mappa.envs.mathchat.one_step import OneStepMaker, digits, draw_in_turn, family, ordered, pair

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

# template -> (kind, maker); every name starts with heldout_
TEMPLATES: dict[str, tuple[str, OneStepMaker]] = {
    "heldout_add_words": (
        "arithmetic",
        family(
            pair,
            add,
            "Add {a} and {b}.",
            "What do you get when you add {a} and {b}?",
            "Find the sum of {a} and {b}.",
        ),
    ),
    "heldout_more_than": (
        "arithmetic",
        family(pair, add, "What number is {a} more than {b}?", "What is {b} increased by {a}?"),
    ),
    "heldout_minus_words": (
        "arithmetic",
        family(
            ordered,
            sub,
            "What is {a} minus {b}?",
            "Subtract {b} from {a}.",
            "Take {b} away from {a}. What is left?",
        ),
    ),
    "heldout_less_than": (
        "arithmetic",
        family(ordered, sub, "What number is {b} less than {a}?", "What is {a} decreased by {b}?"),
    ),
    "heldout_product_words": (
        "arithmetic",
        family(
            digits,
            mul,
            "Multiply {a} by {b}.",
            "What is the product of {a} and {b}?",
            "What is {a} multiplied by {b}?",
        ),
    ),
    "heldout_shelf": (
        "word",
        family(
            pair,
            add,
            "A shelf holds {a} books. {b} more books are put on it. How many books are on the shelf?",
        ),
    ),
    "heldout_pages": (
        "word",
        family(
            pair,
            add,
            "{name} read {a} pages on Monday and {b} pages on Tuesday. How many pages did {name} read?",
            names=_NAMES,
        ),
    ),
    "heldout_age": (
        "word",
        family(
            pair,
            add,
            "{name} is {a} years old. {name}'s cousin is {b} years older. How old is the cousin?",
            names=_NAMES,
        ),
    ),
    "heldout_birds": (
        "word",
        family(
            ordered,
            sub,
            "There are {a} birds on a fence. {b} of them fly away. How many birds are still on the fence?",
        ),
    ),
    "heldout_bus": (
        "word",
        family(
            ordered,
            sub,
            "A bus has {a} passengers. At a stop, {b} of them get off. "
            "How many passengers are on the bus now?",
        ),
    ),
    "heldout_rope": (
        "word",
        family(
            ordered,
            sub,
            "A rope is {a} meters long. {name} cuts off {b} meters. How many meters of rope are left?",
            names=_NAMES,
        ),
    ),
    "heldout_eggs": (
        "word",
        family(
            digits,
            mul,
            "An egg box has {a} rows with {b} eggs in each row. How many eggs are in the box?",
        ),
    ),
    "heldout_pencils": (
        "word",
        family(
            digits,
            mul,
            "Each pack has {b} pencils. {name} buys {a} packs. How many pencils does {name} have?",
            names=_NAMES,
        ),
    ),
}


def generate_heldout(n: int = SIZE, seed: int = 0) -> list[Problem]:
    """`n` distinct held-out problems, the templates in turn (so every family is in any prefix of 13)."""
    return draw_in_turn(
        TEMPLATES, n, random.Random(f"mappa-math-heldout-level1-{seed}"), "l1-heldout", "heldout"
    )
