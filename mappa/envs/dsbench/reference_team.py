"""A team that can do the builtin DSBench tasks: one fixed program per seat, for the blame check.

`mappa coach-check RUN --team reference` starts from these programs where a small policy cannot write a
working pipeline (SmolLM2-135M's programs crash before saving anything, so "the Data Engineer saves no
X_train.pkl" changes nothing downstream). With this team the Modeler's program really meets "file not
found" when the engineer's is corrupted: the MAPPA paper's case of a downstream agent reporting an upstream
mistake. The programs are plain pandas and scikit-learn, as the roles ask: the engineer one-hot encodes text
columns and fills missing values with medians, the modeler fits a random forest (cross-validated score
printed), the analyst predicts (for roc_auc: the positive class's probability) and writes the submission in
sample_submission.csv's columns.

Not covered: DSBench's published competitions (their files and targets vary; `reference_responses` refuses
them).
"""

from __future__ import annotations

from mappa.envs.api import Problem
from mappa.envs.dsbench.task_sets import problem_to_task, task_classes

_ENGINEER = """\
import pandas as pd

train = pd.read_csv("train.csv")
test = pd.read_csv("test.csv")
features = [c for c in train.columns if c not in ({id!r}, {target!r})]
both = pd.concat([train[features], test[features]], keys=["train", "test"])
both = pd.get_dummies(both, dtype=float)
both = both.fillna(both.median())
X_train, X_test = both.loc["train"], both.loc["test"]
X_train.to_pickle("X_train.pkl")
train[{target!r}].to_pickle("y_train.pkl")
X_test.to_pickle("X_test.pkl")
print("saved X_train.pkl", X_train.shape, "y_train.pkl", len(train), "X_test.pkl", X_test.shape)
"""

_MODELER = """\
import pickle

import pandas as pd
from sklearn.ensemble import {forest}
from sklearn.model_selection import cross_val_score

X = pd.read_pickle("X_train.pkl")
y = pd.read_pickle("y_train.pkl")
model = {forest}(n_estimators=100, random_state=0)
print("cross-validated {scoring}:", cross_val_score(model, X, y, cv=3, scoring={scoring!r}).mean())
model.fit(X, y)
with open("model.pkl", "wb") as handle:
    pickle.dump(model, handle)
print("saved model.pkl")
"""

_ANALYST = """\
import pickle

import pandas as pd

with open("model.pkl", "rb") as handle:
    model = pickle.load(handle)
X_test = pd.read_pickle("X_test.pkl")
test = pd.read_csv("test.csv")
columns = list(pd.read_csv("sample_submission.csv").columns)
{predict}
submission = pd.DataFrame({{{id!r}: test[{id!r}], {target!r}: predictions}})[columns]
submission.to_csv("submission.csv", index=False)
print(submission.head())
"""

_SCORING = {  # scikit-learn's scorer for the modeler's printed check, by the task's metric
    "rmse": "neg_root_mean_squared_error",
    "mae": "neg_mean_absolute_error",
    "f1": "f1_macro",
    "accuracy": "accuracy",
    "roc_auc": "accuracy",  # the string labels need a positive class for roc_auc; accuracy is printed
}


def reference_responses(problem: Problem) -> dict[str, str]:
    """Each seat's response (a ```python block) for a builtin task."""
    if problem.meta.get("source") != "builtin":
        raise ValueError(
            f"the reference team knows the builtin tasks only, not {problem.id!r} (source "
            f"{problem.meta.get('source')!r}); check the policy's own trajectories there (mappa coach-check "
            "without --team reference)"
        )
    task = problem_to_task(problem)
    target = task.target_columns[0]
    forest = "RandomForestRegressor" if task.kind == "regression" else "RandomForestClassifier"
    if task.metric == "roc_auc":
        positive = str(task_classes(task)[-1])
        predict = (
            f"positive = list(model.classes_).index({positive!r})\n"
            "predictions = model.predict_proba(X_test)[:, positive]"
        )
    else:
        predict = "predictions = model.predict(X_test)"
    programs = {
        "data_engineer": _ENGINEER.format(id=task.id_column, target=target),
        "modeler": _MODELER.format(forest=forest, scoring=_SCORING[task.metric]),
        "analyst": _ANALYST.format(id=task.id_column, target=target, predict=predict),
    }
    return {seat: f"```python\n{program}```" for seat, program in programs.items()}
