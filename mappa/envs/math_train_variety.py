"""More ways to ask a one-step problem, for training: `builtin:train-level1-mix`.

The level-1 training split (`mappa.envs.math_levels`) asks in six template families. A team trained on
them may learn those phrasings rather than the skill, and the held-out set (`mappa.envs.math_heldout`)
asks in thirteen others. This split adds eight more training families, written apart from the held-out
ones (other symbols and verbs: "Work out 7 + 5.", "12 - 4 = ?"; other stories: a class, a baker, a parking
lot, a farmer's rows, lost stamps, a fish tank, a train, boxes of crayons) to the 256 level-1 training
problems: 512 problems in all, the same skill (one addition, subtraction or one-digit product, numbers
up to 20). No question and no family is shared with the held-out set (a test keeps it so); meta's
`template` names the family.

Not covered: harder problems (levels 2 and 3).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from mappa.core.types import Problem

SIZE = 256  # beside the 256 level-1 training problems
_NAMES = ("Sam", "Nora", "Eli", "Rosa", "Finn", "Lucy", "Ahmed", "Julia", "Oscar", "Tara", "Leo", "Vera")

Maker = Callable[[random.Random], tuple[str, int, tuple[int, int]]]


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


TEMPLATES: dict[str, tuple[str, Maker]] = {  # template -> (kind, maker)
    "mix_work_out": ("arithmetic", _work_out),
    "mix_equals": ("arithmetic", _equals),
    "mix_class": ("word", _class),
    "mix_baker": ("word", _baker),
    "mix_parking": ("word", _parking),
    "mix_farmer": ("word", _farmer),
    "mix_stamps": ("word", _stamps),
    "mix_crayons": ("word", _crayons),
}


def generate_variety(n: int = SIZE, seed: int = 0) -> list[Problem]:
    """`n` distinct training problems of the eight extra families, the families in turn."""
    rng = random.Random(f"mappa-math-train-variety-{seed}")
    names = sorted(TEMPLATES)
    problems, seen = [], set()
    for _ in range(200 * n):
        if len(problems) == n:
            break
        template = names[len(problems) % len(names)]
        kind, make = TEMPLATES[template]
        question, answer, numbers = make(rng)
        if question in seen:
            continue
        seen.add(question)
        meta = {"level": 1, "kind": kind, "template": template, "difficulty": 1, "numbers": list(numbers)}
        problems.append(
            Problem(f"l1-mix-{len(problems):04d}", question, str(answer), meta | {"split": "train"})
        )
    if len(problems) < n:
        raise RuntimeError(f"only {len(problems)} distinct training problems of the extra families")
    return problems
