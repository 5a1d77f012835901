"""The DSBench pipeline with scripted agents writing real pandas / scikit-learn code (the tests are about the
env, not a model): files handed over through the workspace, turns and early stop, grading against hidden
labels, blame in the rubric coach's rules, and hidden labels kept out of prompts, workspace and sandbox."""

import asyncio

import pandas as pd
import pytest
from scripted_chat import scripted

from mappa.agents.agent import Agent
from mappa.coach.prompt import build_requests
from mappa.coach.rubric import RubricCoach
from mappa.envs.dsbench.task_sets import (
    builtin_tasks,
    hidden_labels,
    paths_to_hide,
    task_to_problem,
    write_workspace,
)
from mappa.envs.dsbench.team import ROLES, SEATS, SPEC, metrics_reference, run_dsbench
from mappa.inference.engine import SamplingParams
from mappa.sandbox import SandboxLimits, bwrap_available

TASK_NAME = "iris-species"
LIMITS = SandboxLimits(timeout_s=60, memory_mb=4096, cpu_s=60)

ENGINEER = """```python
import pandas as pd
train, test = pd.read_csv("train.csv"), pd.read_csv("test.csv")
features = [c for c in test.columns if c != "id"]
X_train = train[features].fillna(train[features].median())
X_test = test[features].fillna(train[features].median())
X_train.to_pickle("X_train.pkl"); train["species"].to_pickle("y_train.pkl"); X_test.to_pickle("X_test.pkl")
print("saved", X_train.shape, X_test.shape)
```"""
MODELER = """```python
import pickle
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
X, y = pd.read_pickle("X_train.pkl"), pd.read_pickle("y_train.pkl")
model = RandomForestClassifier(n_estimators=50, random_state=0).fit(X, y)
pickle.dump(model, open("model.pkl", "wb"))
print("trained")
```"""
ANALYST = """```python
import pickle
import pandas as pd
model, X_test = pickle.load(open("model.pkl", "rb")), pd.read_pickle("X_test.pkl")
ids = pd.read_csv("test.csv")["id"]
pd.DataFrame({"id": ids, "species": model.predict(X_test)}).to_csv("submission.csv", index=False)
print("wrote", len(ids))
```"""


def _problem():
    task = next(t for t in builtin_tasks("train") if t.name == TASK_NAME)
    return task, task_to_problem(task)


def _roll_out(script: dict[str, list[str]], max_turns: int = 2, tmp_path=None):
    seen: list = []
    agents = {
        seat: Agent(seat, ROLES[seat], scripted(script[seat], seen), SamplingParams()) for seat in SEATS
    }
    _, problem = _problem()
    root = str(tmp_path) if tmp_path else None
    trajectories = asyncio.run(
        run_dsbench([("t1", problem)], agents, LIMITS, max_turns=max_turns, workspace_root=root)
    )
    return trajectories[0], seen


def _rubric(trajectory, use_ground_truth: bool) -> list[tuple[str, float]]:
    requests = build_requests(
        trajectory,
        trajectory.problem.question,
        ROLES,
        "dsbench",
        use_ground_truth,
        reference_fn=metrics_reference,
    )
    scores = asyncio.run(RubricCoach(use_ground_truth, SPEC).score(requests))
    return [(s.rationale.split(":")[0].removeprefix("rule "), s.score) for s in scores]


@pytest.fixture(scope="module")
def working(tmp_path_factory):
    """One rollout of a working pipeline (its workspace root kept, to see it emptied): (trajectory, chats,
    root)."""
    root = tmp_path_factory.mktemp("workspaces")
    trajectory, seen = _roll_out(
        {"data_engineer": [ENGINEER], "modeler": [MODELER], "analyst": [ANALYST]}, 2, root
    )
    return trajectory, seen, root


def test_a_working_pipeline_hands_files_over_and_is_graded(working):
    trajectory, _, root = working
    assert [(a.agent, a.turn) for a in trajectory.actions] == [
        ("data_engineer", 0),
        ("modeler", 0),
        ("analyst", 0),
    ]
    assert all(a.tool_result.ok for a in trajectory.actions), [
        a.tool_result.stderr for a in trajectory.actions
    ]
    assert {"X_train.pkl", "y_train.pkl", "X_test.pkl"} <= set(trajectory.actions[0].tool_result.files)
    assert "X_train.pkl (" in trajectory.actions[1].observation  # the modeler saw the engineer's files
    assert "saved (" in trajectory.actions[1].observation  # and what its program printed
    outcome = trajectory.outcome
    assert trajectory.correct and outcome["valid"] and outcome["kind"] == "classification"
    assert outcome["metric"] == "accuracy" and outcome["value"] > 0.8 and outcome["fair_score"] > 0.5
    assert trajectory.final_answer.startswith("accuracy ")
    assert list(root.iterdir()) == []  # the workspace is gone once graded
    assert _rubric(trajectory, False) == [
        ("data_engineer.saved_all", 8),
        ("modeler.saved_all", 8),
        ("analyst.saved_all", 7),
    ]
    graded = _rubric(trajectory, True)
    assert graded[2][0] == "analyst.gt_valid" and graded[2][1] >= 8.5


def test_an_upstream_crash_is_blamed_upstream_not_on_who_reports_it():
    broken = ENGINEER.replace('read_csv("train.csv")', 'read_csv("train.cvs")')
    trajectory, seen = _roll_out(
        {"data_engineer": [broken, broken], "modeler": [MODELER, MODELER], "analyst": [ANALYST, ANALYST]}
    )
    assert [(a.agent, a.turn) for a in trajectory.actions] == [
        ("data_engineer", 0),
        ("data_engineer", 1),
        ("modeler", 0),
        ("modeler", 1),
        ("analyst", 0),
        ("analyst", 1),
    ]
    assert "train.cvs" in trajectory.actions[1].observation  # its retry saw its own error
    assert "X_train.pkl" in trajectory.actions[2].tool_result.stderr  # the modeler hit the missing file
    assert not trajectory.correct and "submission.csv" in trajectory.outcome["problem"]
    rules = _rubric(trajectory, True)
    assert rules[:2] == [("data_engineer.crashed", 2), ("data_engineer.crashed", 2)]
    assert rules[2:] == [("modeler.blocked_reported", 5)] * 2 + [("analyst.blocked_reported", 5)] * 2


def test_ground_truth_reaches_the_coach_for_the_analyst_only(working):
    trajectory, _, _ = working
    requests = build_requests(
        trajectory, trajectory.problem.question, ROLES, "dsbench", True, reference_fn=metrics_reference
    )
    shown = ["COMPUTED RESULT" in r.messages[1]["content"] for r in requests]
    assert shown == [False, False, True]
    assert [r.used_ground_truth for r in requests] == shown
    without = build_requests(
        trajectory, trajectory.problem.question, ROLES, "dsbench", False, reference_fn=metrics_reference
    )
    assert not any("COMPUTED RESULT" in r.messages[1]["content"] for r in without)


def test_hidden_labels_stay_out_of_prompts_and_workspace(tmp_path, working):
    task, _ = _problem()
    assert write_workspace(task, tmp_path) == ["train.csv", "test.csv", "sample_submission.csv"]
    assert "species" not in pd.read_csv(tmp_path / "test.csv").columns
    assert pd.read_csv(tmp_path / "sample_submission.csv")["species"].nunique() == 1  # a placeholder
    trajectory, seen, _ = working
    labels = hidden_labels(task)
    test_ids = set(labels["id"].astype(str))
    assert len(test_ids) > 10
    pairs = {f"\n{i},{y}\n" for i, y in zip(labels["id"], labels["species"], strict=True)}
    for action in trajectory.actions:  # a leaked label file would show `id,label` lines: none appears
        lines = f"\n{action.observation}\n"
        assert not any(pair in lines for pair in pairs)


@pytest.mark.skipif(not bwrap_available(), reason="covering paths needs bubblewrap")
def test_the_sandbox_cannot_read_the_bundled_data_behind_the_labels():
    task, _ = _problem()
    peek = "```python\nfrom sklearn.datasets import load_iris\nprint(load_iris().target[:5])\n```"
    trajectory, _ = _roll_out({"data_engineer": [peek, peek], "modeler": [""] * 2, "analyst": [""] * 2})
    result = trajectory.actions[0].tool_result
    assert result.exit_code != 0 and "iris" in result.stderr.lower(), result
    assert paths_to_hide(task)
