"""benchmarks/seat_drift.py on two hand-made evaluations of the same three problems."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from seat_drift import compare  # noqa: E402


def write_evaluation(
    folder: Path, correct: list[bool], solver_part: list[bool], replies: list[tuple[str, str]]
):
    folder.mkdir(parents=True)
    questions = ["What is 2 times 3?", "What is 4 times 5?", "What is 7 plus 1?"]
    kinds = ["multiply/phrased", "multiply/phrased", "add/phrased"]
    ids = [f"{folder.name}-{i}" for i in range(3)]
    pd.DataFrame(
        {
            "question": questions,
            "kind": kinds,
            "trajectory_id": ids,
            "correct": correct,
            "seat_solver": solver_part,
        }
    ).to_parquet(folder / "results.parquet")
    rows = [
        {"trajectory_id": tid, "agent": "solver", "response": text, "finish_reason": finish}
        for tid, (text, finish) in zip(ids, replies, strict=True)
    ]
    pd.DataFrame(rows).to_parquet(folder / "trajectories.parquet")


def test_seat_drift_marks_a_kind_worse_when_its_interval_lies_below_zero(tmp_path):
    write_evaluation(tmp_path / "before", [True, True, True], [True] * 3, [("6", "stop")] * 3)
    write_evaluation(tmp_path / "after", [False, False, True], [True] * 3, [("6", "stop")] * 3)
    operation = {
        row["kind"]: row
        for row in compare(tmp_path / "before", tmp_path / "after", None)["by_kind"]["operation"]
    }
    assert operation["multiply"]["change"] == -1.0 and operation["multiply"]["worse"]
    assert operation["add"]["change"] == 0.0 and not operation["add"]["worse"]


def test_seat_drift_counts_each_seats_part_cuts_length_and_preamble_on_the_kind_asked(tmp_path):
    write_evaluation(
        tmp_path / "before",
        [True, False, True],
        [True, True, False],
        [("2 * 3 = 6", "stop"), ("To solve this problem, 4 * 5 = 20", "length"), ("8", "stop")],
    )
    write_evaluation(
        tmp_path / "after",
        [False, True, True],
        [False, False, True],
        [("To solve this problem, we need", "length"), ("Let's break it down: 4", "length"), ("8", "stop")],
    )
    result = compare(tmp_path / "before", tmp_path / "after", "multiply")
    assert result["problems"] == 2 and (result["gained"], result["lost"]) == (1, 1)
    operation = {row["kind"]: row for row in result["by_kind"]["operation"]}
    assert set(operation) == {"all", "multiply"} and operation["multiply"]["problems"] == 2
    assert (operation["multiply"]["before"], operation["multiply"]["after"]) == (1, 1)
    assert operation["multiply"]["change"] == 0.0 and not operation["multiply"]["worse"]
    assert [row["kind"] for row in result["by_kind"]["form"]] == ["all", "phrased"]
    solver = result["seats"]["solver"]
    assert solver["before"]["did_its_part"] == 1.0 and solver["after"]["did_its_part"] == 0.0
    assert solver["before"]["cut_at_token_limit"] == 0.5 and solver["after"]["cut_at_token_limit"] == 1.0
    assert solver["before"]["stock_preamble"] == 0.5 and solver["after"]["stock_preamble"] == 1.0
    assert (
        solver["after"]["mean_reply_chars"]
        == (len("To solve this problem, we need") + len("Let's break it down: 4")) / 2
    )
