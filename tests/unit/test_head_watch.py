"""The lost-head line: the stage that was running (from the run's events), the address the user wrote, and
the resume command; and the GCS probe on a port that listens and one that does not."""

from __future__ import annotations

import socket

from mappa.cluster.head_watch import gcs_answers, head_lost_line, running_stage


def test_the_running_stage_is_the_last_started_and_unfinished_one(synthetic_run):
    synthetic_run.record_event(2, "rollout", "started")
    synthetic_run.record_event(2, "rollout", "finished")
    synthetic_run.record_event(2, "score", "started")
    assert running_stage(synthetic_run) == (2, "score")
    synthetic_run.record_event(2, "score", "finished")
    assert running_stage(synthetic_run) is None


def test_the_line_names_the_head_the_user_wrote_and_how_to_go_on(synthetic_run, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.7:6379")
    line = head_lost_line(synthetic_run, "192.0.2.2:6379", 50.2, (1, "update"))
    root = synthetic_run.config.storage.root
    assert line == (
        f"error: run {synthetic_run.run_id} stopped in update (iteration 1): the Ray cluster's head "
        "(10.0.0.7:6379) stopped answering for 50 s, and the run's workers went with it. Finished stages are "
        f"kept. Continue with: mappa resume {synthetic_run.run_id} --root {root} once a Ray head answers at "
        "10.0.0.7:6379"
    )
    monkeypatch.delenv("RAY_ADDRESS")
    local = head_lost_line(synthetic_run, "192.0.2.2:6379", 50, None)
    assert "stopped: the local Ray cluster this command started (192.0.2.2:6379)" in local
    assert local.endswith(f"--root {root}")


def test_the_probe_tells_a_listening_port_from_a_closed_one():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        address = f"127.0.0.1:{listening.getsockname()[1]}"
        assert gcs_answers(address)
    assert not gcs_answers(address, timeout_s=0.5)
