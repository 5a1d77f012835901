"""Tests for mappa.envs.dsbench.task_sets: the builtin task set, its workspaces, problems and hidden paths.

Sizes are hand-checked against the sklearn data sets (iris 150 rows, diabetes 442, wine 178, breast cancer
569, digits 1797) and the 75/25 split.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from mappa.core.types import Problem
from mappa.envs.dsbench import task_sets
from mappa.envs.dsbench.task_sets import (
    METRICS,
    PUBLIC_FILES,
    builtin_tasks,
    hidden_labels,
    load_task_problems,
    paths_to_hide,
    problem_to_task,
    public_frames,
    task_classes,
    task_to_problem,
    write_workspace,
)

ALL_TASKS = builtin_tasks("train") + builtin_tasks("eval")
BY_NAME = {task.name: task for task in ALL_TASKS}


def test_splits_are_disjoint_and_cover_both_kinds() -> None:
    train, evaluation = builtin_tasks("train"), builtin_tasks("eval")
    assert len(train) >= 6 and len(evaluation) >= 3
    assert {t.kind for t in train} == {t.kind for t in evaluation} == {"regression", "classification"}
    assert not {t.name for t in train} & {t.name for t in evaluation}
    assert all(t.metric in METRICS and t.source == "builtin" and t.id_column == "id" for t in ALL_TASKS)
    with pytest.raises(ValueError, match="train, eval"):
        builtin_tasks("test")


@pytest.mark.parametrize(
    ("name", "rows"),
    [
        ("iris-species", (112, 38)),
        ("iris-petal-width", (112, 38)),
        ("diabetes-progression", (331, 111)),
        ("wine-cultivar", (133, 45)),
        ("breast-cancer-diagnosis", (426, 143)),
        ("digits", (1347, 450)),
    ],
)
def test_split_sizes_and_ids(name: str, rows: tuple[int, int]) -> None:
    train, test = public_frames(BY_NAME[name])
    assert (len(train), len(test)) == rows
    ids = pd.concat([train["id"], test["id"]])
    assert sorted(ids) == list(range(1, sum(rows) + 1))  # unique across train and test


def test_builtin_frames_are_deterministic(tmp_path: Path) -> None:
    task = BY_NAME["diabetes-progression"]
    first = write_workspace(task, tmp_path / "a")
    task_sets._build.cache_clear()  # rebuild from sklearn's files, not from the cache
    write_workspace(task, tmp_path / "b")
    for name in first:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_data_is_messy_the_way_a_data_engineer_expects() -> None:
    for task in ALL_TASKS:
        train, test = public_frames(task)
        assert all(re.fullmatch(r"[a-z][a-z0-9_]*", column) for column in train.columns), task.name
        missing = pd.concat([train.drop(columns=list(task.target_columns)), test]).isna().mean()
        assert 2 <= (missing > 0).sum() <= 3, task.name
        assert missing.max() == pytest.approx(0.04, abs=0.005), task.name
        assert train.isna().any().any() and test.isna().any().any(), task.name
    train, _ = public_frames(BY_NAME["diabetes-progression"])
    assert set(train["sex"].dropna()) == {"female", "male"}
    train, _ = public_frames(BY_NAME["breast-cancer-diagnosis"])
    assert set(train["diagnosis"]) == {"benign", "malignant"}
    train, _ = public_frames(BY_NAME["breast-cancer-mean-area"])
    assert not [c for c in train.columns if re.search("radius|perimeter", c)]
    assert [c for c in train.columns if "area" in c] == ["mean_area"]


def test_classification_splits_are_stratified() -> None:
    train, _ = public_frames(BY_NAME["iris-species"])
    labels = hidden_labels(BY_NAME["iris-species"])
    assert train["species"].value_counts().to_dict() == {"setosa": 37, "versicolor": 38, "virginica": 37}
    assert labels["species"].value_counts().to_dict() == {"setosa": 13, "versicolor": 12, "virginica": 13}


def test_test_csv_has_no_target_and_the_description_no_label() -> None:
    for task in ALL_TASKS:
        train, test = public_frames(task)
        target = task.target_columns[0]
        assert target in train.columns and target not in test.columns
        assert list(test.columns) == [c for c in train.columns if c != target]
        labels = hidden_labels(task)
        assert list(labels.columns) == ["id", target]
        assert list(labels["id"]) == list(test["id"])
        assert f"columns id,{target}" in task.description and task.metric in task.description
        if task.kind == "regression":  # class names are public (train.csv); numbers must not leak
            words = set(re.findall(r"[0-9][0-9.]*", task.description))
            assert not words & {str(v) for v in labels[target]}, task.name


def test_task_classes_put_the_positive_class_last() -> None:
    assert task_classes(BY_NAME["breast-cancer-diagnosis"]) == ("benign", "malignant")
    assert task_classes(BY_NAME["diabetes-high-progression"]) == ("no", "yes")
    assert task_classes(BY_NAME["digits"]) == tuple("0123456789")
    assert task_classes(BY_NAME["diabetes-progression"]) == ()
    assert (
        "probability (0 to 1) that diagnosis is `malignant`" in BY_NAME["breast-cancer-diagnosis"].description
    )


def test_write_workspace_writes_exactly_the_public_files(tmp_path: Path) -> None:
    task = BY_NAME["iris-species"]
    assert write_workspace(task, tmp_path / "ws") == list(PUBLIC_FILES)
    assert sorted(p.name for p in (tmp_path / "ws").iterdir()) == sorted(PUBLIC_FILES)
    train = pd.read_csv(tmp_path / "ws" / "train.csv")
    test = pd.read_csv(tmp_path / "ws" / "test.csv")
    sample = pd.read_csv(tmp_path / "ws" / "sample_submission.csv")
    assert "species" not in test.columns and not set(train["id"]) & set(test["id"])
    assert list(sample.columns) == ["id", "species"] and list(sample["id"]) == list(test["id"])
    assert set(sample["species"]) == {"setosa"}
    write_workspace(BY_NAME["breast-cancer-diagnosis"], tmp_path / "bc")
    assert set(pd.read_csv(tmp_path / "bc" / "sample_submission.csv")["diagnosis"]) == {0.5}
    write_workspace(BY_NAME["wine-alcohol"], tmp_path / "wa")
    assert set(pd.read_csv(tmp_path / "wa" / "sample_submission.csv")["alcohol"]) == {0.0}


def test_problem_round_trip_holds_no_label() -> None:
    for task in ALL_TASKS:
        problem = task_to_problem(task)
        assert problem.id == task.name and problem.question == task.description and problem.answer == ""
        assert problem.meta == {
            "kind": task.kind,
            "metric": task.metric,
            "source": "builtin",
            "id_column": "id",
            "target_columns": list(task.target_columns),
        }
        assert problem_to_task(problem) == task
    with pytest.raises(ValueError, match="no builtin tabular task"):
        problem_to_task(Problem("nope", "", "", {"source": "builtin"}))


def test_load_task_problems_forms() -> None:
    assert [p.id for p in load_task_problems("builtin:eval")] == [t.name for t in builtin_tasks("eval")]
    for bad in ("builtin:test", "dsbench:", "kaggle:titanic", "train"):
        with pytest.raises(ValueError, match="builtin:train, builtin:eval, dsbench:"):
            load_task_problems(bad)


def test_paths_to_hide_are_the_bundled_sklearn_data() -> None:
    hidden = paths_to_hide(BY_NAME["iris-species"])
    assert hidden and all(Path(p).exists() for p in hidden)
    assert any(p.endswith("sklearn/datasets/data") for p in hidden)
    assert any((Path(p) / "iris.csv").exists() for p in hidden)
    assert any((Path(p) / "iris.arff").exists() for p in hidden)  # SciPy ships a labelled copy too
