"""The real `evaluate` flow on the tiny model after a trained iteration: Prefect (test harness), Ray,
sandbox; the base model's evaluation; a finished evaluation is skipped."""

import json
import shutil

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

from mappa.stages import output_hash
from mappa.stages.evaluate import evaluation_complete, evaluation_parts

pytestmark = pytest.mark.slow

RUN_ID = "it-run"  # the session's finished run (conftest.py)
PROBLEMS = 2  # its rollout.eval_problems

RESULT_COLUMNS = [
    "problem_id",
    "question",
    "gold_answer",
    "final_answer",
    "correct",
    "correct_boxed",
    "flexible_answer",
    "correct_flexible",
    "kind",  # the problem's operation and form (mappa.envs.mathchat.kinds)
    "trajectory_id",
    "actions",
    "seconds",
    "seat_solver",  # MathChat's seat checks (EnvSpec.seat_checks)
    "seat_executor",
    "seat_verifier",
]


@pytest.fixture(scope="module")
def trained_run(mathchat_run, tmp_path_factory):
    """A copy of the session's finished two-iteration run (conftest.py), evaluated after iteration 1 only;
    the tests here add evaluations to the copy."""
    from mappa.storage.run import Run

    run, _, _ = mathchat_run
    root = tmp_path_factory.mktemp("evaluated")
    shutil.copytree(run.store.path(run.run_id), root / run.run_id)
    return Run.open(str(root), run.run_id)


@pytest.fixture(scope="module")
def evaluated(trained_run):
    from mappa.flows.evaluate import evaluate

    return evaluate(run_id=RUN_ID, root=trained_run.store.root, iteration=0)


def test_results_hold_one_row_per_problem(trained_run, evaluated):
    results = trained_run.store.read_parquet(*evaluation_parts(trained_run, 0, "results.parquet"))
    assert list(results.columns) == RESULT_COLUMNS
    assert len(results) == PROBLEMS
    assert results["trajectory_id"].is_unique
    assert (results["actions"] >= 3).all()  # solver, executor, verifier
    actions = trained_run.store.read_parquet(*evaluation_parts(trained_run, 0, "trajectories.parquet"))
    assert set(actions["trajectory_id"]) == set(results["trajectory_id"])
    assert (actions["iteration"] == 0).all()
    assert trained_run.store.root in evaluated["output"]


def test_manifest_records_the_evaluation(trained_run, evaluated):
    assert evaluated["stage"] == "evaluate" and evaluated["iteration"] == 0
    assert evaluated["problems"] == PROBLEMS and evaluated["label"] == "iter-0000"
    assert evaluated["temperature"] == 0.0
    assert 0.0 <= evaluated["success_rate"] <= 1.0
    assert evaluated["inputs"] == {"update": output_hash(trained_run, 0, "update")}
    assert evaluated["timings"]["total_s"] >= evaluated["timings"]["rollout_s"] > 0
    assert evaluation_complete(trained_run, 0)


def test_results_are_published_as_a_table(trained_run, evaluated):
    from mappa.stages.report import artifact_key

    with get_client(sync_client=True) as client:
        key = ArtifactFilterKey(any_=[artifact_key(trained_run.run_id, "evaluation")])
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(key=key))
    assert artifacts and all(a.flow_run_id for a in artifacts)
    rows = json.loads(artifacts[0].data)
    assert len(rows) == PROBLEMS + 1  # the problems and an aggregate row


def test_a_second_evaluation_is_skipped(trained_run, evaluated, capsys):
    from mappa.cli import main

    assert main(["evaluate", RUN_ID, "--root", trained_run.store.root, "--iteration", "0"]) == 0
    out = capsys.readouterr().out
    assert "already evaluated" in out and "iter-0000" in out
    manifest = trained_run.store.read_json(*evaluation_parts(trained_run, 0, "_manifest.json"))
    assert manifest["finished_at"] == evaluated["finished_at"]


def test_the_base_model_is_evaluated_on_the_same_problems(trained_run, evaluated):
    from mappa.flows.evaluate import evaluate

    base = evaluate(run_id=RUN_ID, root=trained_run.store.root, iteration=-1)
    assert base["label"] == "base" and base["inputs"] == {}
    results = trained_run.store.read_parquet(*evaluation_parts(trained_run, -1, "results.parquet"))
    trained = trained_run.store.read_parquet(*evaluation_parts(trained_run, 0, "results.parquet"))
    assert list(results["problem_id"]) == list(trained["problem_id"])
    assert "/base/evaluate/" in base["output"]


def test_another_problem_file_is_evaluated_apart(trained_run, evaluated, tmp_path, capsys):
    """`mappa evaluate RUN --eval-data FILE`: the same checkpoint on the file's problems, under
    evaluate-on/NAME, its own artifact; the run's evaluation untouched; a second call skipped."""
    from mappa.cli import main
    from mappa.stages.report import artifact_key

    data = tmp_path / "bench.jsonl"
    rows = [
        {"id": "b0", "problem": "What is 5 + 4?", "answer": "9"},
        {"id": "b1", "problem": "6 - 2?", "answer": 4},
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    before = output_hash(trained_run, 0, "evaluate")
    command = [
        "evaluate",
        RUN_ID,
        "--root",
        trained_run.store.root,
        "--iteration",
        "0",
        "--eval-data",
        str(data),
    ]
    assert main(command) == 0
    assert "evaluation of iter-0000 on" in capsys.readouterr().out
    stage = "evaluate-on/bench"
    results = trained_run.store.read_parquet(*evaluation_parts(trained_run, 0, "results.parquet", stage))
    assert list(results["problem_id"]) == ["b0", "b1"]
    manifest = trained_run.store.read_json(*evaluation_parts(trained_run, 0, "_manifest.json", stage))
    assert manifest["stage"] == stage and manifest["eval_data"] == str(data) and manifest["problems"] == 2
    assert manifest["inputs"] == {"update": output_hash(trained_run, 0, "update")}
    assert output_hash(trained_run, 0, "evaluate") == before
    with get_client(sync_client=True) as client:
        key = ArtifactFilterKey(any_=[artifact_key(trained_run.run_id, "evaluation-on-bench")])
        assert client.read_artifacts(artifact_filter=ArtifactFilter(key=key))
    assert main(command) == 0
    assert "already evaluated" in capsys.readouterr().out
