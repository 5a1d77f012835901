"""The kind of a math problem (`mappa.envs.mathchat.kinds`): meta first, else the numbers and the wording."""

import pytest

from mappa.core.types import Problem
from mappa.envs.mathchat.kinds import problem_kind


@pytest.mark.parametrize(
    ("question", "answer", "meta", "kind"),
    [
        ("What is 7 + 5?", "12", {}, "add/expression"),
        ("Compute 6 * 3.", "18", {}, "multiply/expression"),
        ("Find the product of 6 and 3.", "18", {}, "multiply/phrased"),
        ("What is 12 minus 4?", "8", {}, "subtract/phrased"),
        ("What is 2 plus 2?", "4", {}, "add/phrased"),  # 2 + 2 = 2 * 2: the wording decides
        ("What is 2 times 2?", "4", {}, "multiply/phrased"),
        (
            "Maya has 3 bags with 4 apples in each bag. How many apples does Maya have?",
            "12",
            {},
            "multiply/word",
        ),
        (
            "Omar had 15 stamps and gave 6 to Lena. How many stamps does Omar have left?",
            "9",
            {},
            "subtract/word",
        ),
        ("Compute 3 * 4 + 5.", "17", {}, "two-step/expression"),
        (
            "Share 12 sweets equally among 4 friends. How many sweets does each friend get?",
            "3",
            {},
            "divide/word",
        ),
        # the generators' meta: numbers and arithmetic/word
        ("Add 7 and 5.", "12", {"kind": "arithmetic", "numbers": [7, 5]}, "add/phrased"),
        ("Hana reads 9 pages.", "18", {"kind": "word", "numbers": [9, 2], "difficulty": 1}, "multiply/word"),
        ("Two steps here", "30", {"kind": "word", "difficulty": 2}, "two-step/word"),
        # a file's meta names the operation (the blind files: kind; the test file: operation and form)
        ("Tendai rides 33 minutes, then walks 38. How long?", "71", {"kind": "add"}, "add/word"),
        ("What is 5 x 4?", "20", {"operation": "multiply", "form": "expression"}, "multiply/expression"),
        ("What is one half of a third?", "1/6", {}, "other/phrased"),
    ],
)
def test_problem_kind(question, answer, meta, kind):
    assert problem_kind(Problem("p", question, answer, meta)) == kind
