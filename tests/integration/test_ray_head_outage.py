"""A lost Ray head ends the run in one line, and `mappa resume` finishes it once a head is back.

A real `ray start --head` on loopback (token auth off, as the cluster test runs it); `mappa train` joins it
through RAY_ADDRESS. Inside iteration 0's update every process of the head is SIGKILLed, as a restarted
machine would lose them. Without `mappa.cluster.head_watch`, Ray's core ends the driver after its GCS
reconnect window with a C++ log line and nothing about the run; with it, the command prints the run's line
(the stage, the head's address, the resume command) before that. The window is shortened to 15 s here
(RAY_gcs_rpc_server_reconnect_timeout_s; the watch acts 10 s before it, 5 s at the earliest). A head
started again on the same port takes the resume: the run finishes, iteration 0's finished stages'
manifests byte for byte as they were, and the killed update trained each agent once.
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
from mappa_process import MappaProcess, child_env
from ray_nodes import RayNode
from tiny_run import NO_RETRIES, write_tiny_config

from mappa.stages import TRAINING
from mappa.storage.run import MANIFEST, Run

pytestmark = pytest.mark.slow

TIMEOUT_S = 600
NO_AUTH = {"RAY_AUTH_MODE": "disabled"}


def test_a_lost_ray_head_ends_the_run_in_one_line_and_resume_finishes_it(
    tmp_path, tiny_model, prefect_api_url
):
    root, run_id = tmp_path / "runs", "headless"
    config = write_tiny_config(
        tmp_path / "config.yaml",
        tiny_model,
        root,
        iterations=2,
        retries=NO_RETRIES,
        cluster={"torch_threads": 1},
    )
    head = RayNode({}, {**os.environ, **NO_AUTH}, dashboard=False)
    try:
        env = child_env(
            prefect_api_url, RAY_ADDRESS=head.address, RAY_gcs_rpc_server_reconnect_timeout_s="15", **NO_AUTH
        )
        train = MappaProcess(["train", str(config), "--run-id", run_id], env, tmp_path / "train.txt")
        train.wait_for_event(root, run_id, (0, "score", "finished"), TIMEOUT_S)
        finished = [root / run_id / "iter-0000" / stage / MANIFEST for stage in ("rollout", "score")]
        before = {path: path.read_bytes() for path in finished}
        train.wait_for_event(root, run_id, (0, "update", "started"), TIMEOUT_S)
        head.kill()
        lost = time.monotonic()
        code = train.wait(120)
        printed = train.output()
        lines = [line for line in printed.splitlines() if line.strip()]
        assert code == 1 and "Traceback" not in printed, printed[-4000:]
        assert time.monotonic() - lost < 40, (
            "the run should end within Ray's own 15 s window and the watch's poll"
        )
        line = lines[-1]
        assert line.startswith(f"error: run {run_id} stopped in "), lines[-5:]
        assert f"the Ray cluster's head ({head.address}) stopped answering for" in line, line
        assert f"Continue with: mappa resume {run_id} --root {root} once a Ray head answers at" in line, line
        assert train.left == [], train.left

        head = RayNode({}, {**os.environ, **NO_AUTH}, port=head.port, dashboard=False)
        resume = MappaProcess(["resume", run_id, "--root", str(root)], env, tmp_path / "resume.txt")
        assert resume.wait(TIMEOUT_S) == 0, resume.output()[-4000:]
        assert resume.left == [], resume.left
    finally:
        head.kill()
    after = {p: p.read_bytes() for p in before}
    assert after == before  # the stages finished before the loss are untouched
    run = Run.open(str(root), run_id)
    kinds = Counter((e["iteration"], e["stage"], e["kind"]) for e in run.events())
    for iteration in (0, 1):
        for stage in (*TRAINING, "report", "retention"):
            assert kinds[(iteration, stage, "finished")] == 1, (iteration, stage, sorted(kinds.items()))
    trained = Counter((e["iteration"], e["agent"]) for e in run.events() if e["kind"] == "agent-finished")
    assert set(trained.values()) == {1}, trained
