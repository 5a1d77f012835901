"""More ways to ask a one-step problem, for training: `builtin:train-level1-mix` and `-wide`.

The level-1 training split (`mappa.envs.mathchat.levels`) asks in six template families. A team trained on
them may learn those phrasings rather than the skill, and the held-out set (`mappa.envs.mathchat.heldout`)
asks in thirteen others. This split adds eight more training families, written apart from the held-out
ones (other symbols and verbs: "Work out 7 + 5.", "12 - 4 = ?"; other stories: a class, a baker, a parking
lot, a farmer's rows, lost stamps, a fish tank, a train, boxes of crayons) to the 256 level-1 training
problems: 512 problems in all, the same skill (one addition, subtraction or one-digit product, numbers
up to 20). `builtin:train-level1-wide` adds 256 problems of twelve more story families to those 512,
eight of them subtractions told in other verbs (ate, spent, broke, used, melted; fewer than, how many more
are needed, how much older), since a subtraction told as a story is what the mix did not teach
(BENCHMARKS.md); their first numbers go up to 30. No question and no family is shared with the held-out
set (a test keeps it so); meta's `template` names the family.

Not covered: harder problems (levels 2 and 3).
"""

from __future__ import annotations

import random
from operator import add, mul, sub

from mappa.envs.api import Problem
from mappa.envs.mathchat.one_step import OneStepMaker, digits, draw_in_turn, family, ordered, pair, story_pair

SIZE = 256  # beside the 256 level-1 training problems
_NAMES = ("Sam", "Nora", "Eli", "Rosa", "Finn", "Lucy", "Ahmed", "Julia", "Oscar", "Tara", "Leo", "Vera")

TEMPLATES: dict[str, tuple[str, OneStepMaker]] = {  # template -> (kind, maker)
    "mix_work_out": ("arithmetic", family(pair, add, "Work out {a} + {b}.")),
    "mix_equals": ("arithmetic", family(ordered, sub, "{a} - {b} = ?")),
    "mix_class": (
        "word",
        family(pair, add, "A class has {a} girls and {b} boys. How many children are in the class?"),
    ),
    "mix_baker": (
        "word",
        family(ordered, sub, "A baker made {a} cookies and sold {b} of them. How many cookies are left?"),
    ),
    "mix_parking": (
        "word",
        family(
            pair, add, "There are {a} cars in a parking lot and {b} more arrive. How many cars are there now?"
        ),
    ),
    "mix_farmer": (
        "word",
        family(
            digits,
            mul,
            "A farmer plants {a} rows with {b} plants in each row. How many plants are there?",
        ),
    ),
    "mix_stamps": (
        "word",
        family(
            ordered,
            sub,
            "{name} had {a} stamps and lost {b}. How many stamps does {name} have now?",
            names=_NAMES,
        ),
    ),
    "mix_crayons": (
        "word",
        family(digits, mul, "There are {a} boxes with {b} crayons each. How many crayons are there in all?"),
    ),
}

STORIES: dict[str, tuple[str, OneStepMaker]] = {  # `builtin:train-level1-wide`'s twelve more families
    "wide_jar": (
        "word",
        family(
            story_pair,
            sub,
            "A jar had {a} cookies. {name} ate {b} of them. How many cookies are in the jar now?",
            names=_NAMES,
        ),
    ),
    "wide_spent": (
        "word",
        family(
            story_pair,
            sub,
            "{name} had {a} dollars and spent {b} dollars on lunch. How many dollars does {name} have left?",
            names=_NAMES,
        ),
    ),
    "wide_plates": (
        "word",
        family(
            story_pair,
            sub,
            "{name} had {a} plates. {b} plates broke when they fell. How many plates are not broken?",
            names=_NAMES,
        ),
    ),
    "wide_tissues": (
        "word",
        family(
            story_pair,
            sub,
            "A box had {a} tissues. {name} used {b} of them. How many tissues are left in the box?",
            names=_NAMES,
        ),
    ),
    "wide_fewer": (
        "word",
        family(
            story_pair,
            sub,
            "{first} has {a} cards. {second} has {b} fewer cards than {first}. "
            "How many cards does {second} have?",
            names=_NAMES,
        ),
    ),
    "wide_needs_more": (
        "word",
        family(
            story_pair,
            sub,
            "{name} wants to collect {a} shells and already has {b}. How many more shells does {name} need?",
            names=_NAMES,
        ),
    ),
    "wide_older": (
        "word",
        family(
            story_pair,
            sub,
            "{first} is {a} years old and {second} is {b} years old. "
            "How many years older is {first} than {second}?",
            names=_NAMES,
        ),
    ),
    "wide_ice": (
        "word",
        family(
            story_pair,
            sub,
            "There were {a} ice cubes in a bowl. {b} of them melted. How many ice cubes have not melted?",
        ),
    ),
    "wide_games": (
        "word",
        family(
            pair,
            add,
            "{name} scored {a} points in the first game and {b} points in the second game. "
            "How many points did {name} score in all?",
            names=_NAMES,
        ),
    ),
    "wide_tulips": (
        "word",
        family(
            pair, add, "A garden has {a} red tulips and {b} yellow tulips. How many tulips are in the garden?"
        ),
    ),
    "wide_savings": (
        "word",
        family(
            digits,
            mul,
            "{name} saves {a} dollars every week. How many dollars does {name} save in {b} weeks?",
            names=_NAMES,
        ),
    ),
    "wide_cafe": (
        "word",
        family(
            digits,
            mul,
            "A cafe has {a} tables with {b} chairs at each table. How many chairs are there?",
        ),
    ),
}


def generate_variety(n: int = SIZE, seed: int = 0) -> list[Problem]:
    """`n` distinct training problems of the eight extra families (`TEMPLATES`), the families in turn."""
    return draw_in_turn(TEMPLATES, n, random.Random(f"mappa-math-train-variety-{seed}"), "l1-mix", "train")


def generate_stories(n: int = SIZE, seed: int = 0) -> list[Problem]:
    """`n` distinct training problems of the twelve story families (`STORIES`), the families in turn."""
    return draw_in_turn(STORIES, n, random.Random(f"mappa-math-train-stories-{seed}"), "l1-wide", "train")
