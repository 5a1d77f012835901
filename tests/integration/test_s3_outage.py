"""A run on S3 whose endpoint goes away mid-stage: once briefly (the run waits and finishes the stage), once
past `storage.outage_budget_s` (the run stops in one line, exit code 1, nothing left running), then
`mappa resume` finishes it with the stages finished before the outage untouched.

The endpoint is a real S3 server (moto's, on loopback) behind a proxy the test cuts (`cut_proxy`): moto
keeps its objects in memory and has no persistence for S3, so killing it would lose the bucket, which no
real outage does to acknowledged writes. The proxy is cut at a chosen request, as a dying server would cut
it: new connections are refused, open ones reset. `mappa train` runs in a child process through the proxy
with `AWS_MAX_ATTEMPTS=1`, so botocore's own retries (5-10 s per call by default) do not hide a short outage
from mappa's. One iteration, three seats on the tiny model, the rubric coach (no coach server):
1. cut when the driver writes the score stage's `scores.parquet` (the request dropped), back 1.5 s later:
   the stage waits (a log line per wait naming the endpoint), writes it, and the run goes on;
2. cut inside the solver's checkpoint upload (`model.safetensors`: 1 MiB of its body reaches the server,
   which keeps nothing of it), in the Ray worker, after the executor's is complete, and left down:
   the worker waits out the budget, the run stops with one line naming the endpoint, the log file on this
   machine and the resume command, and no process of the run is left;
3. back up: `mappa resume` finishes the run. The rollout, score and advantages manifests are byte for byte
   what they were, those stages never start again, the executor is not trained again, and no process is
   left.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from pathlib import Path

import boto3
import pytest
from cut_proxy import CutProxy
from mappa_process import MappaProcess, child_env
from tiny_run import NO_RETRIES, write_tiny_config

from mappa.storage.run import MANIFEST, Run

pytestmark = pytest.mark.slow

TIMEOUT_S = 300
BUDGET_S = 5  # storage.outage_budget_s of the run: longer than the first outage, short for the second
FINISHED = ("rollout", "score", "advantages")  # the stages done before the second outage


def manifests(bucket: str, run_id: str) -> dict[str, bytes]:
    """The bytes of the finished stages' manifests, read from the server directly (not through the proxy)."""
    client = boto3.client("s3")
    return {
        stage: client.get_object(Bucket=bucket, Key=f"runs/{run_id}/iter-0000/{stage}/{MANIFEST}")[
            "Body"
        ].read()
        for stage in FINISHED
    }


def test_an_outage_is_waited_out_and_a_longer_one_stops_the_run_in_one_line_for_resume(
    tmp_path, tiny_model, prefect_api_url, moto_s3
):
    run_id = f"s3-outage-{uuid.uuid4().hex[:8]}"
    proxy = CutProxy(int(moto_s3.env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]))
    env = child_env(prefect_api_url, AWS_ENDPOINT_URL=proxy.url, AWS_MAX_ATTEMPTS="1")
    config = write_tiny_config(
        tmp_path / "config.yaml",
        tiny_model,
        moto_s3.root,
        name="s3-outage",
        storage={"outage_budget_s": BUDGET_S},
        retries=NO_RETRIES,
        cluster={"num_cpus": 2, "torch_threads": 1},
    )
    prefix = f"PUT /{moto_s3.bucket}/runs/{run_id}".encode()
    try:
        started = time.monotonic()
        proxy.cut_at(prefix + b"/iter-0000/score/scores.parquet")
        train = MappaProcess(["train", str(config), "--run-id", run_id], env, tmp_path / "train.txt")
        assert proxy.cut.wait(TIMEOUT_S), f"the score stage never wrote; log:\n{train.output()[-3000:]}"
        time.sleep(1.5)
        proxy.restore()
        # the agents train in the config's order: executor, solver, verifier (its YAML's keys are sorted)
        proxy.cut_at(prefix + b"/checkpoints/solver/iter-0000/model.safetensors", forward_bytes=2**20)
        code = train.wait(TIMEOUT_S)
        down_s = time.monotonic() - proxy.cut_at_time
        printed = train.output()
        assert proxy.cut.is_set(), f"the run ended before the solver's checkpoint; log:\n{printed[-3000:]}"
        assert code == 1, printed[-3000:]
        assert not train.left, f"processes left after the run stopped: {train.left}"
        check_one_line(printed, run_id, moto_s3.root, proxy.url)
        assert "Traceback" not in printed, printed[-3000:]
        assert f"artifact store endpoint {proxy.url} answers again after" in log_of(printed).read_text()
        print(f"train: {time.monotonic() - started:.1f} s, the last {down_s:.1f} s with the store down")

        run = Run.open(moto_s3.root, run_id)  # straight to the server: the proxy is still down
        before = manifests(moto_s3.bucket, run_id)
        checkpoints = run.store.list(run_id, "checkpoints", "solver", "iter-0000")
        assert "model.safetensors" not in checkpoints, "the upload cut short left an object"
        assert "trainer_state.pt" not in checkpoints
        assert run.store.exists(*run.parts(0, "update", "agents/executor.json"))  # its checkpoint complete
        assert not run.has_manifest(0, "update")

        proxy.restore()
        resumed_at = time.monotonic()
        resume = MappaProcess(["resume", run_id, "--root", moto_s3.root], env, tmp_path / "resume.txt")
        assert resume.wait(TIMEOUT_S) == 0, resume.output()[-3000:]
        assert not resume.left, f"processes left after the resume: {resume.left}"
        print(f"resume: {time.monotonic() - resumed_at:.1f} s")
    finally:
        proxy.close()

    assert manifests(moto_s3.bucket, run_id) == before
    kinds = Counter((e["stage"], e["kind"]) for e in run.events())
    for stage in FINISHED:  # the resume found them finished (Prefect's cache: their tasks did not run)
        assert kinds[(stage, "started")] == 1 and kinds[(stage, "finished")] == 1, (stage, kinds)
    assert kinds[("update", "started")] == 2 and kinds[("update", "finished")] == 1, kinds
    trained = Counter(e["agent"] for e in run.events() if e["kind"] == "agent-finished")
    assert trained == Counter({"solver": 1, "executor": 1, "verifier": 1}), trained
    for stage in ("update", "retention"):
        assert run.has_manifest(0, stage), stage


def check_one_line(printed: str, run_id: str, root: str, endpoint: str) -> None:
    """The stopped run's last line: the store and its endpoint, the write it waited for, the wait, the log
    on this machine (the store is down) and the command that continues the run."""
    last = [line for line in printed.splitlines() if line.strip()][-1]
    pattern = (
        rf"error: run {run_id} stopped: the artifact store {root} \(endpoint {endpoint}\) did not answer for "
        rf"(\d+) s while writing {root}/{run_id}/checkpoints/solver/iter-0000/model.safetensors "
        rf"\(\w+; storage.outage_budget_s={BUDGET_S}\)\. Check that the endpoint is up .* The traceback is "
        rf"in (/\S+\.log); finished stages are kept\. Continue with: mappa resume {run_id} --root {root}"
    )
    found = re.fullmatch(pattern, last)
    assert found, last
    print(last)
    assert BUDGET_S <= int(found[1]) < BUDGET_S + 10, last
    assert "StoreOutageError" in Path(found[2]).read_text()  # the traceback, kept on this machine


def log_of(printed: str) -> Path:
    return Path(re.search(r"The traceback is in (/\S+\.log);", printed)[1])
