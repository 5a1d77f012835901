"""The learning benchmark's statistics (`benchmarks/lift_stats.py`) on hand-computed cases."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from lift_stats import bootstrap_interval, difference, lift, lifts_by_source  # noqa: E402


def test_lift_counts_gains_and_losses_per_seed_and_averages_over_seeds():
    base = np.array([0, 0, 1, 1])
    after = np.array([[1, 0, 1, 0], [1, 1, 1, 1]])
    result = lift(base, after)
    assert result["mean"] == pytest.approx(0.25) and result["per_seed"] == [0.0, 0.5]
    assert result["gained"] == [1, 2] and result["lost"] == [1, 0] and result["problems"] == 4
    low, high = result["ci95"]
    assert low <= 0.25 <= high
    (low0, high0), (low1, high1) = result["per_seed_ci95"]
    assert low0 < 0.0 < high0  # seed 0: one gained, one lost
    assert 0.0 <= low1 <= 0.5 <= high1 <= 1.0  # seed 1: two gained, none lost: never below 0


def test_the_interval_is_a_point_when_every_problem_moves_alike_and_wide_when_they_differ():
    assert bootstrap_interval(np.ones((3, 50))) == (1.0, 1.0, 1.0)
    mixed = np.tile([1.0, -1.0], 100)  # mean 0: the interval straddles it, about +-2 standard errors
    mean, low, high = bootstrap_interval(mixed[None, :])
    assert mean == 0.0 and -0.16 < low < -0.1 and 0.1 < high < 0.16


def test_two_sources_are_compared_paired_by_seed_and_problem():
    one = np.array([[1, 1, 0, 0], [1, 1, 1, 0]])
    other = np.array([[0, 1, 0, 0], [1, 0, 0, 0]])
    result = difference(one, other)
    assert result["mean"] == pytest.approx(0.375) and result["per_seed"] == [0.25, 0.5]
    assert len(result["per_seed_ci95"]) == 2
    with pytest.raises(ValueError, match="same seeds and problems"):
        difference(one, other[:1])


def test_lifts_by_source_pair_each_source_with_outcome_only_on_the_seeds_both_have():
    base = np.array([0, 0, 1, 1])
    runs = {
        ("outcome", 0): np.array([1, 0, 1, 1]),
        ("llm", 1): np.array([1, 1, 1, 1]),
        ("llm", 0): np.array([1, 1, 1, 0]),
    }
    report = lifts_by_source(base, runs)
    assert list(report) == ["llm", "outcome"]  # outcome-only last
    assert report["llm"]["seeds"] == [0, 1] and report["llm"]["vs_base"]["per_seed"] == [0.25, 0.5]
    against = report["llm"]["vs_outcome"]  # seed 0 only: 1110 against 1011
    assert against["seeds"] == [0] and against["mean"] == pytest.approx(0.0)
    assert "vs_outcome" not in report["outcome"]
