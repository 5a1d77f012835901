"""Tests for mappa.envs.mathchat.problems: the CPU-sized problem generator, the shipped files and the loaders.

Answers are checked against independent computations: arithmetic by evaluating the question's expression
with a small exact evaluator, word problems by a formula per template applied to the problem's params.
"""

from __future__ import annotations

import ast
import json
import math
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import fsspec
import pandas as pd
import pytest

from mappa.core.types import Problem
from mappa.envs.mathchat.grading import grade_answer
from mappa.envs.mathchat.problems import (
    WORD_TEMPLATES,
    generate_problems,
    load_builtin,
    load_problems,
    write_jsonl,
)

ANSWER_RE = re.compile(r"^[1-9]\d*(/[1-9]\d*)?$")
F = Fraction

# template -> the answer from the problem's params, written independently of the generator
FORMULAS: dict[str, Any] = {
    "shopping_total": lambda p: sum(p[f"qty{i}"] * p[f"price{i}"] for i in range(len(p) // 2)),
    "shopping_change": lambda p: p["paid"] - p["qty"] * p["price"],
    "unit_price": lambda p: F(p["cost"], p["known"]) * p["wanted"],
    "distance": lambda p: p["s1"] * p["h1"] + p["s2"] * p["h2"],
    "savings": lambda p: F(p["goal"] - p["start"], p["weekly"]),
    "sharing": lambda p: F(p["total"] - p["kept"], p["friends"]),
    "fraction_sold": lambda p: p["total"] * (1 - F(1, p["d1"])) * (1 - F(1, p["d2"])),
    "age_future": lambda p: p["factor"] * p["child"] + p["years"],
    "age_sum": lambda p: F(p["sum"] - p["gap"], 2),
    "discount": lambda p: p["price"] * (1 - F(p["pct"], 100)),
    "percent_of": lambda p: p["group"] * (1 - F(p["pct"], 100)),
    "left_over": lambda p: p["count"] - p["box"] * (p["count"] // p["box"]),
    "boxes_needed": lambda p: math.ceil(F(p["people"], p["seats"])),
    "pizza_left": lambda p: 1 - F(p["first"] + p["second"], p["slices"]),
}
FRACTION_TEMPLATES = {"pizza_left"}


def _exact_eval(node: ast.AST) -> tuple[Fraction, int]:
    """(value, number of operators) of an expression of integers, + - * / and parentheses."""
    if isinstance(node, ast.Expression):
        return _exact_eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value), 0
    if isinstance(node, ast.BinOp):
        (left, n_left), (right, n_right) = _exact_eval(node.left), _exact_eval(node.right)
        ops = {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}
        value = left / right if isinstance(node.op, ast.Div) else ops[type(node.op)]
        return value, n_left + n_right + 1
    raise AssertionError(f"unexpected syntax in an arithmetic problem: {ast.dump(node)}")


def _value(answer: str) -> Fraction:
    assert ANSWER_RE.match(answer), answer
    return Fraction(answer)


@pytest.fixture(scope="module")
def pool() -> list[Problem]:
    return generate_problems(400, 7, "train") + generate_problems(200, 7, "eval")


def test_generation_is_deterministic_by_seed() -> None:
    first, again = generate_problems(40, 3, "train"), generate_problems(40, 3, "train")
    assert first == again
    assert [p.question for p in generate_problems(40, 4, "train")] != [p.question for p in first]
    assert generate_problems(10, 3, "train") == first[:10]


def test_ids_meta_and_answer_format(pool: list[Problem]) -> None:
    assert (
        pool[0].id == "cpu-train-0000" and pool[7].id == "cpu-train-0007" and pool[400].id == "cpu-eval-0000"
    )
    for problem in pool:
        assert {"kind", "template", "difficulty", "params", "split"} <= problem.meta.keys()
        assert isinstance(problem.meta["difficulty"], int) and 1 <= problem.meta["difficulty"] <= 5
        value = _value(problem.answer)
        assert value > 0 and str(value) == problem.answer  # lowest terms, no "4/1"
    kinds = {p.meta["kind"] for p in pool}
    assert kinds == {"arithmetic", "shopping", "rate", "sharing", "ages", "percent", "remainder", "fraction"}
    assert 0.2 < sum(p.meta["kind"] == "arithmetic" for p in pool) / len(pool) < 0.5


def test_arithmetic_answers_match_an_exact_evaluation(pool: list[Problem]) -> None:
    arithmetic = [p for p in pool if p.meta["kind"] == "arithmetic"]
    assert len(arithmetic) > 100
    for problem in arithmetic:
        expression = re.fullmatch(
            r"(?:Compute|What is|Evaluate|Calculate the value of) (.+)[.?]", problem.question
        )
        assert expression, problem.question
        value, operators = _exact_eval(ast.parse(expression.group(1), mode="eval"))
        assert value == _value(problem.answer), problem.question
        assert operators == problem.meta["difficulty"] >= 2


def test_word_answers_match_independent_formulas(pool: list[Problem]) -> None:
    assert set(FORMULAS) == set(WORD_TEMPLATES), "add a formula here for every new template"
    words = [p for p in pool if p.meta["kind"] != "arithmetic"]
    assert {p.meta["template"] for p in words} == set(WORD_TEMPLATES)
    for problem in words:
        params, template = problem.meta["params"], problem.meta["template"]
        assert Fraction(FORMULAS[template](params)) == _value(problem.answer), problem.question
        assert ("/" in problem.answer) == (template in FRACTION_TEMPLATES), problem.question
        for number in params.values():  # every number the answer depends on is in the question
            assert re.search(rf"(?<![\d.]){number}(?![\d])", problem.question), (number, problem.question)


def test_answers_grade_as_correct_against_themselves(pool: list[Problem]) -> None:
    for problem in pool[:150]:
        assert grade_answer(problem.answer, problem.answer), problem.answer
        assert grade_answer(f"so \\boxed{{{problem.answer}}}", problem.answer), problem.answer
    fraction = next(p for p in pool if "/" in p.answer)
    assert grade_answer(str(float(Fraction(fraction.answer))), fraction.answer)


def test_splits_are_disjoint_whatever_the_seeds() -> None:
    for train_seed, eval_seed in ((0, 1), (5, 5), (2, 9)):
        train, evaluation = (
            generate_problems(300, train_seed, "train"),
            generate_problems(100, eval_seed, "eval"),
        )
        assert not {p.question for p in train} & {p.question for p in evaluation}
        assert len({p.question for p in train}) == 300 and len({p.question for p in evaluation}) == 100


def test_bad_generation_arguments() -> None:
    with pytest.raises(ValueError, match="split"):
        generate_problems(3, 0, "test")
    with pytest.raises(ValueError, match="n >= 0"):
        generate_problems(-1, 0, "train")


def test_shipped_files_are_what_the_generator_makes() -> None:
    train, evaluation = load_builtin("train"), load_builtin("eval")
    assert (len(train), len(evaluation)) == (256, 64)
    for shipped, made in (
        (train, generate_problems(256, 0, "train")),
        (evaluation, generate_problems(64, 1, "eval")),
    ):
        assert [(p.id, p.question, p.answer) for p in shipped] == [(p.id, p.question, p.answer) for p in made]
        assert all(s.meta.items() >= m.meta.items() for s, m in zip(shipped, made, strict=True))
    assert not {p.question for p in train} & {p.question for p in evaluation}
    with pytest.raises(ValueError, match="split"):
        load_builtin("test")


# ---------------------------------------------------------------- loaders

ROWS = [
    {"ID": "2024-I-1", "Problem": "What is 1+1?", "Answer": 2, "Solution": "1+1=2"},
    {"ID": "2024-I-2", "Problem": "What is 3/4 of 8?", "Answer": "6"},
]


def test_load_json_list_and_wrapped(tmp_path: Path) -> None:
    (tmp_path / "aime.json").write_text(json.dumps(ROWS))
    (tmp_path / "wrapped.json").write_text(json.dumps({"problems": [{"question": "q?", "answer": 7.0}]}))
    (tmp_path / "data.json").write_text(json.dumps({"data": [{"problem": "p?", "answer": "1/2", "idx": 3}]}))
    problems = load_problems(tmp_path / "aime.json")
    assert [(p.id, p.question, p.answer) for p in problems] == [
        ("2024-I-1", "What is 1+1?", "2"),
        ("2024-I-2", "What is 3/4 of 8?", "6"),
    ]
    assert problems[0].meta["Solution"] == "1+1=2" and problems[0].meta["row"] == 0
    assert [(p.id, p.question, p.answer) for p in load_problems(str(tmp_path / "wrapped.json"))] == [
        ("wrapped-0", "q?", "7")
    ]
    assert load_problems(tmp_path / "data.json")[0].id == "3"


def test_load_jsonl_with_limit_and_blank_lines(tmp_path: Path) -> None:
    lines = [json.dumps({"problem": f"q{i}?", "answer": i}) for i in range(5)]
    (tmp_path / "amc.jsonl").write_text("\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:]) + "\n")
    problems = load_problems(tmp_path / "amc.jsonl", limit=3)
    assert [(p.id, p.question, p.answer) for p in problems] == [
        ("amc-0", "q0?", "0"),
        ("amc-1", "q1?", "1"),
        ("amc-2", "q2?", "2"),
    ]


def test_load_parquet(tmp_path: Path) -> None:
    frame = pd.DataFrame({"id": [10, 11], "problem": ["a?", "b?"], "answer": [204, 25], "year": [2024, 2025]})
    frame.to_parquet(tmp_path / "aime24.parquet")
    frame.drop(columns="id").to_parquet(tmp_path / "noid.parquet")
    problems = load_problems(tmp_path / "aime24.parquet")
    assert [(p.id, p.question, p.answer) for p in problems] == [("10", "a?", "204"), ("11", "b?", "25")]
    assert problems[1].meta["year"] == 2025
    assert [p.id for p in load_problems(tmp_path / "noid.parquet")] == ["noid-0", "noid-1"]


def test_write_jsonl_round_trips_locally_and_through_fsspec_urls(tmp_path: Path) -> None:
    problems = generate_problems(12, 0, "eval")
    for path in (
        tmp_path / "sub" / "out.jsonl",
        f"file://{tmp_path}/url.jsonl",
        "memory://mappa-test/p.jsonl",
    ):
        write_jsonl(problems, path)
        loaded = load_problems(path)
        assert [(p.id, p.question, p.answer) for p in loaded] == [
            (p.id, p.question, p.answer) for p in problems
        ]
        assert all(got.meta.items() >= want.meta.items() for got, want in zip(loaded, problems, strict=True))
    fsspec.filesystem("memory").rm("/mappa-test", recursive=True)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.jsonl", None, r"missing\.jsonl: file not found"),
        ("problems.csv", "problem,answer\n", r"problems\.csv: unknown extension '\.csv'"),
        ("empty.jsonl", "", r"empty\.jsonl: the file holds no problems"),
        ("empty.json", "[]", r"empty\.json: the file holds no problems"),
        (
            "noanswer.jsonl",
            '{"problem": "a", "answer": 1}\n{"problem": "b"}\n',
            r"row 1 has no answer.*`answer`",
        ),
        ("noproblem.json", '[{"text": "a", "answer": 1}]', r"row 0 has no problem/question.*'text'"),
        (
            "badline.jsonl",
            '{"problem": "a", "answer": 1}\n{oops\n',
            r"badline\.jsonl: line 2 is not valid JSON",
        ),
        ("lines.json", '{"problem": "a", "answer": 1}\n{"problem": "b", "answer": 2}\n', r"name it \.jsonl"),
        ("object.json", '{"rows": []}', r"under 'problems' or 'data'"),
        ("scalars.json", "[1, 2]", r"row 0 is a int, not an object"),
        (
            "dupes.jsonl",
            '{"id": 1, "problem": "a", "answer": 1}\n{"id": 1, "problem": "b", "answer": 2}\n',
            "'1'",
        ),
    ],
)
def test_bad_files_raise_clear_errors(tmp_path: Path, name: str, content: str | None, message: str) -> None:
    if content is not None:
        (tmp_path / name).write_text(content)
    with pytest.raises(ValueError, match=message):
        load_problems(tmp_path / name)
