"""A Prefect task retry: the coach endpoint fails a few requests, the score task retries (retries.score) and
finishes, asking the coach only for the answers it did not get the first time."""

from __future__ import annotations

from collections import Counter

import pytest
from tiny_run import scripted_coach, write_tiny_config

from mappa.stages import output_parts
from mappa.storage.run import Run

pytestmark = pytest.mark.slow


def test_score_task_retry_asks_only_for_missing_answers(
    tmp_path, tiny_model, prefect_harness, ray_local, coach_server
):
    from mappa.flows.train import train

    path = write_tiny_config(
        tmp_path / "config.yaml",
        tiny_model,
        tmp_path / "runs",
        name="retry",
        coach=scripted_coach(coach_server.base_url),
        retries={"score": 2, "delay_s": 0.1},
    )
    coach_server.state.fail_next = 2  # a passing outage: two requests answered with HTTP 503
    train(config_path=str(path), run_id="retry-run")

    run = Run.open(str(tmp_path / "runs"), "retry-run")
    kinds = Counter((e["stage"], e["kind"]) for e in run.events())
    assert kinds[("score", "started")] == 2 and kinds[("score", "finished")] == 1, kinds
    actions = len(run.store.read_parquet(*output_parts(run, 0, "score")))
    assert max(coach_server.state.answered.values()) == 1
    assert sum(coach_server.state.answered.values()) == actions
    manifest = run.read_manifest(0, "score")
    assert manifest["coach_cache"]["hits"] == actions - manifest["coach_cache"]["new_answers"] > 0
