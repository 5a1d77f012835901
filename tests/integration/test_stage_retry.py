"""A score stage that fails, through the CLI: an outage that outlasts the stage's retries ends `mappa train`
with one line (the stage, the error, the log file that holds the traceback, the command that continues);
`mappa resume` with retries then rides out a passing outage (the score task retries, retries.score) and
finishes, asking the coach only for the answers it did not get before."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from tiny_run import scripted_coach, write_tiny_config

from mappa.cli import main
from mappa.stages import output_parts
from mappa.storage.run import Run

pytestmark = pytest.mark.slow


def test_a_failed_stage_is_one_line_and_a_resume_with_retries_asks_only_for_missing_answers(
    tmp_path, tiny_model, prefect_harness, ray_local, coach_server, capfd
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
    resume = ["resume", "retry-run", "--root", str(root), "--set", "retries.score=2"]
    assert main(resume) == 0, capfd.readouterr()

    run = Run.open(str(root), "retry-run")
    kinds = Counter((e["stage"], e["kind"]) for e in run.events())
    assert kinds[("rollout", "started")] == 1, kinds  # the resume did not roll out again
    assert kinds[("score", "started")] == 3 and kinds[("score", "failed")] == 2, kinds
    assert kinds[("score", "finished")] == 1, kinds
    actions = len(run.store.read_parquet(*output_parts(run, 0, "score")))
    assert max(coach_server.state.answered.values()) == 1
    assert sum(coach_server.state.answered.values()) == actions
    manifest = run.read_manifest(0, "score")
    assert manifest["coach_cache"]["hits"] == actions - manifest["coach_cache"]["new_answers"] > 0
    assert len(list(Path(root, "retry-run", "logs").glob("resume-*.log"))) == 1
