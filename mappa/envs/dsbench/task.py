"""What a tabular modelling task is (`TabularTask`), its kinds, metrics and public file names.

Built-in tasks come from `mappa.envs.dsbench.task_sets`, DSBench ones from `mappa.envs.dsbench.published`;
both make these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["regression", "classification"]
METRICS = {"rmse": False, "mae": False, "f1": True, "accuracy": True, "roc_auc": True}  # higher is better
PUBLIC_FILES = ("train.csv", "test.csv", "sample_submission.csv")
OUTPUTS = {  # what each seat of the DSBench pipeline saves into the workspace (its env and rubric read it)
    "data_engineer": ("X_train.pkl", "y_train.pkl", "X_test.pkl"),
    "modeler": ("model.pkl",),
    "analyst": ("submission.csv",),
}


@dataclass(frozen=True)
class TabularTask:
    """One tabular modelling task; `name` is also the id of its `Problem`."""

    name: str
    kind: Kind
    metric: str  # a METRICS key, or "dsbench-script" (the competition's own scoring script)
    description: str  # what the agents read; never holds a label value
    id_column: str
    target_columns: tuple[str, ...]  # submission columns besides the id
    source: str  # "builtin" or the path of a DSBench data_modeling folder
