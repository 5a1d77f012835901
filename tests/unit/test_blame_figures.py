"""Blame accuracy, innocent-seat and reporter penalties (`mappa.core.blame`) on hand-computed pairs."""

import pytest

from mappa.core.blame import BlamePair, blame_rows

SEATS = ("solver", "executor", "verifier")


def pair(coach, seat, original, corrupted, target, did_part=None):
    """Scores per seat as (solver, executor, verifier) tuples."""
    original, corrupted = dict(zip(SEATS, original)), dict(zip(SEATS, corrupted))
    return BlamePair(coach, seat, "wrong-number", SEATS, original, corrupted, *target, did_part or {})


def test_the_corrupted_seat_must_drop_strictly_more_than_every_other_seat():
    # the executor printed a wrong number: it fell 8 -> 1 (7); the solver upstream fell 1 (its text is the
    # same: the coach read the outcome), the verifier, who copied the number, fell 6
    blamed = pair("llm", "executor", (7, 8, 9), (6, 1, 3), (8, 1))
    assert blamed.drops() == {"solver": 1, "executor": 7, "verifier": 6} and blamed.blamed()
    assert blamed.innocent_drops() == {"upstream": [1], "downstream": [6]}
    # outcome-only: every seat 10 -> 0, a tie everywhere: not blamed
    tie = pair("outcome", "executor", (10, 10, 10), (0, 0, 0), (10, 0))
    assert not tie.blamed()


def test_rows_per_coach_and_seat_hand_computed():
    pairs = [
        pair("llm", "executor", (7, 8, 9), (6, 1, 3), (8, 1)),
        # the verifier worked around the bad program (did its part) yet lost 2; the executor lost only 1
        pair("llm", "executor", (5, 6, 8), (5, 5, 6), (6, 5), {"verifier": True}),
        pair("outcome", "executor", (10, 10, 10), (0, 0, 0), (10, 0)),
    ]
    llm, outcome = blame_rows(pairs)
    assert (llm["coach"], llm["seat"], llm["pairs"]) == ("llm", "executor", 2)
    assert llm["blame_accuracy"] == 0.5  # the first pair blamed, the second not (1 < 2)
    assert llm["corrupted_seat_drop"] == 4.0  # (7 + 1) / 2
    assert llm["innocent_penalty_upstream"] == 0.5  # solver: 1 and 0
    assert llm["innocent_penalty_downstream"] == 4.0  # verifier: 6 and 2
    assert llm["innocent_penalty"] == pytest.approx(2.25)
    assert (llm["reporter_penalty"], llm["reporters"]) == (2.0, 1)
    assert outcome["blame_accuracy"] == 0.0 and outcome["innocent_penalty"] == 10.0
    assert outcome["reporter_penalty"] is None and outcome["corruptions"] == ["wrong-number"]


def test_pairs_from_a_success_are_counted_apart():
    blamed = pair("llm", "verifier", (7, 8, 9), (7, 8, 2), (9, 2))
    missed = pair("llm", "verifier", (7, 8, 9), (7, 8, 9), (9, 9))
    from_success = BlamePair(**{**blamed.__dict__, "original_correct": True})
    (row,) = blame_rows([from_success, missed])
    assert row["blame_accuracy"] == 0.5
    assert row["pairs_from_success"] == 1 and row["blame_accuracy_from_success"] == 1.0
    (row,) = blame_rows([missed])
    assert row["pairs_from_success"] == 0 and row["blame_accuracy_from_success"] is None


def test_blame_accuracy_per_corruption_hand_computed():
    blamed = pair("llm", "executor", (7, 8, 9), (6, 1, 3), (8, 1))
    missed = BlamePair(
        **{**pair("llm", "executor", (5, 6, 8), (5, 5, 6), (6, 5)).__dict__, "corruption": "raises"}
    )
    also_missed = BlamePair(**{**missed.__dict__, "corruption": "raises"})
    (row,) = blame_rows([blamed, missed, also_missed])
    assert row["by_corruption"] == {
        "raises": {"pairs": 2, "blame_accuracy": 0.0},
        "wrong-number": {"pairs": 1, "blame_accuracy": 1.0},
    }
    assert row["blame_accuracy"] == pytest.approx(1 / 3)
