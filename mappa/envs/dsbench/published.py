"""The DSBench data-modelling tasks, read from the folder layout their authors publish.

DSBench (Jing et al. 2024, "DSBench: How Far Are Data Science Agents from Becoming Data Science Experts?",
arXiv:2409.07703; github.com/LiqiangJing/DSBench, folder data_modeling) lays out each Kaggle competition as:
- `data.json`: JSON lines, one object per competition: {"name", "url", "size", "year"};
- `data/task/<name>.txt`: the task description;
- `data/data_resplit/<name>/`: train.csv, test.csv, sample_submission.csv (sometimes more files);
- `data/answers/<name>/test_answer.csv`: the hidden labels of the test rows;
- `evaluation/<name>_eval.py`: the metric, run as `python <name>_eval.py --answer_file A --predict_file P
  --path OUT --name NAME`; it writes one number to `OUT/NAME/result.txt`;
- `save_performance/GT/<name>/result.txt` and `save_performance/baseline/<name>/result.txt` (optional):
  the reference and baseline figures. Higher is better when GT > baseline, and DSBench's relative
  performance is max(0, (pred - baseline) / (GT - baseline)).

The scripts compare the answer and the prediction row by row, by position (their `sort_values` calls do not
assign the result), so a caller must order the submission's rows like the answer file;
`mappa.envs.dsbench.grading.grade_submission` does that after checking the submission.

What this module does not do: download DSBench (data.zip comes from the DSBench README), check a
submission's shape (`mappa.envs.dsbench.grading`), or sandbox the scoring scripts: they are the benchmark
authors' code and run with this process's rights, never with an agent's.
"""

from __future__ import annotations

import json
import logging
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from mappa.envs.dsbench.task import Kind, TabularTask

logger = logging.getLogger(__name__)

SCRIPT_TIMEOUT_S = 300
_DOWNLOAD_HINT = "download data.zip from the DSBench README and unzip it into data_modeling/"
_REGRESSION_WORDS = (
    r"mean_squared_error|mean_absolute_error|mean_squared_log_error|median_absolute_error|r2_score"
    r"|rmsle|rmse|mse|mae|pearsonr|spearmanr"
)
_CLASSIFICATION_WORDS = (
    r"accuracy_score|f1_score|roc_auc_score|log_loss|cohen_kappa_score|matthews_corrcoef|precision_score"
    r"|recall_score|average_precision_score|accuracy|roc_auc|auc"
)
_LOWER_IS_BETTER_WORDS = r"mean_squared_error|mean_absolute_error|mean_squared_log_error|log_loss|rmsle|rmse"


# ---------------------------------------------------------------- layout
def resplit_folder(task: TabularTask) -> Path:
    """The folder of the task's public files (train.csv, test.csv, sample_submission.csv, ...)."""
    return Path(task.source) / "data" / "data_resplit" / task.name


def answers_file(task: TabularTask) -> Path:
    return Path(task.source) / "data" / "answers" / task.name / "test_answer.csv"


def eval_script(task: TabularTask) -> Path:
    return Path(task.source) / "evaluation" / f"{task.name}_eval.py"


def read_answers(task: TabularTask) -> pd.DataFrame:
    """The hidden labels: the id and target columns of test_answer.csv (all of it if they are not there)."""
    answers = pd.read_csv(answers_file(task))
    wanted = [task.id_column, *task.target_columns]
    return answers[wanted] if all(c in answers.columns for c in wanted) else answers


def _missing_parts(root: Path, name: str) -> list[str]:
    """What a competition lacks to be usable, as paths relative to the root ([] when complete)."""
    parts = (
        f"data/data_resplit/{name}/train.csv",
        f"data/data_resplit/{name}/test.csv",
        f"data/data_resplit/{name}/sample_submission.csv",
        f"data/answers/{name}/test_answer.csv",
        f"evaluation/{name}_eval.py",
    )
    return [part for part in parts if not (root / part).is_file()]


def _read_index(root: Path) -> list[dict]:
    """The competitions listed in data.json (JSON lines; a JSON list is accepted too)."""
    index = root / "data.json"
    if not index.is_file():
        raise ValueError(
            f"{index} not found; the DSBench data_modeling folder holds data.json ({_DOWNLOAD_HINT})"
        )
    text = index.read_text(encoding="utf-8")
    lines = [text] if text.lstrip().startswith("[") else text.splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line) if line.strip() else []
        except json.JSONDecodeError as error:
            raise ValueError(f"{index}: line {number} is not valid JSON ({error}); fix or drop it") from error
        rows.extend(row if isinstance(row, list) else [row])
    if bad := [row for row in rows if not isinstance(row, dict) or not row.get("name")]:
        raise ValueError(f"{index}: every line needs an object with a `name`; got {bad[0]!r}")
    return rows


# ---------------------------------------------------------------- tasks
def _guess_kind(script: Path, answers: Path, target: str) -> Kind:
    """From the metric named in the eval script; failing that, from the answer column's values."""
    text = script.read_text(encoding="utf-8", errors="replace").lower()
    regression = re.search(rf"\b({_REGRESSION_WORDS})\b", text) is not None
    classification = re.search(rf"\b({_CLASSIFICATION_WORDS})\b", text) is not None
    if regression != classification:
        return "regression" if regression else "classification"
    values = pd.read_csv(answers, usecols=lambda column: column == target)
    if target not in values.columns:
        return "classification"
    column = values[target]
    many = column.nunique() > max(20, 0.05 * len(column))
    return "regression" if pd.api.types.is_float_dtype(column) and many else "classification"


def _describe(root: Path, name: str, entry: dict, id_column: str, targets: list[str]) -> str:
    task_file = root / "data" / "task" / f"{name}.txt"
    if task_file.is_file():
        text = task_file.read_text(encoding="utf-8", errors="replace").strip()
    else:
        text = f"Kaggle competition {name} ({entry.get('url', 'no url')})."
    files = sorted(p.name for p in (root / "data" / "data_resplit" / name).iterdir())
    columns = ",".join([id_column, *targets])
    return "\n".join(
        (
            text,
            "",
            f"Files in the workspace: {', '.join(files)}. train.csv holds the training rows with their "
            "targets; test.csv the rows to predict, without targets.",
            f"Submission: submission.csv with exactly the columns {columns} (like sample_submission.csv) and "
            f"one row per row of test.csv; `{id_column}` is the id column. It is scored with the "
            "competition's metric.",
        )
    )


def _load_task(root: Path, entry: dict) -> TabularTask:
    name = entry["name"]
    folder = root / "data" / "data_resplit" / name
    columns = [str(c) for c in pd.read_csv(folder / "sample_submission.csv", nrows=0).columns]
    if len(columns) < 2:
        raise ValueError(f"{folder / 'sample_submission.csv'}: needs an id column and at least one target")
    id_column, targets = columns[0], columns[1:]
    answers = root / "data" / "answers" / name / "test_answer.csv"
    kind = _guess_kind(root / "evaluation" / f"{name}_eval.py", answers, targets[0])
    description = _describe(root, name, entry, id_column, targets)
    return TabularTask(name, kind, "dsbench-script", description, id_column, tuple(targets), str(root))


def _check_requested(root: Path, names: list[str], lacking: dict[str, list[str]]) -> None:
    usable = [name for name, parts in lacking.items() if not parts]
    for name in names:
        if name not in lacking:
            shown = ", ".join(usable[:5]) + (f" (and {len(usable) - 5} more)" if len(usable) > 5 else "")
            raise ValueError(
                f"{root}: competition {name!r} is not in data.json; usable ones: {shown or 'none'}"
            )
        if lacking[name]:
            raise ValueError(
                f"{root}: competition {name!r} is incomplete: {', '.join(lacking[name])} missing"
            )


def load_dsbench_tasks(root: str | Path, names: list[str] | None = None) -> list[TabularTask]:
    """The usable competitions of a DSBench data_modeling folder (all, or `names` in that order).

    A competition is usable when its data_resplit files, its answers file and its eval script exist; the
    others are skipped (logged), unless asked for by name, which is an error.
    """
    root = Path(root).expanduser().resolve()  # the tasks keep it as `source`: absolute, cwd-independent
    if not root.is_dir():
        raise ValueError(f"DSBench folder {root} not found; {_DOWNLOAD_HINT}")
    entries = {row["name"]: row for row in _read_index(root)}
    lacking = {name: _missing_parts(root, name) for name in entries}
    if names is not None:
        _check_requested(root, names, lacking)
        return [_load_task(root, entries[name]) for name in names]
    for name, parts in lacking.items():
        if parts:
            logger.info("DSBench %s skipped: %s missing", name, ", ".join(parts))
    usable = [name for name, parts in lacking.items() if not parts]
    if not usable:
        name, parts = next(iter(lacking.items()), ("(none listed)", []))
        example = f"{name} lacks {', '.join(parts) or 'nothing'}"
        raise ValueError(
            f"{root}: no usable competition among the {len(entries)} in data.json; each needs its "
            f"data_resplit files, answers and eval script (e.g. {example}); {_DOWNLOAD_HINT}"
        )
    return [_load_task(root, entries[name]) for name in usable]


# ---------------------------------------------------------------- scoring
def run_eval_script(task: TabularTask, submission: Path) -> tuple[float | None, str | None]:
    """(score, None), or (None, why) when the task's eval script fails, times out or writes no number.

    The submission is passed as it is: order its rows like the answer file first (see the module doc).
    """
    with tempfile.TemporaryDirectory(prefix="dsbench-eval-") as out:
        (Path(out) / task.name).mkdir()
        command = [sys.executable, str(eval_script(task)), "--answer_file", str(answers_file(task))]
        command += ["--predict_file", str(Path(submission).resolve()), "--path", out, "--name", task.name]
        try:
            done = subprocess.run(command, cwd=out, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, f"the scoring script ran past {SCRIPT_TIMEOUT_S} s"
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no error output"])[-1]
            return None, f"the scoring script failed (exit {done.returncode}): {last}"
        result = Path(out) / task.name / "result.txt"
        if not result.is_file():
            return None, "the scoring script wrote no result.txt"
        return _parse_result(result.read_text().strip())


def _parse_result(text: str) -> tuple[float | None, str | None]:
    try:
        value = float(text)
    except ValueError:
        return None, f"the scoring script wrote {text[:80]!r}, not a number"
    return (value, None) if math.isfinite(value) else (None, f"the scoring script wrote {text!r}")


def score_with_script(task: TabularTask, submission: Path) -> float | None:
    """The task's own metric on `submission`, or None (logged) when its eval script cannot score it."""
    value, why = run_eval_script(task, submission)
    if value is None:
        logger.warning("DSBench %s: %s could not be scored: %s", task.name, submission, why)
    return value


def _read_figure(path: Path) -> float | None:
    if not path.is_file():
        return None
    value, why = _parse_result(path.read_text().strip())
    if value is None:
        logger.warning("%s: %s; ignoring it", path, why)
    return value


def dsbench_reference(task: TabularTask) -> tuple[float | None, float | None]:
    """(baseline, GT) figures from save_performance, each None when absent or unreadable."""
    folder = Path(task.source) / "save_performance"
    baseline = _read_figure(folder / "baseline" / task.name / "result.txt")
    return baseline, _read_figure(folder / "GT" / task.name / "result.txt")


def higher_is_better(task: TabularTask) -> bool:
    """True when GT > baseline; without both figures, False for error metrics named in the eval script."""
    baseline, reference = dsbench_reference(task)
    if baseline is not None and reference is not None and baseline != reference:
        return reference > baseline
    text = eval_script(task).read_text(encoding="utf-8", errors="replace").lower()
    return re.search(rf"\b({_LOWER_IS_BETTER_WORDS})\b", text) is None
