"""The statistics of a held-out lift (`mappa.core.lift_stats`) on hand-computed cases."""

import numpy as np
import pytest

from mappa.core.lift_stats import (
    bootstrap_interval,
    change_rows,
    difference,
    lift,
    lifts_by_kind,
    lifts_by_source,
    met,
    regressions,
    seed_interval,
    two_level_interval,
)


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


def test_the_seed_level_interval_is_students_t_over_the_per_seed_changes():
    # the held-out figures: +9.0 / +16.0 / +14.5 points over outcome-only, mean +13.17, sd 3.686,
    # standard error 2.128, t(2) = 4.303: [+4.0, +22.3]
    low, high = seed_interval([0.090, 0.160, 0.145])
    assert low == pytest.approx(0.0401, abs=2e-4) and high == pytest.approx(0.2232, abs=2e-4)
    assert seed_interval([0.1]) is None  # one seed: no spread to measure


def test_the_two_level_bootstrap_covers_the_spread_over_seeds_that_the_problem_bootstrap_misses():
    # seed 0 gained every problem, seed 1 none: over problems alone the mean 0.5 never moves; resampling
    # the two seeds gives 0, 0.5 or 1 with chances 1/4, 1/2, 1/4, so the 95% interval is [0, 1]
    differences = np.array([[1.0] * 8, [0.0] * 8])
    assert bootstrap_interval(differences) == (0.5, 0.5, 0.5)
    assert two_level_interval(differences) == (0.5, 0.0, 1.0)
    assert two_level_interval(np.ones((3, 5))) == (1.0, 1.0, 1.0)


def test_lift_and_difference_report_all_three_intervals():
    base = np.array([0, 0, 1, 1])
    after = np.array([[1, 0, 1, 0], [1, 1, 1, 1]])  # per seed: 0.0 and +0.5
    result = lift(base, after)
    low, high = result["seed_ci95"]  # mean 0.25, sd 0.354, se 0.25, t(1) = 12.706
    assert low == pytest.approx(0.25 - 3.1765, abs=1e-3) and high == pytest.approx(0.25 + 3.1765, abs=1e-3)
    assert len(result["ci95_seeds_problems"]) == 2
    assert set(difference(after, after)) >= {"ci95", "seed_ci95", "ci95_seeds_problems"}


def test_lifts_by_kind_split_the_problems_and_flag_a_kind_that_got_worse():
    kinds = ["add", "add", "add", "add", "multiply", "multiply", "multiply", "multiply"]
    base = np.array([0, 0, 1, 0, 1, 1, 1, 1])
    runs = {  # additions gained, every multiplication lost, in both seeds
        ("llm", 0): np.array([1, 1, 1, 0, 0, 0, 0, 0]),
        ("llm", 1): np.array([1, 1, 1, 1, 0, 0, 0, 0]),
    }
    report = lifts_by_kind(kinds, base, runs)
    assert report["add"]["problems"] == 4 and report["multiply"]["problems"] == 4
    add = report["add"]["sources"]["llm"]["vs_base"]
    assert add["per_seed"] == [0.5, 0.75] and add["gained"] == [2, 3] and add["lost"] == [0, 0]
    multiply = report["multiply"]["sources"]["llm"]["vs_base"]
    assert multiply["mean"] == -1.0 and multiply["ci95_seeds_problems"] == [-1.0, -1.0]
    assert regressions(report) == [
        {"kind": "multiply", "source": "llm", "change": -1.0, "ci95": [-1.0, -1.0]}
    ]
    with pytest.raises(ValueError, match="one kind per problem"):
        lifts_by_kind(kinds[:3], base, runs)


def test_a_target_is_met_only_when_the_seed_level_interval_is_above_zero():
    assert met({"mean": 0.13, "seed_ci95": [0.04, 0.22]}, at_least=0.10)
    assert not met({"mean": 0.073, "seed_ci95": [-0.03, 0.18]}, at_least=0.05)  # the blind file's
    assert not met({"mean": 0.13, "seed_ci95": None}, at_least=0.10)  # one seed
    assert not met({"mean": 0.08, "seed_ci95": [0.04, 0.12]}, at_least=0.10)


def test_change_rows_compare_two_teams_overall_and_per_kind():
    before = np.array([1, 0, 0, 1, 1, 1, 1, 1])
    after = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    kinds = ["add"] * 4 + ["multiply"] * 4
    everything, add, multiply = change_rows(before, after, kinds)
    assert everything | {"ci95": None} == {
        "kind": "all", "problems": 8, "before": 6, "after": 4, "change": -0.25, "ci95": None,
        "gained": 2, "lost": 4, "worse": False,
    }  # fmt: skip
    assert (add["before"], add["after"], add["change"], add["gained"], add["lost"]) == (2, 4, 0.5, 2, 0)
    assert multiply["change"] == -1.0 and multiply["ci95"] == [-1.0, -1.0] and multiply["worse"]
    assert [row["kind"] for row in change_rows(before, after)] == ["all"]
