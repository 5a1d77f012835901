"""A run on S3, killed and resumed, read back with `mappa inspect`, with no secret in any artifact or log.

The artifact root is `s3://mappa/runs` on a real S3 endpoint (moto's server on loopback). Credentials and
the coach's API key reach the `mappa` child processes through their environment only (random values per
test): the config YAML names neither. The run is SIGKILLed inside iteration 1's rollout and resumed; then
every stage, parquet file, checkpoint, Prefect result (`_prefect/` under the run) and coach answer is read
back from S3, the resumed flow run's finished tasks must show as Cached (Prefect read its results from S3),
and `mappa inspect` prints the run, an iteration, a trajectory and the curves from S3 in fresh processes.

Leak check: no secret value appears in any object of the bucket (all bytes), the child processes' output,
Ray's session logs, or the Prefect server's flow runs, task runs, logs and artifacts of this run.
Not covered: secrets that a model writes into its own output (the sandbox gets no secrets: test_sandbox).
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import boto3
import pytest
from mappa_process import MappaProcess, child_env
from prefect_api import api
from safetensors.torch import load
from tiny_run import NO_RETRIES, scripted_coach, write_tiny_config

from mappa.storage.run import STAGE_OUTPUTS, Run, iteration_name
from mappa.storage.store import ArtifactStore

pytestmark = pytest.mark.slow

SEATS = ("solver", "executor", "verifier")
TIMEOUT_S = 600
COACH_KEY_ENV = "MAPPA_TEST_COACH_KEY"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def write_config(folder: Path, tiny_model: Path, coach_url: str, root: str) -> Path:
    return write_tiny_config(
        folder / "config.yaml",
        tiny_model,
        root,
        name="s3",
        seed=5,
        iterations=2,
        coach=scripted_coach(coach_url, api_key_env=COACH_KEY_ENV),
        retries=NO_RETRIES,
        cluster={"num_cpus": 2, "torch_threads": 1},
    )


def kill_when_started(
    store: ArtifactStore, run_id: str, process: MappaProcess, iteration: int, stage: str
) -> None:
    """SIGKILL the run once its `started` event for `stage` is on S3 (listings are never cached)."""
    event = f"-{iteration_name(iteration)}-{stage}-started.json"
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and process.process.poll() is None:
        if any(name.endswith(event) for name in store.list(run_id, "events")):
            process.kill()
            return
        time.sleep(0.05)
    raise AssertionError(f"the run ended before {event} appeared; log:\n{process.output()[-3000:]}")


def bucket_objects(bucket: str) -> dict[str, bytes]:
    """Every object of the bucket, read with boto3 (credentials and endpoint from the environment)."""
    client = boto3.client("s3")
    keys = [
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for item in page.get("Contents", [])
    ]
    return {key: client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}


def prefect_records(api_url: str, run_id: str) -> tuple[list[dict], list[dict], list[dict], bytes]:
    """This run's `mappa-train` flow runs and their task runs, the result-storage blocks, and all the
    server holds on them (with their logs and report artifacts) as bytes."""
    flow_filter = {"flows": {"name": {"any_": ["mappa-train"]}}, "sort": "EXPECTED_START_TIME_DESC"}
    flow_runs = api("POST", f"{api_url}/flow_runs/filter", json=flow_filter).json()
    flow_runs = [f for f in flow_runs if f["parameters"].get("run_id") == run_id]
    ids = {"any_": [f["id"] for f in flow_runs]}
    task_runs = api("POST", f"{api_url}/task_runs/filter", json={"flow_runs": {"id": ids}}).json()
    logs = api("POST", f"{api_url}/logs/filter", json={"logs": {"flow_run_id": ids}}).json()
    artifacts = api("POST", f"{api_url}/artifacts/filter", json={"flow_runs": {"id": ids}}).json()
    blocks = {"block_types": {"slug": {"any_": ["remote-file-system"]}}, "include_secrets": True}
    blocks = api("POST", f"{api_url}/block_documents/filter", json=blocks).json()
    dump = json.dumps([flow_runs, task_runs, logs, artifacts, blocks]).encode()
    return flow_runs, task_runs, blocks, dump


# `mappa inspect` several times in one fresh process (one import of the stack), which reaches S3 through its
# environment only; each command's output follows a marker line.
INSPECT = """
import json, sys
from mappa.cli import main
for args in json.loads(sys.argv[1]):
    print("=== mappa inspect", *args, flush=True)
    if main(["inspect", *args]) != 0:
        sys.exit(1)
"""


def inspect_run(run_id: str, root: str, env: dict[str, str], *commands: list[str]) -> list[str]:
    argv = json.dumps([[run_id, "--root", root, *args] for args in commands])
    done = subprocess.run(
        [sys.executable, "-c", INSPECT, argv],
        env={**env, "COLUMNS": "240"},  # rich tables wide enough to keep each cell on one line
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.split("=== mappa inspect")[1:]


def check_artifacts(run: Run, objects: dict[str, bytes]) -> int:
    """Every stage complete, parquet and checkpoints readable, Prefect results and coach answers in the run;
    returns the number of scored actions."""
    prefix = f"runs/{run.run_id}"
    actions = 0
    for it in (0, 1):
        for stage in STAGE_OUTPUTS:
            assert run.stage_complete(it, stage), (it, stage)
        for stage in (*STAGE_OUTPUTS, "report"):
            results = f"{prefix}/{iteration_name(it)}/{stage}/_prefect/"
            assert any(key.startswith(results) for key in objects), f"no Prefect result under {results}"
        rollout, scores, experiences = (
            run.store.read_parquet(*run.output_parts(it, stage))
            for stage in ("rollout", "score", "advantages")
        )
        assert len(rollout) == len(scores) == len(experiences) > 0
        assert (scores["parse_status"] == "ok").all()
        assert set(run.store.read_json(*run.output_parts(it, "update"))) == set(SEATS)
        for seat in SEATS:
            weights = load(objects[f"{prefix}/checkpoints/{seat}/{iteration_name(it)}/model.safetensors"])
            assert weights, (seat, it)
        actions += len(scores)
    answers = [key for key in objects if key.startswith(f"{prefix}/coach-cache/")]
    assert len(answers) == actions, "one cached coach answer per scored action"
    return actions


def check_inspect(run: Run, root: str, env: dict[str, str], folder: Path) -> str:
    trajectory_id = run.store.read_parquet(*run.output_parts(1, "rollout"))["trajectory_id"].iloc[0]
    plot = folder / "curves.png"
    commands = [[], ["--iteration", "1"], ["--trajectory", trajectory_id], ["--plot", str(plot)]]
    summary, iteration, trajectory, curves = inspect_run(run.run_id, root, env, *commands)
    assert f"run {run.run_id}" in summary and summary.count("rollout, score, advantages, update") == 2
    assert "iteration 1: agents" in iteration and "Judged by the scripted test coach" in iteration
    assert all(seat in iteration for seat in SEATS)
    assert trajectory_id in trajectory and "coach: Judged by the scripted test coach" in trajectory
    assert "curves of 2 iteration(s)" in curves and plot.read_bytes().startswith(PNG_SIGNATURE)
    return "\n".join([summary, iteration, trajectory, curves])


def check_prefect(api_url: str, run_id: str, root: str) -> bytes:
    """The resumed flow run found iteration 0's task results on S3 (Cached) and ran iteration 1; the saved
    result-storage block holds the root only. Returns all the server holds on this run, for the leak scan."""
    flow_runs, task_runs, blocks, dump = prefect_records(api_url, run_id)
    assert len(flow_runs) == 2, [f["parameters"] for f in flow_runs]  # the killed run and the resumed one
    assert {"basepath": f"{root}/{run_id}", "settings": {}} in [b["data"] for b in blocks], blocks
    assert f"run {run_id} -> {root}/{run_id}".encode() in dump, "no flow logs reached the server"
    assert f"mappa-{run_id}-report".encode() in dump, "no report artifacts reached the server"
    resumed = [f["id"] for f in flow_runs if f["parameters"].get("resume_root") == root]
    states = {t["name"]: t["state"]["name"] for t in task_runs if t["flow_run_id"] in resumed}
    stages = (*STAGE_OUTPUTS, "report")
    assert {name: states.get(f"{name}-0") for name in stages} == dict.fromkeys(stages, "Cached"), states
    assert {name: states.get(f"{name}-1") for name in stages} == dict.fromkeys(stages, "Completed"), states
    return dump


def find_secrets(where: str, blob: bytes, values: dict[str, str]) -> list[str]:
    return [f"{name} in {where}" for name, value in values.items() if value.encode() in blob]


def scan_ray_logs(folder: Path, values: dict[str, str]) -> list[str]:
    """Every file of a child's Ray temp folder (session logs of the driver, raylet, GCS and workers)."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            found += find_secrets(str(path), path.read_bytes(), values)
    return found


def test_s3_run_killed_resumed_and_read_back_without_leaking_secrets(
    tmp_path, tiny_model, prefect_api_url, coach_server, moto_s3
):
    run_id = f"s3-{uuid.uuid4().hex[:8]}"  # finds this run's flow runs on the session's Prefect server
    coach_key = "sk-test-" + secrets.token_urlsafe(24)
    env = child_env(prefect_api_url, **{COACH_KEY_ENV: coach_key})
    env["PREFECT_LOGGING_LEVEL"] = "INFO"  # mappa's default: flow logs reach the server (and are scanned)
    values = {name: moto_s3.env[name] for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    values[COACH_KEY_ENV] = coach_key
    config = write_config(tmp_path, tiny_model, coach_server.base_url, moto_s3.root)

    started = time.monotonic()
    train = MappaProcess(["train", str(config), "--run-id", run_id], env, tmp_path / "train.txt")
    kill_when_started(ArtifactStore(moto_s3.root), run_id, train, 1, "rollout")
    kinds = Counter((e["iteration"], e["stage"], e["kind"]) for e in Run.open(moto_s3.root, run_id).events())
    assert kinds[(1, "rollout", "started")] == 1 and kinds[(1, "rollout", "finished")] == 0, kinds
    resume = MappaProcess(["resume", run_id, "--root", moto_s3.root], env, tmp_path / "resume.txt")
    assert resume.wait(TIMEOUT_S) == 0, resume.output()
    print(f"train, kill and resume on S3: {time.monotonic() - started:.1f} s")
    assert coach_server.state.authorizations == {f"Bearer {coach_key}"}, "the coach key did not arrive"

    run = Run.open(moto_s3.root, run_id)
    objects = bucket_objects(moto_s3.bucket)
    assert sum(coach_server.state.answered.values()) == check_artifacts(run, objects), "a chat asked twice"
    prefect_dump = check_prefect(prefect_api_url, run_id, moto_s3.root)
    printed = check_inspect(run, moto_s3.root, env, tmp_path)

    leaks = [hit for key, blob in objects.items() for hit in find_secrets(f"s3://mappa/{key}", blob, values)]
    leaks += find_secrets("mappa's output", train.output().encode() + resume.output().encode(), values)
    leaks += find_secrets("mappa inspect's output", printed.encode(), values)
    leaks += find_secrets("the Prefect server", prefect_dump, values)
    leaks += find_secrets("config.yaml", config.read_bytes(), values)
    leaks += scan_ray_logs(Path(env["MAPPA_RAY_TMP"]), values)
    shutil.rmtree(env["MAPPA_RAY_TMP"], ignore_errors=True)
    assert not leaks, leaks
    print(f"scanned {len(objects)} objects ({sum(map(len, objects.values())) / 1e6:.1f} MB) and the logs")
