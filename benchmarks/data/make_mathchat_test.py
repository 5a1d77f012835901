"""Generate benchmarks/data/mathchat-test-level1.jsonl, a held-out TEST set.

Written 2026-12-06 by an author who did not look at mappa's problem
generators (nor at any other problem set in this repository); all wording
and number ranges here were invented independently.

What the set holds: 256 very easy arithmetic problems, one JSON object per
line, balanced over four operations (add, subtract, multiply, two-step;
64 each) and, within each operation, three surface forms:
  - expression (21): a bare symbolic expression wrapped in a short question,
  - phrased    (21): the arithmetic said in words, without a story,
  - word       (22): a one- or two-sentence everyday story ending in a question.
Number ranges: add operands 2-40 with sum <= 60; subtract minuend 5-40 with a
non-negative result; multiply factors 2-12; two-step problems use exactly two
operations among + - x with numbers 2-20 and every intermediate and final
result a non-negative integer <= 100.  Every answer is computed by this
script from the numbers in the order the text means, never typed by hand.

This is a TEST set: it is evaluated only in final runs, never used for
training, tuning or model selection.

Usage: python3 benchmarks/data/make_mathchat_test.py   (stdlib only, deterministic)
"""

import json
import os
import random
from collections import Counter

SEED = 20261206
SOURCE = "written blind to mappa's generators, 2026-12-06"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mathchat-test-level1.jsonl")
PER_FORM = {"expression": 21, "phrased": 21, "word": 22}
OPERATIONS = ["add", "subtract", "multiply", "two-step"]

rng = random.Random(SEED)

# (name, subject pronoun, possessive) from many cultures
PEOPLE = [
    ("Aisha", "she", "her"),
    ("Mateo", "he", "his"),
    ("Yuki", "she", "her"),
    ("Kwame", "he", "his"),
    ("Priya", "she", "her"),
    ("Liam", "he", "his"),
    ("Fatima", "she", "her"),
    ("Chen", "he", "his"),
    ("Sofia", "she", "her"),
    ("Olu", "he", "his"),
    ("Ingrid", "she", "her"),
    ("Ravi", "he", "his"),
    ("Amara", "she", "her"),
    ("Diego", "he", "his"),
    ("Hana", "she", "her"),
    ("Tomasz", "he", "his"),
    ("Leila", "she", "her"),
    ("Kofi", "he", "his"),
    ("Mei", "she", "her"),
    ("Arjun", "he", "his"),
    ("Zanele", "she", "her"),
    ("Nikolai", "he", "his"),
    ("Isabela", "she", "her"),
    ("Omar", "he", "his"),
    ("Keiko", "she", "her"),
    ("Emeka", "he", "his"),
    ("Freya", "she", "her"),
    ("Santiago", "he", "his"),
    ("Noor", "she", "her"),
    ("Jae-won", "he", "his"),
    ("Ana", "she", "her"),
    ("Tariq", "he", "his"),
    ("Elif", "she", "her"),
    ("Malik", "he", "his"),
    ("Astrid", "she", "her"),
    ("Sione", "he", "his"),
    ("Rosa", "she", "her"),
    ("Bao", "he", "his"),
    ("Ayumi", "she", "her"),
    ("Dmitri", "he", "his"),
    ("Nadia", "she", "her"),
    ("Kai", "he", "his"),
]


def person():
    return rng.choice(PEOPLE)


# ---------------------------------------------------------------- numbers


def add_pair():
    a = rng.randint(2, 40)
    b = rng.randint(2, min(40, 60 - a))
    return a, b


def sub_pair():
    a = rng.randint(5, 40)
    b = rng.randint(2, a - 1)
    return a, b


def mul_pair():
    r = rng.random()
    if r < 0.7:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
    else:
        a, b = rng.randint(10, 12), rng.randint(2, 9)
        if rng.random() < 0.5:
            a, b = b, a
    return a, b


def ap(op, x, y):
    """Apply one operation; return None if the result leaves 0..100."""
    if op == "+":
        r = x + y
    elif op == "-":
        r = x - y
    elif op == "*":
        r = x * y
    else:
        raise ValueError(op)
    return r if 0 <= r <= 100 else None


def two_step(a, b, c, op1, op2, order):
    """order 'L': (a op1 b) op2 c ; order 'R': a op1 (b op2 c).

    Returns the answer or None if any intermediate/final result is invalid.
    """
    if order == "L":
        m = ap(op1, a, b)
        return None if m is None else ap(op2, m, c)
    m = ap(op2, b, c)
    return None if m is None else ap(op1, a, m)


def n220():
    return rng.randint(2, 20)


# ---------------------------------------------------------------- expression form

EXPR_WRAPS = [
    ("what-is", "What is {e}?"),
    ("work-out", "Work out {e}."),
    ("equals-q", "{e} = ?"),
    ("find-value", "Find the value of {e}."),
    ("calculate", "Calculate {e}."),
    ("compute-colon", "Compute: {e}"),
    ("evaluate", "Evaluate {e}."),
    ("what-does-equal", "What does {e} equal?"),
    ("give-answer", "Give the answer to {e}."),
    ("equals-what", "{e} equals what?"),
    ("solve-colon", "Solve: {e} = ?"),
]

MUL_SYMS = ["×", "*", "x"]


def expr_item(op, idx):
    """Return (text, answer, frame, expr_string)."""
    wname, wrap = EXPR_WRAPS[idx % len(EXPR_WRAPS)]
    if op == "add":
        a, b = add_pair()
        e, ans = f"{a} + {b}", a + b
    elif op == "subtract":
        a, b = sub_pair()
        e, ans = f"{a} - {b}", a - b
    elif op == "multiply":
        a, b = mul_pair()
        s = MUL_SYMS[idx % 3]
        e, ans = f"{a} {s} {b}", a * b
    else:
        e, ans = two_step_expr(idx)
    return wrap.format(e=e), ans, "expr-" + wname, e


# structures for two-step expressions: (op1, op2, order, renderer)
TWO_STEP_EXPR = [
    ("+", "-", "L", "{a} + {b} - {c}"),
    ("-", "+", "L", "{a} - {b} + {c}"),
    ("+", "+", "L", "{a} + {b} + {c}"),
    ("-", "-", "L", "{a} - {b} - {c}"),
    ("*", "+", "L", "{a} {m} {b} + {c}"),
    ("*", "-", "L", "{a} {m} {b} - {c}"),
    ("+", "*", "L", "({a} + {b}) {m} {c}"),
    ("-", "*", "L", "({a} - {b}) {m} {c}"),
    ("+", "*", "R", "{a} + {b} {m} {c}"),
    ("*", "+", "R", "{a} {m} ({b} + {c})"),
    ("*", "-", "R", "{a} {m} ({b} - {c})"),
]


def two_step_expr(idx):
    op1, op2, order, tmpl = TWO_STEP_EXPR[idx % len(TWO_STEP_EXPR)]
    m = "×" if (idx // len(TWO_STEP_EXPR)) % 2 == 0 else "*"
    while True:
        a, b, c = n220(), n220(), n220()
        ans = two_step(a, b, c, op1, op2, order)
        if ans is not None:
            return tmpl.format(a=a, b=b, c=c, m=m), ans


# ---------------------------------------------------------------- phrased form
# each entry: (frame, function returning (text, answer))


def _p(frame, tmpl, pair, fn):
    def gen():
        a, b = pair()
        return tmpl.format(a=a, b=b), fn(a, b)

    return (frame, gen)


PHRASED = {
    "add": [
        _p("sum-of", "What is the sum of {a} and {b}?", add_pair, lambda a, b: a + b),
        _p("plus", "What is {a} plus {b}?", add_pair, lambda a, b: a + b),
        _p("add-and", "Add {a} and {b}. What do you get?", add_pair, lambda a, b: a + b),
        _p("add-to", "Add {b} to {a}. What is the result?", add_pair, lambda a, b: a + b),
        _p("more-than", "What number is {b} more than {a}?", add_pair, lambda a, b: a + b),
        _p("increase-by", "Increase {a} by {b}. What number do you get?", add_pair, lambda a, b: a + b),
        _p("total-of", "Find the total of {a} and {b}.", add_pair, lambda a, b: a + b),
        _p(
            "put-together",
            "If you put {a} and {b} together, how much do you have?",
            add_pair,
            lambda a, b: a + b,
        ),
        _p("count-on", "Count on {b} from {a}. What number do you reach?", add_pair, lambda a, b: a + b),
        _p(
            "added-together",
            "What do you get when {a} and {b} are added together?",
            add_pair,
            lambda a, b: a + b,
        ),
    ],
    "subtract": [
        # "subtract B from A" means A - B: the template names {b} first, answer is a - b
        _p("subtract-from", "Subtract {b} from {a}. What is left?", sub_pair, lambda a, b: a - b),
        _p("take-away-from", "Take {b} away from {a}. How many remain?", sub_pair, lambda a, b: a - b),
        _p("take-away", "What is {a} take away {b}?", sub_pair, lambda a, b: a - b),
        _p("minus", "What is {a} minus {b}?", sub_pair, lambda a, b: a - b),
        _p("difference", "What is the difference between {a} and {b}?", sub_pair, lambda a, b: a - b),
        _p("less-than", "What number is {b} less than {a}?", sub_pair, lambda a, b: a - b),
        _p("decrease-by", "Decrease {a} by {b}. What do you get?", sub_pair, lambda a, b: a - b),
        _p("how-much-bigger", "How much bigger is {a} than {b}?", sub_pair, lambda a, b: a - b),
        _p("count-back", "Count back {b} from {a}. What number do you reach?", sub_pair, lambda a, b: a - b),
        _p("missing-addend", "What must be added to {b} to make {a}?", sub_pair, lambda a, b: a - b),
        _p("reduced-by", "If {a} is reduced by {b}, what number do you get?", sub_pair, lambda a, b: a - b),
    ],
    "multiply": [
        _p("times", "What is {a} times {b}?", mul_pair, lambda a, b: a * b),
        _p("multiplied-by", "How much is {a} multiplied by {b}?", mul_pair, lambda a, b: a * b),
        _p("product-of", "What is the product of {a} and {b}?", mul_pair, lambda a, b: a * b),
        _p("multiply-by", "Multiply {a} by {b}. What is the answer?", mul_pair, lambda a, b: a * b),
        _p("groups-of", "How many is {a} groups of {b}?", mul_pair, lambda a, b: a * b),
        _p(
            "multiply-together",
            "What do you get if you multiply {a} and {b} together?",
            mul_pair,
            lambda a, b: a * b,
        ),
        _p("double", "What is double {a}?", lambda: (rng.randint(2, 12), 2), lambda a, b: a * 2),
        _p(
            "triple",
            "Triple {a}. What number do you get?",
            lambda: (rng.randint(2, 12), 3),
            lambda a, b: a * 3,
        ),
        _p("lots-of", "{a} lots of {b} make how many?", mul_pair, lambda a, b: a * b),
        _p("times-as-large", "What number is {a} times as large as {b}?", mul_pair, lambda a, b: a * b),
    ],
}


def _t(frame, tmpl, op1, op2, order, text_nums=None):
    """Two-step phrased template. Text uses {a},{b},{c}; the value is
    two_step(a, b, c, op1, op2, order) where a, b, c are the *computation*
    operands. text_nums maps computation operands to the names used in the
    text when they differ (e.g. 'double {x}' computes 2 * x)."""

    def gen():
        while True:
            a, b, c = n220(), n220(), n220()
            if text_nums is not None:
                vals, a, b, c = text_nums(a, b, c)
            else:
                vals = {"a": a, "b": b, "c": c}
            ans = two_step(a, b, c, op1, op2, order)
            if ans is not None:
                return tmpl.format(**vals), ans

    return (frame, gen)


PHRASED["two-step"] = [
    # double x, then add y  ->  (2 * x) + y
    _t(
        "double-then-add",
        "Double {a}, then add {b}. What do you get?",
        "*",
        "+",
        "L",
        lambda x, y, z: ({"a": x, "b": y}, 2, x, y),
    ),
    # triple x, then subtract y  ->  (3 * x) - y
    _t(
        "triple-then-subtract",
        "Triple {a} and then subtract {b}. What is the result?",
        "*",
        "-",
        "L",
        lambda x, y, z: ({"a": x, "b": y}, 3, x, y),
    ),
    _t("add-then-multiply", "Add {a} and {b}, then multiply the result by {c}.", "+", "*", "L"),
    _t("multiply-then-subtract", "Multiply {a} by {b}, then subtract {c}. What do you get?", "*", "-", "L"),
    # subtract b from a (a - b), then add c
    _t("subtract-from-then-add", "Subtract {b} from {a}, then add {c}. What is the answer?", "-", "+", "L"),
    _t("sum-then-take-away", "Take the sum of {a} and {b} and subtract {c} from it.", "+", "-", "L"),
    # c more than the product of a and b  ->  (a * b) + c
    _t("more-than-product", "What is {c} more than the product of {a} and {b}?", "*", "+", "L"),
    _t(
        "start-add-take",
        "Start with {a}, add {b}, then take away {c}. What number do you end with?",
        "+",
        "-",
        "L",
    ),
    # a times the difference between b and c  ->  a * (b - c)
    _t("times-difference", "What is {a} times the difference between {b} and {c}?", "*", "-", "R"),
    # x less than the sum of y and z  ->  (y + z) - x
    _t(
        "less-than-sum",
        "What is {a} less than the sum of {b} and {c}?",
        "+",
        "-",
        "L",
        lambda x, y, z: ({"a": x, "b": y, "c": z}, y, z, x),
    ),
    _t("product-then-add", "Find the product of {a} and {b}, then add {c} to it.", "*", "+", "L"),
    # take b away from a (a - b), multiply what is left by c
    _t("take-away-then-multiply", "Take {b} away from {a} and multiply what is left by {c}.", "-", "*", "L"),
]


def phrased_item(op, idx, order):
    frame, gen = order[idx]
    text, ans = gen()
    return text, ans, "phr-" + frame


# ---------------------------------------------------------------- word form


def _w(frame, tmpl, pair, fn):
    def gen():
        a, b = pair()
        n, p, q = person()
        return tmpl.format(a=a, b=b, n=n, p=p, q=q, P=p.capitalize()), fn(a, b)

    return (frame, gen)


ADD = lambda a, b: a + b  # noqa: E731
SUB = lambda a, b: a - b  # noqa: E731
MUL = lambda a, b: a * b  # noqa: E731

WORD = {
    "add": [
        _w(
            "cooking",
            "{n} puts {a} strawberries in a fruit salad and then adds {b} blueberries. How many berries are in the salad?",
            add_pair,
            ADD,
        ),
        _w(
            "sports",
            "In a basketball game, {n} scored {a} points in the first half and {b} points in the second half. How many points did {n} score in all?",
            add_pair,
            ADD,
        ),
        _w(
            "garden",
            "{n} planted {a} sunflower seeds on Monday and {b} more on Tuesday. How many seeds did {n} plant altogether?",
            add_pair,
            ADD,
        ),
        _w(
            "library",
            "{n} read {a} pages of a library book in the morning and {b} pages in the evening. How many pages did {n} read that day?",
            add_pair,
            ADD,
        ),
        _w(
            "train",
            "A train leaves the station with {a} passengers. At the next stop {b} more people get on and nobody gets off. How many passengers are on the train now?",
            add_pair,
            ADD,
        ),
        _w(
            "money",
            "{n} had {a} dollars saved and got {b} dollars as a birthday present. How many dollars does {n} have now?",
            add_pair,
            ADD,
        ),
        _w(
            "animals",
            "A farm has {a} sheep and {b} goats. How many sheep and goats are there in total?",
            add_pair,
            ADD,
        ),
        _w(
            "classroom",
            "A classroom has {a} girls and {b} boys. How many children are in the classroom?",
            add_pair,
            ADD,
        ),
        _w(
            "weather",
            "On Monday {a} millimetres of rain fell, and on Tuesday {b} millimetres fell. How many millimetres of rain fell on the two days?",
            add_pair,
            ADD,
        ),
        _w(
            "beach",
            "{n} found {a} shells at the beach and a friend found {b}. How many shells did they find together?",
            add_pair,
            ADD,
        ),
        _w(
            "choir",
            "The school choir has {a} singers, and {b} new singers join this term. How many singers does the choir have now?",
            add_pair,
            ADD,
        ),
        _w(
            "bakery",
            "A bakery sold {a} croissants before noon and {b} croissants after noon. How many croissants did it sell that day?",
            add_pair,
            ADD,
        ),
        _w(
            "fishing",
            "{n} caught {a} fish on Saturday and {b} fish on Sunday. How many fish did {n} catch over the weekend?",
            add_pair,
            ADD,
        ),
        _w(
            "party",
            "{n} blew up {a} red balloons and {b} blue balloons for a party. How many balloons did {n} blow up?",
            add_pair,
            ADD,
        ),
        _w(
            "art",
            "{n} has {a} crayons and buys a box with {b} more. How many crayons does {n} have now?",
            add_pair,
            ADD,
        ),
        _w(
            "bus-trip",
            "A bus drove {a} kilometres before lunch and {b} kilometres after lunch. How many kilometres did it drive in all?",
            add_pair,
            ADD,
        ),
    ],
    "subtract": [
        _w(
            "cooking",
            "{n} baked {a} cookies, and the family ate {b} of them. How many cookies are left?",
            sub_pair,
            SUB,
        ),
        _w(
            "sports",
            "A football club had {a} balls at the start of the season and lost {b} of them. How many balls does the club have now?",
            sub_pair,
            SUB,
        ),
        _w(
            "garden",
            "There were {a} tomatoes on {n}'s plants, and {n} picked {b} of them. How many tomatoes are still on the plants?",
            sub_pair,
            SUB,
        ),
        _w(
            "library",
            "The library had {a} copies of a popular book, and {b} copies were borrowed today. How many copies are still on the shelf?",
            sub_pair,
            SUB,
        ),
        _w(
            "train",
            "A train had {a} passengers. At the next station {b} passengers got off and nobody got on. How many passengers are on the train now?",
            sub_pair,
            SUB,
        ),
        _w(
            "money",
            "{n} had {a} dollars and spent {b} dollars on a book. How many dollars does {n} have left?",
            sub_pair,
            SUB,
        ),
        _w(
            "animals",
            "There were {a} birds sitting on a fence. Then {b} of them flew away. How many birds are still on the fence?",
            sub_pair,
            SUB,
        ),
        _w(
            "classroom",
            "A class has {a} students. Today {b} of them are at home sick. How many students are in class today?",
            sub_pair,
            SUB,
        ),
        _w(
            "weather",
            "In the afternoon it was {a} degrees. By night the temperature had dropped by {b} degrees. What was the temperature at night, in degrees?",
            sub_pair,
            SUB,
        ),
        _w(
            "party",
            "{n} blew up {a} balloons for a party, and {b} of them popped. How many balloons did not pop?",
            sub_pair,
            SUB,
        ),
        _w(
            "bakery",
            "A bakery made {a} loaves of bread and sold {b} loaves. How many loaves were not sold?",
            sub_pair,
            SUB,
        ),
        _w(
            "reading",
            "{n} is reading a book with {a} pages and has read {b} of them so far. How many pages are left to read?",
            sub_pair,
            SUB,
        ),
        _w(
            "parking",
            "A car park has {a} spaces, and {b} of them are taken. How many spaces are free?",
            sub_pair,
            SUB,
        ),
        _w(
            "sweets",
            "{n} had {a} sweets and gave {b} of them to friends. How many sweets does {n} have now?",
            sub_pair,
            SUB,
        ),
        _w("age", "{n} is {a} years old. How old was {n} {b} years ago?", sub_pair, SUB),
        _w(
            "pond",
            "A pond had {a} ducks on it. Then {b} ducks walked off into the field. How many ducks are on the pond now?",
            sub_pair,
            SUB,
        ),
    ],
    "multiply": [
        _w(
            "cooking",
            "{n} makes {a} sandwiches and puts {b} slices of cheese in each one. How many slices of cheese does {n} use?",
            mul_pair,
            MUL,
        ),
        _w(
            "sports",
            "There are {a} teams in a tournament, and each team has {b} players. How many players are there in total?",
            mul_pair,
            MUL,
        ),
        _w(
            "garden",
            "{n} plants {a} rows of carrots with {b} carrots in each row. How many carrots did {n} plant?",
            mul_pair,
            MUL,
        ),
        _w(
            "library",
            "A library shelf has {a} rows with {b} books in each row. How many books are on the shelf?",
            mul_pair,
            MUL,
        ),
        _w(
            "train",
            "A train has {a} carriages, and each carriage has {b} windows on its left side. How many windows are on the left side of the train?",
            mul_pair,
            MUL,
        ),
        _w(
            "money",
            "{n} buys {a} notebooks that cost {b} dollars each. How many dollars does {n} spend?",
            mul_pair,
            MUL,
        ),
        _w(
            "animals",
            "A farmer has {a} hens, and each hen laid {b} eggs this week. How many eggs were laid this week?",
            mul_pair,
            MUL,
        ),
        _w(
            "classroom",
            "A classroom has {a} tables, and {b} children sit at each table. How many children are sitting at the tables?",
            mul_pair,
            MUL,
        ),
        _w(
            "weather",
            "Snow fell for {a} days, and each day {b} centimetres of snow fell. How many centimetres of snow fell in total?",
            mul_pair,
            MUL,
        ),
        _w(
            "bakery",
            "A baker fills {a} trays with {b} muffins on each tray. How many muffins are there?",
            mul_pair,
            MUL,
        ),
        _w(
            "school-shop",
            "{n} buys {a} packs of pencils with {b} pencils in each pack. How many pencils does {n} buy?",
            mul_pair,
            MUL,
        ),
        _w(
            "savings",
            "{n} puts {b} coins in a piggy bank every week for {a} weeks. How many coins does {n} put in?",
            mul_pair,
            MUL,
        ),
        _w(
            "choir",
            "A choir stands in {a} rows with {b} singers in each row. How many singers are in the choir?",
            mul_pair,
            MUL,
        ),
        _w(
            "bicycles",
            "There are {a} bicycles in a rack, and each bicycle has {b} wheels. How many wheels are there altogether?",
            lambda: (rng.randint(2, 12), 2),
            MUL,
        ),
        _w(
            "fruit",
            "{n} has {a} bags with {b} apples in each bag. How many apples does {n} have?",
            mul_pair,
            MUL,
        ),
        _w(
            "stickers",
            "A sticker sheet has {a} rows of {b} stickers. How many stickers are on the sheet?",
            mul_pair,
            MUL,
        ),
    ],
}


def _ws(frame, tmpl, op1, op2, order, remap=None):
    """Two-step word template. remap(a, b, c) -> (text_vals, a', b', c')."""

    def gen():
        while True:
            a, b, c = n220(), n220(), n220()
            if remap is not None:
                vals, a, b, c = remap(a, b, c)
            else:
                vals = {"a": a, "b": b, "c": c}
            ans = two_step(a, b, c, op1, op2, order)
            if ans is not None and ans > 0:  # stories: avoid a zero answer
                n, p, q = person()
                return tmpl.format(n=n, p=p, q=q, P=p.capitalize(), **vals), ans

    return (frame, gen)


WORD["two-step"] = [
    # a + (b * c): has a, buys b packs of c
    _ws(
        "stickers",
        "{n} has {a} stickers and buys {b} packs with {c} stickers in each pack. How many stickers does {n} have now?",
        "+",
        "*",
        "R",
    ),
    # (a * b) - c
    _ws(
        "bakery",
        "A baker makes {a} trays of muffins with {b} muffins on each tray and sells {c} of them. How many muffins are left?",
        "*",
        "-",
        "L",
    ),
    # (a - b) + c
    _ws(
        "bus",
        "A bus has {a} passengers. At a stop {b} people get off and {c} people get on. How many passengers are on the bus now?",
        "-",
        "+",
        "L",
    ),
    # (a + b) * c
    _ws(
        "garden",
        "{n} plants {a} red tulips and {b} yellow tulips in each of {c} flower beds. How many tulips does {n} plant in all?",
        "+",
        "*",
        "L",
    ),
    # (a + b) - c
    _ws(
        "money",
        "{n} has {a} dollars, earns {b} more dollars by washing cars, and then spends {c} dollars on lunch. How many dollars does {n} have now?",
        "+",
        "-",
        "L",
    ),
    # (a - b) + c
    _ws(
        "library",
        "A library shelf holds {a} books. In the morning {b} books are borrowed, and in the afternoon {c} books are put back. How many books are on the shelf now?",
        "-",
        "+",
        "L",
    ),
    # (a * b) + c
    _ws(
        "sports",
        "{n} scored {a} goals in each of {b} matches and then {c} goals in the final. How many goals did {n} score in total?",
        "*",
        "+",
        "L",
    ),
    # (a * b) - c
    _ws(
        "school-hall",
        "A school hall has {a} rows with {b} chairs in each row, and {c} of the chairs are broken. How many chairs are not broken?",
        "*",
        "-",
        "L",
    ),
    # (a * b) - c
    _ws(
        "farm",
        "On a farm, {a} hens each lay {b} eggs, and the farmer drops {c} eggs on the way home. How many eggs are not dropped?",
        "*",
        "-",
        "L",
    ),
    # (a + b) - c
    _ws(
        "fishing",
        "{n} catches {a} fish in the morning and {b} fish in the afternoon, then lets {c} of them go. How many fish does {n} keep?",
        "+",
        "-",
        "L",
    ),
    # (a + b) + c
    _ws(
        "weather",
        "It rained {a} millimetres on Monday, {b} millimetres on Tuesday and {c} millimetres on Wednesday. How many millimetres of rain fell over the three days?",
        "+",
        "+",
        "L",
    ),
    # (a * b) + c
    _ws(
        "cooking",
        "{n} bakes {a} batches of pancakes with {b} pancakes in each batch, and a neighbour brings {c} more pancakes. How many pancakes are there now?",
        "*",
        "+",
        "L",
    ),
    # a - (b * c): collects a, gives b to each of c friends
    _ws(
        "beach",
        "{n} collects {a} shells at the beach and gives {b} shells to each of {c} friends. How many shells does {n} have left?",
        "-",
        "*",
        "R",
    ),
    # (a - b) - c
    _ws(
        "train",
        "A train leaves with {a} passengers. At the first stop {b} passengers get off, and at the second stop {c} more get off. Nobody gets on. How many passengers are still on the train?",
        "-",
        "-",
        "L",
    ),
    # (a * b) + c
    _ws(
        "music",
        "{n} practises the violin for {a} minutes on each of {b} school days and then for {c} minutes at the weekend. How many minutes does {n} practise in all?",
        "*",
        "+",
        "L",
    ),
    # (a - b) * c  (price minus discount, times quantity)
    _ws(
        "shop",
        "A toy costs {a} dollars, but today it is {b} dollars cheaper. {n} buys {c} of these toys. How many dollars does {n} pay?",
        "-",
        "*",
        "L",
    ),
]


def word_item(op, idx, order):
    frame, gen = order[idx]
    text, ans = gen()
    return text, ans, frame


# ---------------------------------------------------------------- build


def build():
    rows = []
    seen = set()
    for op in OPERATIONS:
        steps = 2 if op == "two-step" else 1
        for form, count in PER_FORM.items():
            if form == "phrased":
                tmpls = list(PHRASED[op])
                rng.shuffle(tmpls)
                order = [tmpls[i % len(tmpls)] for i in range(count)]
            elif form == "word":
                tmpls = list(WORD[op])
                rng.shuffle(tmpls)
                order = [tmpls[i % len(tmpls)] for i in range(count)]
            offset = rng.randrange(len(EXPR_WRAPS))
            for i in range(count):
                for _attempt in range(1000):
                    expr = None
                    if form == "expression":
                        text, ans, frame, expr = expr_item(op, i + offset)
                    elif form == "phrased":
                        text, ans, frame = phrased_item(op, i, order)
                    else:
                        text, ans, frame = word_item(op, i, order)
                    if text not in seen:
                        break
                else:
                    raise RuntimeError("could not find a unique problem")
                seen.add(text)
                if expr is not None:  # independent check of symbolic answers
                    assert eval(expr.replace("×", "*").replace(" x ", " * ")) == ans, (expr, ans)
                rows.append(
                    {
                        "problem": text,
                        "answer": ans,
                        "meta": {
                            "operation": op,
                            "form": form,
                            "steps": steps,
                            "frame": frame,
                            "source": SOURCE,
                        },
                    }
                )
    rng.shuffle(rows)
    out = []
    for k, r in enumerate(rows):
        out.append(
            {
                "id": f"test-{k:04d}",
                "problem": r["problem"],
                "answer": str(int(r["answer"])),
                "meta": r["meta"],
            }
        )
    return out


def check(rows):
    assert len(rows) == 256
    c = Counter((r["meta"]["operation"], r["meta"]["form"]) for r in rows)
    for op in OPERATIONS:
        for form, count in PER_FORM.items():
            assert c[(op, form)] == count, (op, form, c[(op, form)])
    assert len({r["problem"] for r in rows}) == 256
    assert len({r["id"] for r in rows}) == 256
    for r in rows:
        assert r["answer"].isdigit() and int(r["answer"]) >= 0
    for op in OPERATIONS:
        frames = {
            r["meta"]["frame"] for r in rows if r["meta"]["operation"] == op and r["meta"]["form"] == "word"
        }
        phr = {
            r["meta"]["frame"]
            for r in rows
            if r["meta"]["operation"] == op and r["meta"]["form"] == "phrased"
        }
        assert len(frames) >= 12 and len(phr) >= 8, (op, len(frames), len(phr))


def main():
    rows = build()
    check(rows)
    with open(OUT, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
