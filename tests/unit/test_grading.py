"""Tests for mappa.envs.mathchat.grading: boxed-answer extraction and answer grading (also off the main
thread)."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mappa.envs.mathchat.grading import extract_boxed, extract_flexible, grade_answer, normalize_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so the answer is \\boxed{42}.", "42"),
        ("\\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{1}{\\sqrt{2}}"),
        ("$\\boxed{ {a} + {b} }$", "{a} + {b}"),
        ("\\fbox{7}", "7"),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("\\boxed 5$ done", "5"),
        ("\\boxed{}", ""),
        ("no box at all: 42", None),
        ("", None),
        ("\\boxed{3} and a truncated \\boxed{4", None),
    ],
)
def test_extract_boxed(text: str, expected: str | None) -> None:
    assert extract_boxed(text) == expected


GRADE_CASES = [
    ("\\boxed{42}", "42", True),
    ("42", "42", True),
    ("\\boxed{\\frac{1}{2}}", "0.5", True),
    ("\\frac{1}{2}", "1/2", True),
    ("0.375", "3/8", True),
    ("\\boxed{\\dfrac{3}{8}}", "3/8", True),
    ("\\boxed{41}", "42", False),
    ("1,000", "1000", True),
    ("\\boxed{1,000}", "1000", True),
    ("\\boxed{42.0}", "42", True),
    ("\\boxed{\\$15}", "15", True),
    ("\\boxed{2^{10}}", "1024", True),
    ("the answer is 42 but not boxed \\boxed{", "42", False),
    ("\\boxed{x = 5}", "5", True),
    ("\\boxed{6}", "5/8", False),
]


@pytest.mark.parametrize(("predicted", "gold", "expected"), GRADE_CASES)
def test_grade_answer(predicted: str, gold: str, expected: bool) -> None:
    assert grade_answer(predicted, gold) is expected


@pytest.mark.parametrize(
    ("predicted", "gold"), [(None, "42"), ("", "42"), ("   ", "42"), ("42", ""), ("\\boxed{}", "0")]
)
def test_missing_answers_grade_false(predicted: str | None, gold: str) -> None:
    assert grade_answer(predicted, gold) is False


def test_normalize_answer() -> None:
    assert normalize_answer(" $1,234.0$ ") == "1234"
    assert normalize_answer("\\boxed{\\dfrac{1}{2}}") == "\\frac{1}{2}"
    assert normalize_answer("12,34") == "12,34"  # not a thousands separator: a pair stays a pair


def test_grading_in_worker_threads_matches_main_thread() -> None:
    assert threading.current_thread() is threading.main_thread()
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda case: grade_answer(case[0], case[1]), GRADE_CASES))
    assert results == [expected for _, _, expected in GRADE_CASES]


def test_grading_inside_asyncio_tasks() -> None:
    async def grade_all() -> list[bool]:
        jobs = [asyncio.to_thread(grade_answer, "\\boxed{\\frac{1}{2}}", "0.5") for _ in range(4)]
        return [*await asyncio.gather(*jobs), grade_answer("\\boxed{0.5}", "1/2")]

    assert asyncio.run(grade_all()) == [True] * 5


@pytest.mark.parametrize("huge", ["\\boxed{10^{10^{10}}}", "\\boxed{9^{9^{9^{9}}}}", "\\boxed{100000!}"])
def test_costly_answers_are_refused_quickly_off_the_main_thread(huge: str) -> None:
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(grade_answer, huge, "10").result(timeout=10) is False
    assert time.monotonic() - start < 3


def test_long_answers_fall_back_to_string_comparison() -> None:
    long_answer = "1+" * 400 + "1"
    assert grade_answer(long_answer, long_answer) is True
    assert grade_answer(long_answer, "401") is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The result of 5 * 8 is 40, which is the output.", "40"),
        ("It costs 1,250 dollars.", "1250"),
        ("from 3,4 to 12.", "12"),
        ("so x = -2.5.", "-2.5"),
        ("half is 1/2", "1/2"),
        ("\\boxed{7} or 9", "7"),
        ("no number", None),
    ],
)
def test_extract_flexible_reads_the_last_number_without_the_sentences_punctuation(text, expected) -> None:
    assert extract_flexible(text) == expected
