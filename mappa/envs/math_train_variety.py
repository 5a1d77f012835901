"""More ways to ask a one-step problem, for training: `builtin:train-level1-mix` and `-wide`.

The level-1 training split (`mappa.envs.math_levels`) asks in six template families. A team trained on
them may learn those phrasings rather than the skill, and the held-out set (`mappa.envs.math_heldout`)
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

from mappa.core.types import Problem
from mappa.envs.math_problems import OneStepMaker, draw_in_turn

SIZE = 256  # beside the 256 level-1 training problems
_NAMES = ("Sam", "Nora", "Eli", "Rosa", "Finn", "Lucy", "Ahmed", "Julia", "Oscar", "Tara", "Leo", "Vera")


def _pair(rng: random.Random) -> tuple[int, int]:
    return rng.randint(2, 20), rng.randint(2, 20)


def _ordered(rng: random.Random) -> tuple[int, int]:
    a = rng.randint(6, 20)
    return a, rng.randint(1, a - 1)


def _digits(rng: random.Random) -> tuple[int, int]:
    return rng.randint(2, 9), rng.randint(2, 9)


def _work_out(rng):
    a, b = _pair(rng)
    return f"Work out {a} + {b}.", a + b, (a, b)


def _equals(rng):
    a, b = _ordered(rng)
    return f"{a} - {b} = ?", a - b, (a, b)


def _class(rng):
    a, b = _pair(rng)
    return f"A class has {a} girls and {b} boys. How many children are in the class?", a + b, (a, b)


def _baker(rng):
    a, b = _ordered(rng)
    return f"A baker made {a} cookies and sold {b} of them. How many cookies are left?", a - b, (a, b)


def _parking(rng):
    a, b = _pair(rng)
    return (
        f"There are {a} cars in a parking lot and {b} more arrive. How many cars are there now?",
        a + b,
        (a, b),
    )


def _farmer(rng):
    rows, each = _digits(rng)
    question = f"A farmer plants {rows} rows with {each} plants in each row. How many plants are there?"
    return question, rows * each, (rows, each)


def _stamps(rng):
    a, b, name = *_ordered(rng), rng.choice(_NAMES)
    return f"{name} had {a} stamps and lost {b}. How many stamps does {name} have now?", a - b, (a, b)


def _crayons(rng):
    boxes, each = _digits(rng)
    question = f"There are {boxes} boxes with {each} crayons each. How many crayons are there in all?"
    return question, boxes * each, (boxes, each)


TEMPLATES: dict[str, tuple[str, OneStepMaker]] = {  # template -> (kind, maker)
    "mix_work_out": ("arithmetic", _work_out),
    "mix_equals": ("arithmetic", _equals),
    "mix_class": ("word", _class),
    "mix_baker": ("word", _baker),
    "mix_parking": ("word", _parking),
    "mix_farmer": ("word", _farmer),
    "mix_stamps": ("word", _stamps),
    "mix_crayons": ("word", _crayons),
}


def _story_pair(rng: random.Random) -> tuple[int, int]:
    a = rng.randint(6, 30)
    return a, rng.randint(1, min(a - 1, 20))


def _two_names(rng: random.Random) -> tuple[str, str]:
    first, second = rng.sample(_NAMES, 2)
    return first, second


def _jar(rng):
    a, b, name = *_story_pair(rng), rng.choice(_NAMES)
    return (
        f"A jar had {a} cookies. {name} ate {b} of them. How many cookies are in the jar now?",
        a - b,
        (a, b),
    )


def _spent(rng):
    a, b, name = *_story_pair(rng), rng.choice(_NAMES)
    question = (
        f"{name} had {a} dollars and spent {b} dollars on lunch. How many dollars does {name} have left?"
    )
    return question, a - b, (a, b)


def _plates(rng):
    a, b, name = *_story_pair(rng), rng.choice(_NAMES)
    question = f"{name} had {a} plates. {b} plates broke when they fell. How many plates are not broken?"
    return question, a - b, (a, b)


def _tissues(rng):
    a, b, name = *_story_pair(rng), rng.choice(_NAMES)
    question = f"A box had {a} tissues. {name} used {b} of them. How many tissues are left in the box?"
    return question, a - b, (a, b)


def _fewer(rng):
    (a, b), (first, second) = _story_pair(rng), _two_names(rng)
    question = f"{first} has {a} cards. {second} has {b} fewer cards than {first}. "
    question += f"How many cards does {second} have?"
    return question, a - b, (a, b)


def _needs_more(rng):
    a, b, name = *_story_pair(rng), rng.choice(_NAMES)
    question = (
        f"{name} wants to collect {a} shells and already has {b}. How many more shells does {name} need?"
    )
    return question, a - b, (a, b)


def _older(rng):
    (a, b), (first, second) = _story_pair(rng), _two_names(rng)
    question = f"{first} is {a} years old and {second} is {b} years old. "
    question += f"How many years older is {first} than {second}?"
    return question, a - b, (a, b)


def _ice(rng):
    a, b = _story_pair(rng)
    question = f"There were {a} ice cubes in a bowl. {b} of them melted. How many ice cubes have not melted?"
    return question, a - b, (a, b)


def _games(rng):
    a, b, name = *_pair(rng), rng.choice(_NAMES)
    question = (
        f"{name} scored {a} points in the first game and {b} points in the second game. "
        f"How many points did {name} score in all?"
    )
    return question, a + b, (a, b)


def _tulips(rng):
    a, b = _pair(rng)
    question = f"A garden has {a} red tulips and {b} yellow tulips. How many tulips are in the garden?"
    return question, a + b, (a, b)


def _savings(rng):
    (each, weeks), name = _digits(rng), rng.choice(_NAMES)
    question = f"{name} saves {each} dollars every week. How many dollars does {name} save in {weeks} weeks?"
    return question, each * weeks, (each, weeks)


def _cafe(rng):
    tables, chairs = _digits(rng)
    question = f"A cafe has {tables} tables with {chairs} chairs at each table. How many chairs are there?"
    return question, tables * chairs, (tables, chairs)


STORIES: dict[str, tuple[str, OneStepMaker]] = {  # `builtin:train-level1-wide`'s twelve more families
    "wide_jar": ("word", _jar),
    "wide_spent": ("word", _spent),
    "wide_plates": ("word", _plates),
    "wide_tissues": ("word", _tissues),
    "wide_fewer": ("word", _fewer),
    "wide_needs_more": ("word", _needs_more),
    "wide_older": ("word", _older),
    "wide_ice": ("word", _ice),
    "wide_games": ("word", _games),
    "wide_tulips": ("word", _tulips),
    "wide_savings": ("word", _savings),
    "wide_cafe": ("word", _cafe),
}


def generate_variety(n: int = SIZE, seed: int = 0) -> list[Problem]:
    """`n` distinct training problems of the eight extra families (`TEMPLATES`), the families in turn."""
    return draw_in_turn(TEMPLATES, n, random.Random(f"mappa-math-train-variety-{seed}"), "l1-mix", "train")


def generate_stories(n: int = SIZE, seed: int = 0) -> list[Problem]:
    """`n` distinct training problems of the twelve story families (`STORIES`), the families in turn."""
    return draw_in_turn(STORIES, n, random.Random(f"mappa-math-train-stories-{seed}"), "l1-wide", "train")
