"""Tests for mappa.envs.dsbench.grading: metrics on hand-computed arrays, submission checks and fair scores.

Grading tests use the small iris tasks (and breast cancer for roc_auc), so the reference model is cheap.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mappa.envs.dsbench.grading import (
    compute_metric,
    grade_submission,
    reference_scores,
    relative_performance,
)
from mappa.envs.dsbench.task_sets import builtin_tasks, hidden_labels, public_frames

TASKS = {task.name: task for task in builtin_tasks("train") + builtin_tasks("eval")}
SPECIES = TASKS["iris-species"]  # accuracy
PETAL = TASKS["iris-petal-width"]  # mae
DIAGNOSIS = TASKS["breast-cancer-diagnosis"]  # roc_auc


@pytest.mark.parametrize(
    ("metric", "y_true", "y_pred", "classes", "expected"),
    [
        ("rmse", [1, 2], [1, 4], None, math.sqrt(2)),
        ("rmse", [0, 0, 0, 0], [1, -1, 1, -1], None, 1.0),
        ("mae", [1, 2, 3], [2, 2, 5], None, 1.0),
        ("accuracy", ["a", "b", "c", "a"], ["a", "b", "a", "a"], None, 0.75),
        ("accuracy", [1, 2, 3], ["1", "2.0", " 3 "], None, 1.0),  # labels compare as canonical text
        # binary f1 of the positive class "yes": tp 1, fp 1, fn 1 -> precision 1/2, recall 1/2
        ("f1", ["no", "yes", "yes", "no"], ["yes", "yes", "no", "no"], ("no", "yes"), 0.5),
        # positive class "no" (last of classes): tp 1, fp 1, fn 1 as well
        ("f1", ["no", "no", "yes", "yes"], ["no", "yes", "no", "yes"], ("yes", "no"), 0.5),
        # macro f1: a 2/3 (p 1, r 1/2), b 2/3 (p 1/2, r 1), c 1 -> 7/9
        ("f1", ["a", "a", "b", "c"], ["a", "b", "b", "c"], ("a", "b", "c"), 7 / 9),
        # roc_auc: of the 4 (positive, negative) pairs, 3 are ranked right
        ("roc_auc", [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], None, 0.75),
        ("roc_auc", ["b", "m", "m", "b"], [0.2, 0.9, 0.6, 0.1], ("b", "m"), 1.0),
    ],
)
def test_compute_metric_by_hand(metric, y_true, y_pred, classes, expected) -> None:
    assert compute_metric(metric, y_true, y_pred, classes) == pytest.approx(expected)


def test_compute_metric_refuses_bad_calls() -> None:
    with pytest.raises(ValueError, match="known: rmse, mae, f1, accuracy, roc_auc"):
        compute_metric("r2", [1], [1])
    with pytest.raises(ValueError, match="same"):
        compute_metric("rmse", [1, 2], [1])
    with pytest.raises(ValueError, match="two classes"):
        compute_metric("roc_auc", ["a", "b", "c"], [0.1, 0.2, 0.3])


def test_relative_performance_both_directions() -> None:
    assert relative_performance(0.8, 0.5, 0.9) == pytest.approx(0.75)
    assert relative_performance(2.0, 4.0, 3.0) == pytest.approx(2.0)  # an error metric, beating the reference
    assert relative_performance(5.0, 4.0, 3.0) == 0.0  # worse than the baseline
    assert relative_performance(0.9, 0.5, 0.5) == 0.0 and relative_performance(None, 0.5, 0.9) == 0.0


def _write(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path


def test_perfect_submission_scores_by_the_dsbench_formula(tmp_path: Path) -> None:
    for task in (SPECIES, PETAL):
        grade = grade_submission(task, _write(hidden_labels(task), tmp_path / f"{task.name}.csv"))
        baseline, reference = reference_scores(task)
        perfect = 1.0 if task.metric == "accuracy" else 0.0
        assert grade.valid and grade.problem is None and grade.value == pytest.approx(perfect)
        assert (grade.baseline, grade.reference) == (baseline, reference)
        assert grade.fair_score == pytest.approx((perfect - baseline) / (reference - baseline))
        assert grade.fair_score >= 1.0
        assert grade.higher_is_better == (task.metric == "accuracy")
        assert json.loads(json.dumps(grade.as_dict()))["fair_score"] == grade.fair_score


def test_baseline_predictions_score_zero(tmp_path: Path) -> None:
    train, test = public_frames(PETAL)
    median = pd.DataFrame({"id": test["id"], "petal_width_cm": train["petal_width_cm"].median()})
    grade = grade_submission(PETAL, _write(median, tmp_path / "median.csv"))
    assert grade.valid and grade.value == pytest.approx(grade.baseline) and grade.fair_score == 0.0
    constant = pd.DataFrame({"id": public_frames(DIAGNOSIS)[1]["id"], "diagnosis": 0.5})
    grade = grade_submission(DIAGNOSIS, _write(constant, tmp_path / "half.csv"))
    assert grade.valid and grade.value == 0.5 == grade.baseline and grade.fair_score == 0.0


def test_roc_auc_takes_probabilities_of_the_positive_class(tmp_path: Path) -> None:
    labels = hidden_labels(DIAGNOSIS)
    probabilities = labels.assign(diagnosis=np.where(labels["diagnosis"] == "malignant", 0.9, 0.2))
    grade = grade_submission(DIAGNOSIS, _write(probabilities, tmp_path / "p.csv"))
    assert grade.valid and grade.value == 1.0 and grade.fair_score >= 1.0
    flipped = probabilities.assign(diagnosis=1 - probabilities["diagnosis"])
    assert grade_submission(DIAGNOSIS, _write(flipped, tmp_path / "f.csv")).value == 0.0
    as_labels = grade_submission(DIAGNOSIS, _write(labels, tmp_path / "labels.csv"))
    assert not as_labels.valid and "are not numbers" in as_labels.problem
    too_big = probabilities.assign(diagnosis=probabilities["diagnosis"] * 5)
    grade = grade_submission(DIAGNOSIS, _write(too_big, tmp_path / "big.csv"))
    assert not grade.valid and "probabilities must be in [0, 1]" in grade.problem


def test_row_order_and_label_spelling_do_not_matter(tmp_path: Path) -> None:
    labels = hidden_labels(PETAL)
    guess = labels.assign(petal_width_cm=labels["petal_width_cm"].round(0))
    in_order = grade_submission(PETAL, _write(guess, tmp_path / "a.csv"))
    shuffled = grade_submission(PETAL, _write(guess.sample(frac=1.0, random_state=3), tmp_path / "b.csv"))
    assert in_order.valid and in_order.value == shuffled.value and 0 < in_order.value < 0.5
    species = hidden_labels(SPECIES).assign(extra="ignored")
    species["id"] = species["id"].astype(float)  # 17.0 is id 17
    grade = grade_submission(SPECIES, _write(species.iloc[::-1], tmp_path / "c.csv"))
    assert grade.valid and grade.value == 1.0


def _broken(kind: str, labels: pd.DataFrame) -> pd.DataFrame | str | None:
    """A broken species submission: a frame, raw text, or None (no file)."""
    if kind == "missing file":
        return None
    if kind == "empty file":
        return ""
    if kind == "not csv":
        return 'id,species\n1,"setosa\n'
    if kind == "column twice":
        return "id,species, species\n1,setosa,setosa\n"
    if kind == "missing column":
        return labels.rename(columns={"species": "label"})
    if kind == "too few rows":
        return labels.iloc[:30]
    if kind == "duplicate id":
        return labels.assign(id=[labels["id"].iloc[0], *labels["id"].iloc[:-1]])
    if kind == "unknown ids":
        return labels.assign(id=[*labels["id"].iloc[:-3], 9001, 9002, 9003])
    return labels.assign(species=["foo", *labels["species"].iloc[1:]])  # unknown class


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        ("missing file", "submission.csv is missing"),
        ("empty file", "submission.csv is empty"),
        ("not csv", "submission.csv is not a readable CSV file"),
        ("column twice", "column `species` appears more than once"),
        ("missing column", "column `species` missing; expected columns id, species"),
        ("too few rows", "30 rows, expected 38"),
        ("duplicate id", "1 ids appear more than once"),
        ("unknown ids", "ids do not match test.csv: 3 missing, 3 unknown"),
        ("unknown class", "value 'foo' is not one of the classes setosa, versicolor, virginica"),
    ],
)
def test_broken_submissions_are_invalid_with_a_reason(tmp_path: Path, kind: str, problem: str) -> None:
    broken, path = _broken(kind, hidden_labels(SPECIES)), tmp_path / "submission.csv"
    if isinstance(broken, str):
        path.write_text(broken)
    elif broken is not None:
        _write(broken, path)
    grade = grade_submission(SPECIES, path)
    assert not grade.valid and problem in grade.problem
    assert grade.value is None and grade.fair_score == 0.0 and grade.metric == "accuracy"


def test_regression_values_must_be_numbers(tmp_path: Path) -> None:
    labels = hidden_labels(PETAL).astype({"petal_width_cm": object})
    labels.loc[[0, 5], "petal_width_cm"] = ["wide", None]
    grade = grade_submission(PETAL, _write(labels, tmp_path / "submission.csv"))
    assert not grade.valid and grade.problem == "2 values of `petal_width_cm` are not numbers (e.g. 'wide')"
