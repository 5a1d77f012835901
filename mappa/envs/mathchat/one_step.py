"""One-step problem families written as data: the held-out phrasings (`heldout.py`) and the extra training
ones (`variety.py`) are each a table of `family(numbers, operation, question, ...)`,
the operation one of `operator`'s (`add`, `sub`, `mul`).

A family draws its two numbers a and b, then the names its question asks for (`{name}`: one of the
table's names; `{first}` and `{second}`: two different ones), then one of its question forms where it has
several; the answer is its operation on a and b, and the problem's `meta.numbers` is [a, b]. The numbers:

    pair        a and b from 2 to 20
    ordered     a from 6 to 20, b from 1 to a - 1: a difference that stays positive
    digits      a and b from 2 to 9: a one-digit product
    story_pair  a from 6 to 30, b from 1 to min(a - 1, 20): a story's subtraction

`draw_in_turn` draws `n` distinct problems of a table, the families in turn. Every draw comes from the
seeded generator in that order, so the problems are the same on every machine.

Not covered: problems of more than one step (`levels.py`), numbers other than whole ones.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from mappa.envs.api import Problem

OneStepMaker = Callable[[random.Random], tuple[str, int, tuple[int, ...]]]  # question, answer, numbers
Numbers = Callable[[random.Random], tuple[int, int]]
Operation = Callable[[int, int], int]


def pair(rng: random.Random) -> tuple[int, int]:
    return rng.randint(2, 20), rng.randint(2, 20)


def ordered(rng: random.Random) -> tuple[int, int]:
    a = rng.randint(6, 20)
    return a, rng.randint(1, a - 1)


def digits(rng: random.Random) -> tuple[int, int]:
    return rng.randint(2, 9), rng.randint(2, 9)


def story_pair(rng: random.Random) -> tuple[int, int]:
    a = rng.randint(6, 30)
    return a, rng.randint(1, min(a - 1, 20))


def family(numbers: Numbers, operation: Operation, *forms: str, names: tuple[str, ...] = ()) -> OneStepMaker:
    """A family's maker: `forms` are its question texts, with `{a}`, `{b}` and the names they ask for."""

    def make(rng: random.Random) -> tuple[str, int, tuple[int, ...]]:
        a, b = numbers(rng)
        fields: dict[str, int | str] = {"a": a, "b": b}
        if any("{name}" in form for form in forms):
            fields["name"] = rng.choice(names)
        if any("{first}" in form for form in forms):
            fields["first"], fields["second"] = rng.sample(names, 2)
        form = forms[0] if len(forms) == 1 else rng.choice(forms)  # one form draws nothing
        return form.format(**fields), operation(a, b), (a, b)

    return make


def draw_in_turn(
    templates: dict[str, tuple[str, OneStepMaker]], n: int, rng: random.Random, id_prefix: str, split: str
) -> list[Problem]:
    """`n` distinct one-step problems of `templates` (name -> (kind, maker)), the families in turn (by
    name, so every family is in any prefix as long as their number); ids `<id_prefix>-0000`, ...; meta:
    level 1, kind, template, the numbers and `split`."""
    names = sorted(templates)
    problems, seen = [], set()
    for _ in range(200 * n):
        if len(problems) == n:
            break
        template = names[len(problems) % len(names)]
        kind, make = templates[template]
        question, answer, numbers = make(rng)
        if question in seen:
            continue
        seen.add(question)
        meta = {"level": 1, "kind": kind, "template": template, "difficulty": 1, "numbers": list(numbers)}
        problems.append(
            Problem(f"{id_prefix}-{len(problems):04d}", question, str(answer), meta | {"split": split})
        )
    if len(problems) < n:
        raise RuntimeError(
            f"only {len(problems)} distinct {split} problems of {sorted(templates)}; ask for fewer"
        )
    return problems
