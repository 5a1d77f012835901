"""Tests for mappa.envs.dsbench.published on a tiny fake DSBench data_modeling folder built in tmp_path.

The fake folder lists two competitions: `toy-rent` is complete (RMSE eval script, GT 0.5, baseline 2.0) and
`toy-broken` lacks its answers file. Its eval script compares rows by position, as DSBench's scripts do.
"""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from mappa.envs.dsbench.grading import grade_submission
from mappa.envs.dsbench.published import (
    dsbench_reference,
    higher_is_better,
    load_dsbench_tasks,
    score_with_script,
)
from mappa.envs.dsbench.task_sets import (
    hidden_labels,
    load_task_problems,
    paths_to_hide,
    problem_to_task,
    task_to_problem,
    write_workspace,
)

RMSE_SCRIPT = textwrap.dedent(
    """
    import argparse, csv, math, os

    parser = argparse.ArgumentParser()
    for flag in ("--path", "--name", "--answer_file", "--predict_file"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--value", default="rent")
    args = parser.parse_args()
    truth = [float(row[args.value]) for row in csv.DictReader(open(args.answer_file))]
    guess = [float(row[args.value]) for row in csv.DictReader(open(args.predict_file))]
    # rmse, row by row by position like DSBench's scripts
    performance = math.sqrt(sum((t - g) ** 2 for t, g in zip(truth, guess)) / len(truth))
    with open(os.path.join(args.path, args.name, "result.txt"), "w") as f:
        f.write(str(performance))
    """
)
ANSWERS = pd.DataFrame({"flat": [10, 11, 12, 13], "rent": [1.0, 2.0, 3.0, 4.0]})


def _put(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _competition(root: Path, name: str, script: str, answers: bool = True) -> None:
    folder = f"data/data_resplit/{name}"
    _put(root, f"data/task/{name}.txt", f"Predict the monthly rent of each flat ({name}).")
    _put(root, f"{folder}/train.csv", "flat,rooms,rent\n1,1,1.5\n2,2,2.5\n3,3,3.5\n")
    _put(root, f"{folder}/test.csv", "flat,rooms\n10,1\n11,2\n12,3\n13,4\n")
    _put(root, f"{folder}/sample_submission.csv", "flat,rent\n10,0\n11,0\n12,0\n13,0\n")
    _put(root, f"{folder}/notes.txt", "rooms counts bedrooms only\n")
    _put(root, f"evaluation/{name}_eval.py", script)
    if answers:
        _put(root, f"data/answers/{name}/test_answer.csv", ANSWERS.to_csv(index=False))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "data_modeling"
    rows = [
        {"name": n, "url": f"https://www.kaggle.com/c/{n}", "size": "1 kB", "year": 2024}
        for n in ("toy-rent", "toy-broken")
    ]
    _put(root, "data.json", "".join(json.dumps(row) + "\n" for row in rows))
    _competition(root, "toy-rent", RMSE_SCRIPT)
    _competition(root, "toy-broken", RMSE_SCRIPT, answers=False)
    _put(root, "save_performance/GT/toy-rent/result.txt", "0.5")
    _put(root, "save_performance/baseline/toy-rent/result.txt", "2.0\n")
    return root


def test_loads_the_complete_competition_and_skips_the_other(root: Path, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="mappa.envs.dsbench.published"):
        tasks = load_dsbench_tasks(root)
    assert [t.name for t in tasks] == ["toy-rent"]
    task = tasks[0]
    assert (task.kind, task.metric, task.id_column, task.target_columns) == (
        "regression",
        "dsbench-script",
        "flat",
        ("rent",),
    )
    assert task.source == str(root.resolve())
    assert task.description.startswith("Predict the monthly rent of each flat (toy-rent).")
    assert "notes.txt, sample_submission.csv, test.csv, train.csv" in task.description
    assert "exactly the columns flat,rent" in task.description
    assert "toy-broken skipped: data/answers/toy-broken/test_answer.csv missing" in caplog.text


def test_kind_comes_from_the_script_or_else_the_answers(root: Path) -> None:
    _competition(root, "toy-rent", "from sklearn.metrics import accuracy_score\n")
    assert load_dsbench_tasks(root, ["toy-rent"])[0].kind == "classification"
    _competition(root, "toy-rent", "print('no metric named here')\n")  # 4 distinct floats: too few
    assert load_dsbench_tasks(root, ["toy-rent"])[0].kind == "classification"
    many = pd.DataFrame({"flat": range(100), "rent": [i / 7 for i in range(100)]})
    _put(root, "data/answers/toy-rent/test_answer.csv", many.to_csv(index=False))
    assert load_dsbench_tasks(root, ["toy-rent"])[0].kind == "regression"


def test_clear_errors(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not found; download data.zip from the DSBench README"):
        load_dsbench_tasks(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="is incomplete: data/answers/toy-broken/test_answer.csv missing"):
        load_dsbench_tasks(root, ["toy-broken"])
    with pytest.raises(ValueError, match="'titanic' is not in data.json; usable ones: toy-rent"):
        load_dsbench_tasks(root, ["titanic"])
    (root / "data/answers/toy-rent/test_answer.csv").unlink()
    with pytest.raises(ValueError, match="no usable competition among the 2 in data.json"):
        load_dsbench_tasks(root)
    (root / "data.json").unlink()
    with pytest.raises(ValueError, match="data.json not found"):
        load_dsbench_tasks(root)


def test_score_with_script_and_published_figures(root: Path, tmp_path: Path, caplog) -> None:
    task = load_dsbench_tasks(root)[0]
    perfect = tmp_path / "perfect.csv"
    ANSWERS.to_csv(perfect, index=False)
    assert score_with_script(task, perfect) == 0.0
    off_by_two = tmp_path / "off.csv"
    ANSWERS.assign(rent=ANSWERS["rent"] + 2).to_csv(off_by_two, index=False)
    assert score_with_script(task, off_by_two) == pytest.approx(2.0)
    assert dsbench_reference(task) == (2.0, 0.5) and higher_is_better(task) is False
    _put(root, "evaluation/toy-rent_eval.py", "raise SystemExit('boom')\n")
    with caplog.at_level(logging.WARNING, logger="mappa.envs.dsbench.published"):
        assert score_with_script(task, perfect) is None
    assert "boom" in caplog.text
    nan_script = RMSE_SCRIPT.replace("f.write(str(performance))", "f.write('nan')")
    _put(root, "evaluation/toy-rent_eval.py", nan_script)
    assert score_with_script(task, perfect) is None


def test_grading_goes_through_the_script_after_the_shape_checks(root: Path, tmp_path: Path) -> None:
    task = load_dsbench_tasks(root)[0]
    submission = tmp_path / "submission.csv"
    ANSWERS.iloc[::-1].to_csv(submission, index=False)  # reversed: aligned by id before the script runs
    grade = grade_submission(task, submission)
    assert grade.valid and grade.value == 0.0 and (grade.baseline, grade.reference) == (2.0, 0.5)
    assert grade.fair_score == pytest.approx((0.0 - 2.0) / (0.5 - 2.0)) and not grade.higher_is_better
    ANSWERS.assign(rent=ANSWERS["rent"] + 1).to_csv(submission, index=False)
    assert grade_submission(task, submission).fair_score == pytest.approx((1.0 - 2.0) / (0.5 - 2.0))
    ANSWERS.assign(rent=ANSWERS["rent"] + 3).to_csv(submission, index=False)  # worse than the baseline
    assert grade_submission(task, submission).fair_score == 0.0
    for broken, problem in (
        (ANSWERS.rename(columns={"rent": "price"}), "column `rent` missing; expected columns flat, rent"),
        (ANSWERS.assign(flat=[10, 11, 12, 99]), "ids do not match test.csv: 1 missing, 1 unknown"),
        (ANSWERS.assign(rent=["1", "two", "3", "4"]), "1 values of `rent` are not numbers"),
        (ANSWERS.iloc[:3], "3 rows, expected 4"),
    ):
        broken.to_csv(submission, index=False)
        grade = grade_submission(task, submission)
        assert not grade.valid and problem in grade.problem and grade.fair_score == 0.0
    _put(root, "evaluation/toy-rent_eval.py", "raise SystemExit('boom')\n")
    ANSWERS.to_csv(submission, index=False)
    grade = grade_submission(task, submission)
    assert (
        not grade.valid and "scoring script could not score it" in grade.problem and "boom" in grade.problem
    )


def test_tabular_task_functions_on_dsbench(root: Path, tmp_path: Path) -> None:
    problems = load_task_problems(f"dsbench:{root}#toy-rent")
    assert [p.id for p in problems] == ["toy-rent"] and problems[0].answer == ""
    assert problems[0].meta["source"] == str(root) and problems[0].meta["target_columns"] == ["rent"]
    task = problem_to_task(problems[0])
    assert task_to_problem(task) == problems[0]
    assert [p.id for p in load_task_problems(f"dsbench:{root}")] == ["toy-rent"]
    written = write_workspace(task, tmp_path / "ws")
    assert written == ["notes.txt", "sample_submission.csv", "test.csv", "train.csv"]
    assert sorted(p.name for p in (tmp_path / "ws").iterdir()) == written
    assert hidden_labels(task).equals(ANSWERS)
    assert set(paths_to_hide(task)) == {
        str(root / "data/answers"),
        str(root / "save_performance"),
        str(root / "evaluation"),
    }
