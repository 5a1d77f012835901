"""DSBench's corruptions for the blame check run for real in a workspace (mappa's sandbox): the paper's
file-not-found case, a target leak, a missing model."""

import pandas as pd

from mappa.agents.tool_calls import extract_python_block
from mappa.core.types import Action, Problem, Trajectory
from mappa.envs.dsbench.corruptions import CORRUPTIONS
from mappa.sandbox import SandboxLimits, run_python

LIMITS = SandboxLimits(timeout_s=60, memory_mb=2048)  # pandas imports slowly on a busy machine
ENGINEER = (
    "I save the features.\n```python\nimport pandas as pd\n"
    "pd.DataFrame({'a': [1, 2]}).to_pickle('X_train.pkl')\npd.Series([0, 1]).to_pickle('y_train.pkl')\n```\n"
)


def corrupted(name: str, response: str) -> str:
    action = Action("t", "p", "data_engineer", 0, 0, "", "", response, (), (), ())
    trajectory = Trajectory("t", Problem("p", "task", ""), (action,), None, False)
    return next(c for c in CORRUPTIONS if c.name == name).apply(action, trajectory)


def test_the_engineer_who_saves_no_training_file(tmp_path):
    text = corrupted("no-train-file", ENGINEER)
    assert text.startswith("I save the features.") and "os.remove('X_train.pkl')" in text
    assert run_python(extract_python_block(text), tmp_path, LIMITS).ok
    assert not (tmp_path / "X_train.pkl").exists() and (tmp_path / "y_train.pkl").exists()


def test_the_engineer_who_leaks_the_target(tmp_path):
    assert run_python(extract_python_block(corrupted("leaks-target", ENGINEER)), tmp_path, LIMITS).ok
    assert list(pd.read_pickle(tmp_path / "X_train.pkl")["target_leak"]) == [0, 1]


def test_no_program_no_corruption():
    assert corrupted("no-model", "I would train a forest.") is None
