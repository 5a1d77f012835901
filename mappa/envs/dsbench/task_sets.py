"""Tabular modelling tasks for the data-science env, and the project's offline task set.

A `TabularTask` is one Kaggle-style problem: a workspace holding train.csv, test.csv and
sample_submission.csv, a target to predict for the test rows and a metric. The agents read the task's
`description`; the hidden test labels stay with the grader (`mappa.envs.dsbench.grading`).

Two sources of tasks:
- builtin (`builtin_tasks`): nine tasks made from the data sets that ship inside scikit-learn (diabetes,
  wine, iris, breast cancer, digits), so they need no download. The data are made realistically messy for
  the Data Engineer: snake_case column names, class labels as strings, a categorical string column where
  natural, about 4% missing values in two or three feature columns, an integer `id` column (a shuffled
  permutation, unique across train and test) and a 75/25 split (stratified for classification). Every
  step uses a fixed seed per task, so the same call gives identical frames on every machine.
- DSBench (`mappa.envs.dsbench.published`): the data-modelling competitions of DSBench (Jing et al. 2024,
  arXiv:2409.07703) as their authors lay them out on disk.

Labels never go into a `Problem` or a description. `paths_to_hide` names what an agent sandbox must not
read because it holds labels: the copies of the builtin data sets installed with scikit-learn and SciPy
(found by searching the venv for the data sets' label names), DSBench's answers and scoring folders.

What this module does not do: grade submissions (`mappa.envs.dsbench.grading`), run the agents, find
copies of the data sets that other packages may install later, or stop a model from having memorised these
famous public data sets.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn import datasets
from sklearn.model_selection import train_test_split

from mappa.envs.api import Problem
from mappa.envs.dsbench.published import load_dsbench_tasks, read_answers, resplit_folder
from mappa.envs.dsbench.task import METRICS, PUBLIC_FILES, Kind, TabularTask

SPLITS = ("train", "eval")
_MISSING_SHARE = 0.04  # share of rows whose value is blanked in each column of a spec's `missing`
_TEST_SHARE = 0.25


# ---------------------------------------------------------------- the raw data sets
def _snake(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


_DIABETES_NAMES = {  # sklearn's s1..s6 are these blood serum measurements (Efron et al. 2004)
    "bp": "blood_pressure",
    "s1": "total_cholesterol",
    "s2": "ldl",
    "s3": "hdl",
    "s4": "cholesterol_hdl_ratio",
    "s5": "log_triglycerides",
    "s6": "blood_sugar",
    "target": "progression",
}


def _diabetes() -> pd.DataFrame:
    frame = datasets.load_diabetes(as_frame=True, scaled=False).frame.rename(columns=_DIABETES_NAMES)
    frame["sex"] = frame["sex"].map({1.0: "female", 2.0: "male"})  # the data set codes sex as 1 and 2
    return frame


def _diabetes_high() -> pd.DataFrame:
    frame = _diabetes()
    frame["high_progression"] = np.where(frame.pop("progression") > 140, "yes", "no")
    return frame


def _wine() -> pd.DataFrame:
    frame = datasets.load_wine(as_frame=True).frame.rename(columns=_snake)
    frame["cultivar"] = frame.pop("target").map(lambda k: f"cultivar_{k + 1}")
    return frame


def _wine_alcohol() -> pd.DataFrame:
    return _target_last(_wine(), "alcohol")


def _iris() -> pd.DataFrame:
    return _classes_named(datasets.load_iris(as_frame=True), "species")


def _iris_petal_width() -> pd.DataFrame:
    return _target_last(_iris(), "petal_width_cm")


def _breast_cancer() -> pd.DataFrame:
    return _classes_named(datasets.load_breast_cancer(as_frame=True), "diagnosis")


def _breast_cancer_area() -> pd.DataFrame:
    frame = _breast_cancer()
    size = [c for c in frame if re.search("radius|perimeter|area", c) and c != "mean_area"]
    frame = frame.drop(columns=size)  # radius and perimeter would give the area by a formula
    return _target_last(frame, "mean_area")


def _classes_named(bunch, column: str) -> pd.DataFrame:
    """A scikit-learn data set's frame with snake_case columns, its target as class names in `column`."""
    frame = bunch.frame.rename(columns=_snake)
    frame[column] = frame.pop("target").map(lambda k: str(bunch.target_names[k]))
    return frame


def _target_last(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """`frame` with `column`, the task's target, moved to the end."""
    frame[column] = frame.pop(column)
    return frame


def _digits() -> pd.DataFrame:
    frame = datasets.load_digits(as_frame=True).frame.astype("int64")
    frame["digit"] = frame.pop("target").astype(str)
    return frame


# ---------------------------------------------------------------- the builtin tasks
@dataclass(frozen=True)
class _Spec:
    name: str
    split: str
    kind: Kind
    metric: str
    load: Callable[[], pd.DataFrame]  # features then the target column, last
    about: str  # what a row is and what to predict
    missing: tuple[str, ...]  # feature columns that get missing values
    seed: int
    classes: tuple[str, ...] = ()  # classification: the labels; binary tasks put the positive class last


_PATIENTS = "Each row is a diabetes patient: age, sex, body mass index, blood pressure and six blood serum "
_NUCLEI = "Each row describes the cell nuclei in a digitised image of a breast mass"
_SPECS = (
    _Spec("diabetes-progression", "train", "regression", "rmse", _diabetes,
          _PATIENTS + "measurements taken at baseline. Predict `progression`, a quantitative measure of "
          "disease progression one year later.", ("bmi", "sex", "blood_sugar"), 11),
    _Spec("wine-alcohol", "train", "regression", "mae", _wine_alcohol,
          "Each row is an Italian wine from one of three cultivars with a chemical analysis. Predict its "
          "alcohol content `alcohol` (% by volume) from the other measurements.",
          ("malic_acid", "color_intensity", "proline"), 12),
    _Spec("breast-cancer-diagnosis", "train", "classification", "roc_auc", _breast_cancer,
          _NUCLEI + " (mean, standard error and worst value of ten measurements). Predict whether the mass "
          "is malignant.", ("mean_texture", "worst_smoothness", "area_error"), 13,
          ("benign", "malignant")),
    _Spec("iris-species", "train", "classification", "accuracy", _iris,
          "Each row is an iris flower with its sepal and petal sizes in cm. Predict its `species`.",
          ("sepal_width_cm", "petal_length_cm"), 14, ("setosa", "versicolor", "virginica")),
    _Spec("wine-cultivar", "train", "classification", "f1", _wine,
          "Each row is an Italian wine with a chemical analysis. Predict which of three cultivars it comes "
          "from (`cultivar`).", ("flavanoids", "hue", "proline"), 15,
          ("cultivar_1", "cultivar_2", "cultivar_3")),
    _Spec("digits", "train", "classification", "accuracy", _digits,
          "Each row is an 8x8 image of a handwritten digit: columns `pixel_<row>_<col>` hold the ink level "
          "(0 to 16) of each pixel. Predict the `digit`.", ("pixel_2_3", "pixel_4_4", "pixel_5_2"), 16,
          tuple(str(d) for d in range(10))),
    _Spec("iris-petal-width", "eval", "regression", "mae", _iris_petal_width,
          "Each row is an iris flower with its species and sizes in cm. Predict `petal_width_cm` from the "
          "other sizes and the species.", ("sepal_length_cm", "petal_length_cm"), 21),
    _Spec("diabetes-high-progression", "eval", "classification", "f1", _diabetes_high,
          _PATIENTS + "measurements taken at baseline. Predict whether the disease progressed strongly one "
          "year later (`high_progression`).", ("bmi", "blood_pressure", "ldl"), 22, ("no", "yes")),
    _Spec("breast-cancer-mean-area", "eval", "regression", "rmse", _breast_cancer_area,
          _NUCLEI + " (texture, smoothness, compactness, concavity, symmetry...; radius, perimeter and other "
          "area columns removed) and its diagnosis. Predict `mean_area`, the mean area of the nuclei.",
          ("mean_texture", "worst_concavity", "diagnosis"), 23),
)  # fmt: skip
_SPEC_BY_NAME = {spec.name: spec for spec in _SPECS}


@dataclass(frozen=True)
class _Data:
    train: pd.DataFrame  # id, features, target
    test: pd.DataFrame  # id, features
    labels: pd.DataFrame  # id, target of the test rows, in test's order


@functools.cache
def _build(name: str) -> _Data:
    """The messy, split frames of a builtin task (cached: callers must copy before changing them)."""
    spec = _SPEC_BY_NAME[name]
    frame = spec.load().reset_index(drop=True)
    target = frame.columns[-1]
    rng = np.random.default_rng(spec.seed)
    for column in spec.missing:
        rows = rng.choice(len(frame), size=round(_MISSING_SHARE * len(frame)), replace=False)
        frame.loc[rows, column] = np.nan
    frame.insert(0, "id", rng.permutation(len(frame)) + 1)
    stratify = frame[target] if spec.kind == "classification" else None
    train, test = train_test_split(frame, test_size=_TEST_SHARE, random_state=spec.seed, stratify=stratify)
    train, test = (part.sort_values("id").reset_index(drop=True) for part in (train, test))
    return _Data(train, test.drop(columns=target), test[["id", target]])


def _submission_rule(spec: _Spec, target: str) -> str:
    if spec.kind == "regression":
        return f"`{target}` is a number"
    if spec.metric == "roc_auc":
        return f"`{target}` is the predicted probability (0 to 1) that {target} is `{spec.classes[-1]}`"
    return f"`{target}` is one of {', '.join(spec.classes)}"


def _metric_text(spec: _Spec, target: str) -> str:
    if spec.metric in ("rmse", "mae"):
        long = "root mean squared error" if spec.metric == "rmse" else "mean absolute error"
        text = f"{long} ({spec.metric}) of `{target}`"
    elif spec.metric == "accuracy":
        text = "accuracy (the share of test rows whose class is right)"
    elif spec.metric == "roc_auc":
        text = f"area under the ROC curve (roc_auc) of the probabilities for class `{spec.classes[-1]}`"
    elif len(spec.classes) == 2:
        text = f"f1 score of the positive class `{spec.classes[-1]}`"
    else:
        text = "macro-averaged f1 score (the mean of the per-class f1 scores)"
    direction = "higher" if METRICS[spec.metric] else "lower"
    return f"{text} on the test rows; {direction} is better"


def _describe(spec: _Spec, data: _Data) -> str:
    target = data.labels.columns[-1]
    return "\n".join(
        (
            f"Task: {spec.name} ({spec.kind}).",
            spec.about,
            "",
            "Files in the workspace:",
            f"- train.csv: {len(data.train)} rows; the id column `id`, the feature columns and the target "
            f"column `{target}`. Some feature values are missing.",
            f"- test.csv: {len(data.test)} rows; `id` and the same feature columns, without `{target}`.",
            "- sample_submission.csv: the submission format, with placeholder values.",
            "",
            f"Metric: {_metric_text(spec, target)}.",
            f"Submission: submission.csv with exactly the columns id,{target} and one row per id of "
            f"test.csv ({len(data.test)} rows), in any order; {_submission_rule(spec, target)}.",
        )
    )


def _task(spec: _Spec) -> TabularTask:
    data = _build(spec.name)
    target = data.labels.columns[-1]
    return TabularTask(spec.name, spec.kind, spec.metric, _describe(spec, data), "id", (target,), "builtin")


def builtin_tasks(split: str) -> list[TabularTask]:
    """The builtin tasks of `split`: "train" (6 tasks) or "eval" (3 tasks); no name is in both."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    return [_task(spec) for spec in _SPECS if spec.split == split]


def task_classes(task: TabularTask) -> tuple[str, ...]:
    """A builtin classification task's labels (a binary task's positive class last); () otherwise."""
    spec = _SPEC_BY_NAME.get(task.name) if task.source == "builtin" else None
    return spec.classes if spec else ()


# ---------------------------------------------------------------- problems
def task_to_problem(task: TabularTask) -> Problem:
    meta = {
        "kind": task.kind,
        "metric": task.metric,
        "source": task.source,
        "id_column": task.id_column,
        "target_columns": list(task.target_columns),
    }
    return Problem(id=task.name, question=task.description, answer="", meta=meta)


def problem_to_task(problem: Problem) -> TabularTask:
    """The task a `task_to_problem` problem came from (a DSBench one is read again from its folder)."""
    source = problem.meta.get("source")
    if source == "builtin":
        if problem.id not in _SPEC_BY_NAME:
            known = ", ".join(_SPEC_BY_NAME)
            raise ValueError(f"problem {problem.id!r}: no builtin tabular task of that name; known: {known}")
        return _task(_SPEC_BY_NAME[problem.id])
    if not source:
        raise ValueError(f"problem {problem.id!r}: meta has no `source`; make problems with task_to_problem")
    return load_dsbench_tasks(source, [problem.id])[0]


_SOURCE_FORMS = "builtin:train, builtin:eval, dsbench:<data_modeling folder>, dsbench:<folder>#name1,name2"


def load_task_problems(source: str) -> list[Problem]:
    """Problems of the tasks named by `source` (one of `_SOURCE_FORMS`), in a stable order."""
    if source.startswith("builtin:") and source.removeprefix("builtin:") in SPLITS:
        return [task_to_problem(task) for task in builtin_tasks(source.removeprefix("builtin:"))]
    if source.startswith("dsbench:") and source.removeprefix("dsbench:").split("#")[0]:
        root, _, subset = source.removeprefix("dsbench:").partition("#")
        names = [name.strip() for name in subset.split(",") if name.strip()] or None
        return [task_to_problem(task) for task in load_dsbench_tasks(root, names)]
    raise ValueError(f"tabular task source {source!r} is not understood; use one of: {_SOURCE_FORMS}")


# ---------------------------------------------------------------- files
def public_frames(task: TabularTask) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test) as the agents see them; copies, safe to change."""
    if task.source == "builtin":
        data = _build(task.name)
        return data.train.copy(), data.test.copy()
    folder = resplit_folder(task)
    return pd.read_csv(folder / "train.csv"), pd.read_csv(folder / "test.csv")


def write_workspace(task: TabularTask, folder: Path) -> list[str]:
    """Write the task's public files (never labels) into `folder`; returns the names written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if task.source != "builtin":
        written = []
        for entry in sorted(resplit_folder(task).iterdir()):
            if entry.is_dir():
                shutil.copytree(entry, folder / entry.name, dirs_exist_ok=True)
            else:
                shutil.copy2(entry, folder / entry.name)
            written.append(entry.name)
        return written
    data, spec = _build(task.name), _SPEC_BY_NAME[task.name]
    target = data.labels.columns[-1]
    placeholder = 0.5 if spec.metric == "roc_auc" else spec.classes[0] if spec.classes else 0.0
    sample = pd.DataFrame({"id": data.test["id"], target: placeholder})
    for name, frame in zip(PUBLIC_FILES, (data.train, data.test, sample)):
        frame.to_csv(folder / name, index=False)
    return list(PUBLIC_FILES)


def hidden_labels(task: TabularTask) -> pd.DataFrame:
    """The id column and target columns of the test rows: what the grader compares a submission with."""
    if task.source == "builtin":
        return _build(task.name).labels.copy()
    return read_answers(task)


_BUNDLED_DATA = (  # (package, folder): installed copies of the builtin data sets, labels included
    ("sklearn", "datasets/data"),
    ("sklearn", "datasets/descr"),
    ("sklearn", "datasets/images"),
    ("sklearn", "datasets/tests/data"),  # OpenML's iris, gzipped
    ("scipy", "io/arff/tests/data"),  # iris.arff
    ("scipy", "spatial/tests/data"),  # iris.txt: the features in the original order, so the species too
)


def _bundled_data() -> list[Path]:
    """The folders of `_BUNDLED_DATA` that exist in this environment."""
    found = []
    for package, folder in _BUNDLED_DATA:
        spec = importlib.util.find_spec(package)
        if spec and spec.submodule_search_locations:
            found.append(Path(spec.submodule_search_locations[0]) / folder)
    return [path for path in found if path.exists()]


def paths_to_hide(task: TabularTask) -> tuple[str, ...]:
    """Existing paths an agent sandbox must not read because they reveal the test labels."""
    if task.source == "builtin":
        return tuple(str(path) for path in _bundled_data())
    root = Path(task.source)
    return tuple(
        str(root / n) for n in ("data/answers", "save_performance", "evaluation") if (root / n).exists()
    )
