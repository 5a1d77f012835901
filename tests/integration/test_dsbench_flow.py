"""The real `train` flow on the DSBench env for one iteration on the tiny model: Prefect (test harness),
Ray, a workspace per trajectory in the sandbox, grading against hidden labels, the rubric coach with
ground truth, the update, and an evaluation on held-out tasks; per-kind figures in the manifests."""

import json

import pytest
from tiny_run import write_tiny_config

from mappa.stages import output_parts, stage_complete
from mappa.stages.report import kind_rows_of
from mappa.storage.run import Run

pytestmark = pytest.mark.slow

SEATS = ("data_engineer", "modeler", "analyst")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_model, prefect_harness, ray_local):
    from mappa.flows.train import train

    root = tmp_path_factory.mktemp("runs")
    path = write_tiny_config(
        root / "config.yaml",
        tiny_model,
        root,
        SEATS,
        name="ds",
        env={"type": "dsbench", "max_turns": 1},
        rollout={"problems_per_iteration": 4, "eval_every": 1, "eval_problems": 2},
        sandbox={"timeout_s": 30, "memory_mb": 4096},
    )
    summary = train(config_path=str(path), run_id="ds-run")
    return Run.open(str(root), "ds-run"), summary


def test_the_pipeline_runs_every_stage_and_grades_each_task(finished_run):
    run, summary = finished_run
    assert [row["iteration"] for row in summary["iterations"]] == [0]
    actions = run.store.read_parquet(*output_parts(run, 0, "rollout"))
    assert list(dict.fromkeys(actions.sort_values(["trajectory_id", "index"])["agent"])) == list(SEATS)
    assert actions["trajectory_id"].nunique() == 4
    outcomes = [json.loads(text) for text in actions.drop_duplicates("trajectory_id")["outcome"]]
    # A random-init model writes no program, so no submission: graded invalid, with the reason
    assert all(o["valid"] is False and "submission.csv" in o["problem"] for o in outcomes)
    assert {o["kind"] for o in outcomes} <= {"regression", "classification"}
    assert stage_complete(run, 0, "update")


def test_blame_lands_on_the_engineer_and_ground_truth_on_the_analyst(finished_run):
    run, _ = finished_run
    scores = run.store.read_parquet(*output_parts(run, 0, "score"))
    rules = {
        agent: set(group["rationale"].str.extract(r"rule ([\w.]+)")[0])
        for agent, group in scores.groupby("agent")
    }
    assert rules["data_engineer"] == {"data_engineer.no_code"}
    assert rules["modeler"] == {"modeler.blocked"}  # no X_train.pkl: upstream's fault, scored 4
    assert rules["analyst"] == {"analyst.blocked"}
    used = scores.groupby("agent")["used_ground_truth"].any()
    assert not used["data_engineer"] and not used["modeler"]


def test_per_kind_figures_reach_manifests_inspect_and_evaluation(finished_run):
    run, _ = finished_run
    by_kind = run.read_manifest(0, "rollout")["by_kind"]
    assert by_kind and all(v["success_rate"] == 0.0 for v in by_kind.values())
    score_by_kind = run.read_manifest(0, "score")["mean_score_by_kind"]
    assert set(score_by_kind) == set(by_kind)
    rows = kind_rows_of(run, 0)
    assert {row["kind"] for row in rows} == set(by_kind) and all("coach_modeler" in row for row in rows)
    results = run.store.read_parquet(*run.parts(0, "evaluate", "results.parquet"))
    assert len(results) == 2 and {"kind", "metric", "fair_score"} <= set(results.columns)
    evaluated = run.store.read_json(*run.parts(0, "evaluate", "_manifest.json"))
    assert evaluated["by_kind"] and evaluated["eval_data"] == "builtin:eval"


def test_a_rescoring_compares_per_agent_and_per_kind_and_the_watch_reports_answers(
    finished_run, capsys, monkeypatch
):
    from mappa import cli
    from mappa.cli import main

    monkeypatch.setattr(cli.console, "width", 200)
    run, _ = finished_run
    args = ["rescore", run.run_id, "--root", run.store.root, "--as", "outcome", "--set", "coach.type=outcome"]
    assert main(args) == 0
    assert main(["inspect", run.run_id, "--root", run.store.root, "--coaches"]) == 0
    out = capsys.readouterr().out
    assert "per agent and task kind" in out and ("regression" in out or "classification" in out)
    score = run.read_manifest(0, "score")
    assert score["bias_warnings"] == [] and isinstance(score["answer_shares"], dict)


def test_the_reference_team_check_shows_the_modeler_meeting_file_not_found(finished_run, capsys, monkeypatch):
    """`mappa coach-check RUN --team reference`: the env's reference programs solve a held-out task, and
    with the engineer's program corrupted to delete X_train.pkl the modeler's own program, run again, meets
    FileNotFoundError; the rubric without ground truth blames the engineer for it."""
    from mappa import cli
    from mappa.cli import main
    from mappa.storage.frames import frame_to_trajectories

    monkeypatch.setattr(cli.console, "width", 200)  # the table's lines unwrapped

    run, _ = finished_run
    command = ["coach-check", run.run_id, "--root", run.store.root, "--team", "reference", "--problems", "1"]
    assert main([*command, "--seats", "data_engineer", "--coach", "outcome", "--coach", "rubric-nogt"]) == 0
    parts = (run.run_id, "coach-check", "reference-team")
    report = json.loads(run.store.read_text(*parts, "report.json"))
    assert all(pair["original_correct"] for pair in report["pairs"])  # the reference team solved it
    replays = {
        t.id.rsplit(":", 1)[1]: t
        for t in frame_to_trajectories(run.store.read_parquet(*parts, "replays.parquet"))
    }
    modeler = [a for a in replays["no-train-file"].actions if a.agent == "modeler"]
    assert (
        "FileNotFoundError" in modeler[0].tool_result.stderr
        and "X_train.pkl" in modeler[0].tool_result.stderr
    )
    assert not replays["no-train-file"].correct and replays["original"].correct
    rubric = {row["seat"]: row for row in report["rows"] if row["coach"] == "rubric-nogt"}
    assert rubric["data_engineer"]["by_corruption"]["no-train-file"]["blame_accuracy"] == 1.0
    printed = capsys.readouterr().out
    assert "reference-team" in printed and "no-train-file 1.00 (1)" in printed  # per corruption, printed
