"""The MathChat rubric credits content, not form: a placeholder box earns nothing, the right number
unboxed a little, a faithfully reported upstream mistake is blamed upstream (`mappa.coach.rubric`)."""

from __future__ import annotations

import asyncio

import pytest
from test_coach import ROLES, _ran, _trajectory

from mappa.coach.prompt import build_requests
from mappa.coach.rubric import RubricCoach
from mappa.envs.mathchat import SPEC as MATHCHAT
from mappa.envs.mathchat.rubric import is_placeholder


def _verdicts(trajectory, use_ground_truth: bool) -> list[tuple[str, float]]:
    requests = build_requests(trajectory, "task", ROLES, "mathchat", use_ground_truth)
    scores = asyncio.run(RubricCoach(use_ground_truth, MATHCHAT).score(requests))
    return [(s.rationale.split(":")[0].removeprefix("rule "), s.score) for s in scores]


@pytest.mark.parametrize("use_gt", [True, False])
def test_a_placeholder_box_earns_nothing(use_gt):
    trajectory = _trajectory(verifier="The answer is \\boxed{answer}.", final="answer", correct=False)
    assert _verdicts(trajectory, use_gt)[2] == ("verifier.placeholder", 0)


def test_the_right_number_unboxed_earns_a_little_and_boxed_earns_all():
    unboxed = _trajectory(verifier="The answer is 14.", final=None, correct=False)
    assert _verdicts(unboxed, True)[2] == ("verifier.gt_unboxed_right", 3)
    assert _verdicts(unboxed, False)[2] == ("verifier.unboxed_agrees", 2)
    wrong_unboxed = _trajectory(verifier="The answer is 15.", final=None, correct=False)
    assert _verdicts(wrong_unboxed, True)[2] == ("verifier.no_boxed", 0)
    assert _verdicts(_trajectory(), True)[2] == ("verifier.gt_correct", 10)


def test_a_reported_upstream_mistake_is_blamed_upstream():
    reported = _trajectory(executor_out="20\n", verifier="\\boxed{20}", final="20", correct=False)
    assert _verdicts(reported, True)[1:] == [("executor.gt_led_wrong", 2), ("verifier.gt_reported", 3)]
    invented = _trajectory(executor_out="20\n", verifier="\\boxed{21}", final="21", correct=False)
    assert _verdicts(invented, True)[1:] == [("executor.gt_printed_wrong", 3), ("verifier.gt_wrong", 1)]


def test_with_ground_truth_an_executor_that_printed_a_wrong_number_scores_low():
    trajectory = _trajectory(executor_result=_ran("13\n"), verifier="\\boxed{12}", final="12", correct=False)
    assert _verdicts(trajectory, True)[1] == ("executor.gt_printed_wrong", 3)
    assert _verdicts(trajectory, False)[1] == ("executor.printed", 7)


@pytest.mark.parametrize(
    ("boxed", "reference", "placeholder"),
    [
        ("answer", "14", True),
        ("x", "14", True),
        ("14", "14", False),
        ("3/4", "3/4", False),
        ("", "14", False),
        ("Paris", "Paris", False),
    ],
)
def test_is_placeholder(boxed, reference, placeholder):
    assert is_placeholder(boxed, reference) is placeholder
