"""Grading a tabular task's submission.csv against the hidden test labels.

`grade_submission` first checks the file the way a competition site would (it exists, parses as CSV, has
the id and target columns, one row per test id with no duplicate or unknown id, values of the right type)
and only then computes the metric; rows may come in any order (they are aligned by id) and extra columns
are ignored. A bad submission never raises: it comes back with `valid=False` and a `problem` phrased for
the agent, the coach and the user. Ids and class labels are compared as canonical text, so `1`, `1.0` and
`"1"` match.

Every grade carries DSBench's relative performance (Jing et al. 2024, arXiv:2409.07703):
`fair_score = max(0, (value - baseline) / (reference - baseline))`, where for builtin tasks `baseline` is a
trivial predictor fitted on train.csv (the mean for rmse, the median for mae, the majority class for
accuracy and f1, a constant 0.5 for roc_auc) and `reference` a fixed reasonable model (median / most
frequent imputation, one-hot encoding, a 200-tree random forest with seed 0). The formula works for both
directions: for an error metric numerator and denominator are both negative when the submission beats the
baseline. It is not capped at 1: beating the reference gives more than 1.

DSBench tasks (metric "dsbench-script") are checked against sample_submission.csv's columns and the answer
file's ids, reordered like the answer file, and scored by the competition's own script
(`mappa.envs.dsbench.published`); their baseline and reference are the figures DSBench published.

What this module does not do: protect the labels from the agents (see
`mappa.envs.dsbench.task_sets.paths_to_hide`), judge the agents' code or their other files (X_train.pkl,
model.pkl...), or time anything.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.impute import SimpleImputer
from sklearn.metrics import f1_score, roc_auc_score
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder

from mappa.envs.dsbench.published import dsbench_reference, higher_is_better, read_answers, run_eval_script
from mappa.envs.dsbench.task_sets import METRICS, TabularTask, hidden_labels, public_frames, task_classes

_REFERENCE_TREES = 200


@dataclass(frozen=True)
class SubmissionGrade:
    valid: bool
    problem: str | None  # why the submission is invalid, in plain words; None when valid
    metric: str
    value: float | None  # the metric on the hidden labels; None when invalid
    baseline: float | None  # the metric of a trivial predictor
    reference: float | None  # the metric of a fixed reasonable model
    fair_score: float  # DSBench's relative performance; 0 when invalid or reference == baseline
    higher_is_better: bool

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------- metrics
def _label(value: Any) -> str:
    """A cell as canonical text: surrounding blanks dropped, integral numbers without a decimal part."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if math.isfinite(number) and number.is_integer() else text


def _truth_and_positive(y_true: Sequence[Any], classes: Sequence[str] | None) -> tuple[np.ndarray, str]:
    labels = [_label(v) for v in y_true]
    classes = [_label(c) for c in classes] if classes is not None else sorted(set(labels))
    return np.array(labels), classes[-1]


def compute_metric(
    metric: str, y_true: Sequence[Any], y_pred: Sequence[Any], classes: Sequence[Any] | None = None
) -> float:
    """`metric` of predictions `y_pred` against `y_true` (aligned, same length).

    rmse and mae take numbers. accuracy and f1 compare labels as canonical text; f1 is the f1 of the
    positive class for two classes and the macro average (unweighted mean over `classes`) otherwise.
    roc_auc is binary only and takes probabilities of the positive class. The positive class is the last
    of `classes` (the builtin tasks list it last); without `classes`, the last of y_true's sorted labels.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
    if len(y_true) != len(y_pred) or len(y_true) == 0:
        raise ValueError(
            f"{metric}: y_true has {len(y_true)} values and y_pred {len(y_pred)}; need the same > 0"
        )
    if metric in ("rmse", "mae"):
        errors = np.asarray(y_true, dtype=float) - np.asarray(y_pred, dtype=float)
        return float(np.sqrt(np.mean(errors**2)) if metric == "rmse" else np.mean(np.abs(errors)))
    truth, positive = _truth_and_positive(y_true, classes)
    if metric == "roc_auc":
        if len(set(truth)) > 2 or (classes is not None and len(classes) != 2):
            raise ValueError("roc_auc is for two classes only; use accuracy or f1 for more")
        return float(roc_auc_score(truth == positive, np.asarray(y_pred, dtype=float)))
    predicted = np.array([_label(v) for v in y_pred])
    if metric == "accuracy":
        return float(np.mean(truth == predicted))
    labels = [_label(c) for c in classes] if classes is not None else sorted(set(truth))
    if len(labels) == 2:  # 2 tp / (2 tp + fp + fn), counted by hand so a stray label is just a wrong one
        guessed, actual = predicted == positive, truth == positive
        both = guessed.sum() + actual.sum()  # = 2 tp + fp + fn
        return float(2 * np.sum(guessed & actual) / both) if both else 0.0
    return float(f1_score(truth, predicted, labels=labels, average="macro", zero_division=0))


def relative_performance(value: float | None, baseline: float | None, reference: float | None) -> float:
    """DSBench's max(0, (value - baseline) / (reference - baseline)); 0 when it is undefined."""
    if value is None or baseline is None or reference is None or reference == baseline:
        return 0.0
    return max(0.0, (value - baseline) / (reference - baseline))


# ---------------------------------------------------------------- baseline and reference
def _reference_model(kind: str, features: pd.DataFrame) -> Pipeline:
    categorical = [c for c in features.columns if not pd.api.types.is_numeric_dtype(features[c])]
    numeric = [c for c in features.columns if c not in categorical]
    encode = make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore"))
    prepare = ColumnTransformer(
        [("numeric", SimpleImputer(strategy="median"), numeric), ("categorical", encode, categorical)]
    )
    forest = RandomForestRegressor if kind == "regression" else RandomForestClassifier
    return Pipeline([("prepare", prepare), ("model", forest(n_estimators=_REFERENCE_TREES, random_state=0))])


def _baseline_predictions(task: TabularTask, y_train: pd.Series, rows: int) -> list[Any]:
    if task.metric in ("rmse", "mae"):
        constant = y_train.mean() if task.metric == "rmse" else y_train.median()
    elif task.metric == "roc_auc":
        constant = 0.5
    else:
        counts = y_train.map(_label).value_counts()
        constant = min(counts.index[counts == counts.max()])  # the majority class; ties: first by name
    return [constant] * rows


def _reference_predictions(task: TabularTask, train: pd.DataFrame, test: pd.DataFrame) -> list[Any]:
    target = task.target_columns[0]
    features = train.drop(columns=[task.id_column, target])
    y_train = train[target] if task.kind == "regression" else train[target].map(_label)
    model = _reference_model(task.kind, features).fit(features, y_train)
    test_features = test[features.columns]
    if task.metric == "roc_auc":
        positive = list(model.classes_).index(_label(task_classes(task)[-1]))
        return list(model.predict_proba(test_features)[:, positive])
    return list(model.predict(test_features))


@functools.cache
def reference_scores(task: TabularTask) -> tuple[float | None, float | None]:
    """(baseline, reference) on the test rows, computed once per process; see the module doc.

    For a DSBench task, the published figures (`dsbench_reference`), None where absent.
    """
    if task.metric == "dsbench-script":
        return dsbench_reference(task)
    train, test = public_frames(task)
    target = task.target_columns[0]
    truth = hidden_labels(task).set_index(task.id_column)[target].reindex(test[task.id_column])
    classes = task_classes(task) or None
    baseline = _baseline_predictions(task, train[target], len(test))
    reference = _reference_predictions(task, train, test)
    return (
        compute_metric(task.metric, list(truth), baseline, classes),
        compute_metric(task.metric, list(truth), reference, classes),
    )


# ---------------------------------------------------------------- checking a submission
def _read_submission(path: Path) -> tuple[pd.DataFrame | None, str | None]:
    """The file as text cells (blanks stay ""), or (None, why it cannot be read)."""
    if not path.is_file():
        return None, f"{path.name} is missing"
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except pd.errors.EmptyDataError:
        return None, f"{path.name} is empty"
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as error:
        return None, f"{path.name} is not a readable CSV file: {str(error).splitlines()[0]}"
    frame = frame.rename(columns=lambda c: str(c).strip())
    if frame.columns.duplicated().any():
        return None, f"column `{frame.columns[frame.columns.duplicated()][0]}` appears more than once"
    return frame, None


def _check_rows(
    frame: pd.DataFrame, id_column: str, columns: Sequence[str], expected: pd.Index
) -> str | None:
    """Columns present, one row per expected id: a problem in words, or None."""
    if missing := [c for c in columns if c not in frame.columns]:
        return f"column `{missing[0]}` missing; expected columns {', '.join(columns)}"
    if len(frame) != len(expected):
        return f"{len(frame)} rows, expected {len(expected)} (one per row of test.csv)"
    ids = frame[id_column].map(_label)
    if ids.duplicated().any():
        twice = ids[ids.duplicated()]
        return (
            f"{twice.nunique()} ids appear more than once (e.g. {twice.iloc[0]}); give each test id one row"
        )
    absent, unknown = expected.difference(ids), pd.Index(ids).difference(expected)
    if len(absent) or len(unknown):
        example = f"e.g. missing {absent[0]}" if len(absent) else f"e.g. unknown {unknown[0]}"
        return f"ids do not match test.csv: {len(absent)} missing, {len(unknown)} unknown ({example})"
    return None


def _check_numbers(values: pd.Series, probabilities: bool = False) -> str | None:
    """Every cell is a finite number (in [0, 1] for probabilities): a problem in words, or None."""
    numbers = pd.to_numeric(values.str.strip(), errors="coerce").astype(float)
    if bad := int((~np.isfinite(numbers)).sum()):
        example = values[~np.isfinite(numbers)].iloc[0]
        return f"{bad} values of `{values.name}` are not numbers (e.g. {example!r})"
    outside = numbers[(numbers < 0) | (numbers > 1)] if probabilities else numbers.iloc[:0]
    if len(outside):
        return f"probabilities must be in [0, 1]; {len(outside)} values are not (e.g. {outside.iloc[0]})"
    return None


def _check_classes(values: pd.Series, classes: Sequence[str]) -> str | None:
    """Every cell is one of `classes` (as canonical text): a problem in words, or None."""
    known = {_label(c) for c in classes}
    if unknown := [v for v in values if _label(v) not in known]:
        shown = ", ".join(classes)
        return f"value {unknown[0]!r} is not one of the classes {shown} ({len(unknown)} such values)"
    return None


def _aligned(frame: pd.DataFrame, id_column: str, ids: pd.Index) -> pd.DataFrame:
    """The submission's rows in the order of `ids` (canonical ids; checked by _check_rows)."""
    return frame.set_index(frame[id_column].map(_label)).loc[ids].reset_index(drop=True)


# ---------------------------------------------------------------- grading
def _invalid(metric: str, problem: str, higher: bool) -> SubmissionGrade:
    return SubmissionGrade(False, problem, metric, None, None, None, 0.0, higher)


def _grade_builtin(task: TabularTask, submission: Path) -> SubmissionGrade:
    higher, target, classes = METRICS[task.metric], task.target_columns[0], task_classes(task)
    labels = hidden_labels(task)
    ids = pd.Index(labels[task.id_column].map(_label))
    frame, problem = _read_submission(submission)
    columns = [task.id_column, target]
    problem = problem or _check_rows(frame, task.id_column, columns, ids)
    if problem is None and task.metric in ("rmse", "mae", "roc_auc"):
        problem = _check_numbers(frame[target], probabilities=task.metric == "roc_auc")
    elif problem is None:
        problem = _check_classes(frame[target], classes)
    if problem:
        return _invalid(task.metric, problem, higher)
    predicted = _aligned(frame, task.id_column, ids)[target]
    if task.kind == "regression" or task.metric == "roc_auc":
        predicted = predicted.astype(float)
    value = compute_metric(task.metric, list(labels[target]), list(predicted), classes or None)
    baseline, reference = reference_scores(task)
    fair = relative_performance(value, baseline, reference)
    return SubmissionGrade(True, None, task.metric, value, baseline, reference, fair, higher)


def _dsbench_problem(task: TabularTask, frame: pd.DataFrame, ids: pd.Index | None, rows: int) -> str | None:
    """Shape and cell checks of a DSBench submission (the script checks nothing): a problem, or None."""
    if ids is None:  # answers without the id column: the script compares by position
        return None if len(frame) == rows else f"{len(frame)} rows, expected {rows} (one per row of test.csv)"
    if problem := _check_rows(frame, task.id_column, [task.id_column, *task.target_columns], ids):
        return problem
    for target in task.target_columns:
        if empty := int((frame[target].str.strip() == "").sum()):
            return f"{empty} values of `{target}` are empty"
        if task.kind == "regression" and (problem := _check_numbers(frame[target])):
            return problem
    return None


def _grade_dsbench(task: TabularTask, submission: Path) -> SubmissionGrade:
    higher = higher_is_better(task)
    answers = read_answers(task)
    ids = pd.Index(answers[task.id_column].map(_label)) if task.id_column in answers else None
    frame, problem = _read_submission(submission)
    if problem := problem or _dsbench_problem(task, frame, ids, len(answers)):
        return _invalid(task.metric, problem, higher)
    with tempfile.TemporaryDirectory(prefix="dsbench-submission-") as folder:
        ordered = Path(folder) / "submission.csv"  # the scripts compare rows by position
        (frame if ids is None else _aligned(frame, task.id_column, ids)).to_csv(ordered, index=False)
        value, why = run_eval_script(task, ordered)
    if value is None:
        return _invalid(task.metric, f"the competition's scoring script could not score it: {why}", higher)
    baseline, reference = dsbench_reference(task)
    fair = relative_performance(value, baseline, reference)
    return SubmissionGrade(True, None, task.metric, value, baseline, reference, fair, higher)


def grade_submission(task: TabularTask, submission: Path) -> SubmissionGrade:
    """Check `submission` (a submission.csv) and score it on the hidden labels; never raises on bad files."""
    submission = Path(submission)
    if task.metric == "dsbench-script":
        return _grade_dsbench(task, submission)
    if task.metric not in METRICS:
        raise ValueError(f"task {task.name}: unknown metric {task.metric!r}; known: {', '.join(METRICS)}")
    return _grade_builtin(task, submission)
