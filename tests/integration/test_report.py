"""Report and evaluation artifacts on a real Prefect server (the test harness), read back with the client:
inside a flow's task, outside any run, and with the API unreachable (training must go on)."""

import base64
import json
import re
import socket

import pytest
from prefect import flow, task
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.client.schemas.sorting import ArtifactSort
from prefect.context import get_run_context
from prefect.settings import PREFECT_API_URL, temporary_settings

from mappa.stages import output_parts
from mappa.stages.report import artifact_key, publish_evaluation, publish_iteration_report
from mappa.storage.run import Run


def read_artifacts(key: str) -> list:
    """Every version of `key`, newest first."""
    with get_client(sync_client=True) as client:
        return client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])), sort=ArtifactSort.CREATED_DESC
        )


@task
def report(root: str, run_id: str, iteration: int) -> dict:
    return publish_iteration_report(Run.open(root, run_id), iteration)


@flow
def report_flow(root: str, run_id: str) -> tuple[list[dict], str]:
    published = [report(root, run_id, iteration) for iteration in (0, 1)]
    return published, str(get_run_context().flow_run.id)


def test_iteration_reports_inside_a_flow(prefect_harness, synthetic_run):
    run = synthetic_run
    published, flow_run_id = report_flow(run.store.root, run.run_id)
    assert all(not p["errors"] for p in published)
    table_key = artifact_key(run.run_id, "agents")
    assert re.fullmatch(r"mappa-synthetic-run-1-[0-9a-f]{6}-agents", table_key)
    tables = [a for a in read_artifacts(table_key) if str(a.flow_run_id) == flow_run_id]
    assert [a.description for a in tables] == ["run synthetic_run.1, iteration 1: agents"] + [
        "run synthetic_run.1, iteration 0: agents"
    ]
    assert str(tables[0].id) == published[1]["artifacts"]["agents"]["id"] and tables[0].task_run_id
    rows = {row["agent"]: row for row in json.loads(tables[0].data)}
    assert rows["solver"]["mean_score"] == 5.0 and rows["solver"]["std_score"] == 1.0
    assert rows["executor"]["loss"] == 1.4 and rows["executor"]["kl"] == 0.002
    assert rows["executor"]["tokens_per_s"] == 200.0 and rows["executor"]["clip_fraction"] == 0.1
    assert rows["verifier"]["mean_score"] == 7.0 and rows["verifier"]["kl"] is None  # frozen agent

    progress = [
        a for a in read_artifacts(artifact_key(run.run_id, "progress")) if str(a.flow_run_id) == flow_run_id
    ]
    rows = json.loads(progress[0].data)  # the latest version holds every iteration so far
    assert [row["iteration"] for row in rows] == [0, 1] and [row["success_rate"] for row in rows] == [
        0.25,
        0.5,
    ]
    assert rows[1]["score solver"] == 5.0 and rows[1]["kl executor"] == 0.002 and rows[1]["rollout s"] == 11.0
    for iteration in (0, 1):  # each iteration's report stays reachable under its own key
        (own,) = read_artifacts(artifact_key(run.run_id, f"report-iter-000{iteration}"))[:1]
        assert f"iteration {iteration}" in own.data

    markdown = read_artifacts(artifact_key(run.run_id, "report"))[0]
    assert str(markdown.id) == published[1]["artifacts"]["report"]["id"]
    text = markdown.data
    assert "iteration 1" in text and "success rate: 50% (4 trajectories, 6 actions)" in text
    assert "coach: `rubric`, parse status: fallback 1, ok 5" in text and "solver 0.50" in text
    assert "correct minus incorrect trajectories: +1.50" in text
    assert "| rollout | 11.0 |" in text and "| update | 4.0 |" in text
    score_file = run.store.url(*output_parts(run, 1, "score"))
    assert f"`{score_file}`" in text and "](<" not in text  # paths as text: as links the UI would 404
    png = run.store.read_bytes(*run.parts(1, "report", "curves.png"))
    assert published[1]["png_url"] == run.store.url(*run.parts(1, "report", "curves.png"))
    embedded = re.search(r"\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", text).group(1)
    assert base64.b64decode(embedded) == png and png.startswith(b"\x89PNG")


def test_evaluation_outside_a_run(prefect_harness, synthetic_run):
    results = [
        {"problem_id": "p1", "correct": True, "final_answer": "4", "gold_answer": "4"},
        {"problem_id": "p2", "correct": False, "final_answer": None, "gold_answer": "5"},
        {"problem_id": "p3", "correct": True, "final_answer": "9", "gold_answer": "9"},
        {"problem_id": "p4", "correct": True, "final_answer": "1", "gold_answer": "1"},
    ]
    with pytest.warns(FutureWarning, match="outside of a flow or task run"):
        published = publish_evaluation(synthetic_run, 1, results)
    assert published["accuracy"] == 0.75 and not published["errors"]
    artifact = read_artifacts(artifact_key(synthetic_run.run_id, "evaluation"))[0]
    assert str(artifact.id) == published["artifacts"]["evaluation"]["id"] and artifact.flow_run_id is None
    assert artifact.description == (
        "run synthetic_run.1, evaluation of the checkpoint of iteration 1: accuracy 75.0% on 4"
    )
    rows = json.loads(artifact.data)
    assert rows[:4] == results
    assert rows[4] == {"problem_id": "all (n=4)", "correct": 0.75, "final_answer": None, "gold_answer": None}


def test_an_unreachable_api_is_reported_not_raised(synthetic_run):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unattached = pytest.warns(FutureWarning, match="outside of a flow or task run")
    with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{port}/api"}), unattached:
        published = publish_iteration_report(synthetic_run, 0)
    assert [a["id"] for a in published["artifacts"].values()] == [None] * 4
    assert len(published["errors"]) == 4 and "agents" in published["errors"][0]
    assert synthetic_run.store.exists(*synthetic_run.parts(0, "report", "curves.png"))


def test_a_table_per_task_kind_where_the_env_grades_by_kind(prefect_harness, synthetic_run):
    run = synthetic_run
    by_kind = {
        "classification": {
            "trajectories": 2,
            "success_rate": 1.0,
            "fair_score_mean": 0.8,
            "metrics": {"f1": 0.9},
        },
        "regression": {
            "trajectories": 2,
            "success_rate": 0.5,
            "fair_score_mean": 0.4,
            "metrics": {"rmse": 3.5},
        },
    }
    coach = {"classification": {"all": 6.0, "modeler": 7.0}, "regression": {"all": 5.0, "modeler": 4.0}}
    rollout, score = run.read_manifest(1, "rollout"), run.read_manifest(1, "score")
    run.store.write_json({**rollout, "by_kind": by_kind}, *run.parts(1, "rollout", "_manifest.json"))
    run.store.write_json({**score, "mean_score_by_kind": coach}, *run.parts(1, "score", "_manifest.json"))
    published = publish_iteration_report(run, 1)
    assert not published["errors"] and published["artifacts"]["kinds"]["id"]
    rows = json.loads(read_artifacts(artifact_key(run.run_id, "kinds"))[0].data)
    assert [(r["kind"], r["success_rate"], r.get("rmse_mean"), r["coach_modeler"]) for r in rows] == [
        ("classification", 1.0, None, 7.0),
        ("regression", 0.5, 3.5, 4.0),
    ]
    text = read_artifacts(artifact_key(run.run_id, "report"))[0].data
    assert "- regression: success 50% of 2, relative score 0.40, coach mean 5.00" in text
    assert "kinds" not in publish_iteration_report(run, 0)["artifacts"]  # MathChat: no kinds, no table
