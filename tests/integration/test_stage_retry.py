"""A score stage that fails, through the CLI: an outage that outlasts the stage's retries ends `mappa train`
with one line (the stage, the error, the log file that holds the traceback, the command that continues);
`mappa retry <the failed flow run's id>` (what the README offers for CLI-started runs, which `prefect
flow-run retry` cannot retry) with retries then rides out a passing outage (the score task retries,
retries.score) and finishes, asking the coach only for the answers it did not get before."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from prefect_api import stage_task_runs
from tiny_run import scripted_coach, write_tiny_config

from mappa.cli import main
from mappa.stages import output_parts
from mappa.storage.run import Run

pytestmark = pytest.mark.slow


def flow_runs_named(name: str) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name])))


def test_a_failed_stage_is_one_line_and_a_resume_with_retries_asks_only_for_missing_answers(
    tmp_path, tiny_model, prefect_api_url, ray_local, coach_server, capfd
):
    root = tmp_path / "runs"
    path = write_tiny_config(
        tmp_path / "config.yaml",
        tiny_model,
        root,
        name="retry",
        coach=scripted_coach(coach_server.base_url),
        retries={"score": 0, "delay_s": 0.1},
    )
    coach_server.state.fail_next = 10**6  # the coach answers nothing: the score stage fails
    assert main(["train", str(path), "--run-id", "retry-run"]) == 1
    out = capfd.readouterr()
    printed = out.out + out.err
    assert "Traceback" not in printed, printed[-3000:]
    error = next(line for line in printed.splitlines() if line.startswith("error:"))
    assert "run retry-run stopped in score (iteration 0)" in error and "HTTP 503" in error, error
    assert f"mappa resume retry-run --root {root}" in error, error
    logs = list((root / "retry-run" / "logs").glob("train-*.log"))
    assert len(logs) == 1 and str(logs[0]) in error, (logs, error)
    assert "Traceback" in logs[0].read_text() and "CoachUnavailableError" in logs[0].read_text()

    coach_server.state.fail_next = 2  # a passing outage: two requests answered with HTTP 503
    (failed,) = flow_runs_named("retry-run")  # the CLI-started flow run, as the UI lists it
    assert failed.state.is_failed() and {"mappa", "config:retry"} <= set(failed.tags)
    retry = ["retry", str(failed.id), "--set", "retries.score=2"]  # the flow run id, as copied from the UI
    assert main(retry) == 0, capfd.readouterr()
    (resumed,) = flow_runs_named("retry-run-resume")
    tasks = {t["name"]: t["state"]["name"] for t in stage_task_runs(prefect_api_url, [str(resumed.id)])}
    assert tasks["rollout-0"] == "Cached" and tasks["score-0"] == "Completed", tasks  # finished: Cached

    run = Run.open(str(root), "retry-run")
    kinds = Counter((e["stage"], e["kind"]) for e in run.events())
    assert kinds[("rollout", "started")] == 1, kinds  # the resume did not roll out again
    assert kinds[("score", "started")] == 3 and kinds[("score", "failed")] == 2, kinds
    assert kinds[("score", "finished")] == 1, kinds
    scores = run.store.read_parquet(*output_parts(run, 0, "score"))
    actions = int((scores["parse_status"] != "rule").sum())  # a blank action is scored by rule, not asked
    assert max(coach_server.state.answered.values()) == 1
    assert sum(coach_server.state.answered.values()) == actions
    manifest = run.read_manifest(0, "score")
    assert manifest["coach_cache"]["hits"] == actions - manifest["coach_cache"]["new_answers"] > 0
    assert len(list(Path(root, "retry-run", "logs").glob("resume-*.log"))) == 1
