"""The coach comparison's figures on frames small enough to check by hand."""

import pandas as pd
import pytest

from mappa.coach.compare import auc, compare_scores


def frame(scores: dict[str, float], agent_of: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {"action_id": a, "agent": agent_of[a], "trajectory_id": a.split("/")[0], "score": s}
        for a, s in scores.items()
    )


def test_auc_counts_pairs_and_ties_half():
    positive = pd.Series([True, True, False, False])
    assert auc(pd.Series([9.0, 8.0, 1.0, 2.0]), positive) == 1.0
    assert auc(pd.Series([1.0, 2.0, 9.0, 8.0]), positive) == 0.0
    assert auc(pd.Series([5.0, 5.0, 5.0, 5.0]), positive) == 0.5
    assert auc(pd.Series([9.0, 5.0, 5.0, 1.0]), positive) == 0.875  # 3 of 4 pairs won, 1 tie
    assert auc(pd.Series([1.0, 2.0]), pd.Series([True, True])) is None


def test_agreement_difference_and_separation_per_agent_and_kind():
    agents = {"t1/a": "solver", "t2/a": "solver", "t3/a": "solver", "t1/b": "verifier", "t2/b": "verifier"}
    base = frame({"t1/a": 2.0, "t2/a": 5.0, "t3/a": 9.0, "t1/b": 7.0, "t2/b": 7.0}, agents)
    other = frame({"t1/a": 1.0, "t2/a": 6.0, "t3/a": 10.0, "t1/b": 3.0, "t2/b": 8.0}, agents)
    outcomes = {"t1": False, "t2": False, "t3": True}
    kinds = {"t1": "algebra", "t2": "algebra", "t3": "geometry"}
    rows = {(r["agent"], r.get("kind")): r for r in compare_scores(base, other, outcomes, kinds)}
    solver = rows[("solver", None)]
    assert (
        solver["n"] == 3
        and solver["spearman"] == 1.0
        and solver["pearson"] == pytest.approx(0.9893, abs=1e-4)
    )
    assert solver["mean_diff"] == pytest.approx(1 / 3, abs=1e-4)
    assert solver["auc_base"] == solver["auc_other"] == 1.0  # t3 succeeded and scored highest by both
    verifier = rows[("verifier", None)]
    assert verifier["pearson"] is None and verifier["spearman"] is None  # the run's coach gave one score
    assert verifier["auc_base"] is None  # no verifier action of a trajectory that succeeded
    assert rows[("solver", "algebra")]["n"] == 2 and rows[("solver", "geometry")]["n"] == 1
