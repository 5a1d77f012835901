"""A run on S3, stopped inside each stage and resumed; then read back, inspected and scanned for secrets.

The artifact root is `s3://mappa/runs` on a real S3 endpoint (moto's server on loopback). `mappa train` runs
in a child process (its own Ray, the session's Prefect server, a scripted OpenAI-compatible coach on
loopback). The S3 credentials and the coach's API key reach the children through their environment only
(random values per test): the config names neither. The run's whole process tree is killed inside the
score stage; the first `mappa resume` is then stopped by Ctrl-C inside the update stage, one agent trained
(exit code 130, one line, no traceback), the next killed between the last update (a new checkpoint
written) and the checkpoint retention that deletes the old one, and a last resume finishes the run.

Checked:
- every stage finished exactly once and only the killed stages started twice (the run's events); every
  agent trained once per iteration;
- the coach answered each chat at most once (a dropped, unanswered request may be asked again), and every
  answer sits in the run's coach cache;
- every stage output, parquet file, checkpoint and Prefect result (`_prefect/` under the run) reads back
  from S3, and the last resume's flow run shows the stages finished before it as Cached (Prefect read their
  results from S3);
- the final weights equal those of the same run never interrupted (on local disk; CPU, fixed seed), and
  checkpoint retention (the default: one full state kept) deleted iteration 0's checkpoints on S3;
- `mappa inspect` prints the run, an iteration, a trajectory and the curves from S3;
- no secret value appears in any object of the bucket, the children's output, Ray's session logs, or the
  Prefect server's flow runs, task runs, logs and artifacts of this run.

Not covered: secrets that a model writes into its own output (the sandbox gets no secrets: test_sandbox).
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
import uuid
from collections import Counter
from pathlib import Path

import boto3
import pytest
import torch
from mappa_process import MappaProcess, child_env
from openai_test_server import CoachServer
from prefect_api import api, iteration_runs
from safetensors.torch import load, load_file
from tiny_run import NO_RETRIES, scripted_coach, write_tiny_config

from mappa.stages import TRAINING, output_parts, stage_complete
from mappa.storage.checkpoints import checkpoint_holds, read_ledger
from mappa.storage.run import Run, iteration_name

pytestmark = pytest.mark.slow

SEATS = ("solver", "executor", "verifier")
STAGES = (*TRAINING, "report", "retention")
TIMEOUT_S = 600
COACH_KEY_ENV = "MAPPA_TEST_COACH_KEY"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
KILLS = (  # (stage, iteration, event that must have happened inside the stage before the kill), in run order
    ("score", 0, None),  # killed by the coach server itself, at its third request
    # stopped by Ctrl-C (SIGINT to the process group), not SIGKILL, once one agent trained and checkpointed
    # and the others not: the resume's fresh workers load that agent's iteration-0 checkpoint, train the
    # others and roll out iteration 1 with all of them
    ("update", 0, "agent-finished"),
    ("update", 1, "finished"),  # the new state written, the old one (iteration 0's) not yet deleted
)
CTRL_C = ("update", 0)


def write_config(folder: Path, tiny_model: Path, coach_url: str, root: str | Path) -> Path:
    return write_tiny_config(
        folder / "config.yaml",
        tiny_model,
        root,
        name="fault",
        seed=3,
        iterations=2,
        # answers arrive one by one: a kill lands between two of them
        coach=scripted_coach(coach_url, max_concurrency=1, api_key_env=COACH_KEY_ENV),
        trainer={"lr": 1e-3},
        retries=NO_RETRIES,
        cluster={"num_cpus": 2, "torch_threads": 1},
    )


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_model, prefect_harness, ray_local):
    """The same run on local disk, never killed, in this process (the session's Ray and Prefect): its final
    weights are the reference."""
    from mappa.flows.train import train

    folder = tmp_path_factory.mktemp("uninterrupted")
    with CoachServer() as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv(COACH_KEY_ENV, "sk-reference")
        config = write_config(folder, tiny_model, server.base_url, folder / "runs")
        train(config_path=str(config), run_id="reference")
    run = Run.open(str(folder / "runs"), "reference")
    return {
        seat: load_file(run.store.path(*run.checkpoint_parts(seat, 1), "model.safetensors")) for seat in SEATS
    }


def kill_when(
    run: str, root: str, process: MappaProcess, iteration: int, stage: str, extra: str | None
) -> None:
    """Watch the run's events on S3 (listings are never cached); SIGKILL the run once `stage` started (and
    `extra` happened inside it, if given), or press Ctrl-C in the stage named by CTRL_C: the command then
    ends within seconds with exit code 130 and its one line, no traceback."""
    from mappa.storage.store import ArtifactStore

    store = ArtifactStore(root)
    prefix = f"-{iteration_name(iteration)}-{stage}-"
    wanted = [prefix + "started", *([prefix + extra] if extra else [])]
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and process.process.poll() is None:
        names = store.list(run, "events")
        if all(any(w in name for name in names) for w in wanted):
            if (stage, iteration) != CTRL_C:
                process.kill()
                return
            code = process.interrupt()
            printed = process.output()
            assert code == 130 and "Traceback" not in printed, printed[-3000:]
            last = [line for line in printed.splitlines() if line.strip()][-3:]
            assert any(line.startswith(f"interrupted: run {run} stopped") for line in last), last
            return
        time.sleep(0.05)  # not slower: while moto takes in a checkpoint, a listing waits for a gap
    raise AssertionError(f"the run ended before {wanted} happened; log:\n{process.output()[-3000:]}")


def kill_in_every_stage(
    config: Path, root: str, run_id: str, env: dict, server: CoachServer, logs: Path
) -> list:
    """Train, kill, resume, kill ... as in KILLS, then resume to the end; returns the processes."""
    args = ["train", str(config), "--run-id", run_id]
    processes = []
    for attempt, (stage, iteration, extra) in enumerate(KILLS):
        process = MappaProcess(args, env, logs / f"attempt-{attempt}.txt")
        processes.append(process)
        if stage == "score":
            server.state.before_answer = lambda number, doomed=process: number < 3 or doomed.kill() or False
            assert process.wait(TIMEOUT_S) != 0, "the run should have been killed in its score stage"
            server.state.before_answer = None
        else:
            kill_when(run_id, root, process, iteration, stage, extra)
        run = Run.open(root, run_id)
        kinds = Counter((e["iteration"], e["stage"], e["kind"]) for e in run.events())
        assert kinds[(iteration, stage, "started")] == 1, f"not killed inside {stage}: {sorted(kinds)}"
        if extra == "finished":  # killed after the stage: before the retention that follows it
            assert kinds[(iteration, "retention", "started")] == 0, "retention started before the kill"
            assert all(checkpoint_holds(run, seat, iteration - 1) == "full" for seat in SEATS)
        else:
            assert kinds[(iteration, stage, "finished")] == 0, f"{stage} finished before the kill"
        args = ["resume", run_id, "--root", root]
    last = MappaProcess(args, env, logs / "last.txt")
    assert last.wait(TIMEOUT_S) == 0, last.output()
    return [*processes, last]


def check_events(run: Run) -> None:
    killed = {(iteration, stage) for stage, iteration, extra in KILLS if extra != "finished"}
    kinds = Counter((e["iteration"], e["stage"], e["kind"]) for e in run.events())
    for it in (0, 1):
        for name in TRAINING:
            assert kinds[(it, name, "finished")] == 1, (it, name, kinds)
            assert kinds[(it, name, "started")] == (2 if (it, name) in killed else 1), (it, name, kinds)
    trained = Counter((e["iteration"], e["agent"]) for e in run.events() if e["kind"] == "agent-finished")
    assert trained == Counter({(it, seat): 1 for it in (0, 1) for seat in SEATS})


def bucket_objects(bucket: str) -> dict[str, bytes]:
    """Every object of the bucket, read with boto3 (credentials and endpoint from the environment)."""
    client = boto3.client("s3")
    keys = [
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for item in page.get("Contents", [])
    ]
    return {key: client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}


def check_artifacts(run: Run, objects: dict[str, bytes]) -> int:
    """Every stage complete, parquet and checkpoints readable, Prefect results and coach answers in the run;
    returns the number of actions the coach scored."""
    prefix = f"runs/{run.run_id}"
    actions = 0
    for it in (0, 1):
        for stage in TRAINING:
            assert stage_complete(run, it, stage), (it, stage)
        for stage in STAGES:
            results = f"{prefix}/{iteration_name(it)}/{stage}/_prefect/"
            assert any(key.startswith(results) for key in objects), f"no Prefect result under {results}"
        rollout, scores, experiences = (
            run.store.read_parquet(*output_parts(run, it, stage))
            for stage in ("rollout", "score", "advantages")
        )
        assert len(rollout) == len(scores) == len(experiences) > 0
        assert scores["parse_status"].isin(["ok", "rule"]).all()  # rule: a blank action, not asked
        assert set(run.store.read_json(*output_parts(run, it, "update"))) == set(SEATS)
        actions += int((scores["parse_status"] != "rule").sum())
    answers = [key for key in objects if key.startswith(f"{prefix}/coach-cache/")]
    assert len(answers) == actions, "one cached coach answer per scored action"
    return actions


def check_prefect(api_url: str, run_id: str, root: str) -> bytes:
    """The last resume found the stages finished before it on S3 (Cached) and ran the rest; the saved
    result-storage block holds the root only. Returns all the server holds on this run (its flow runs, task
    runs, logs, report artifacts and result-storage blocks) as bytes, for the leak scan."""
    flow_filter = {"flows": {"name": {"any_": ["mappa-train"]}}, "sort": "EXPECTED_START_TIME_DESC"}
    flow_runs = api("POST", f"{api_url}/flow_runs/filter", json=flow_filter).json()
    flow_runs = [f for f in flow_runs if f["parameters"].get("run_id") == run_id]
    assert len(flow_runs) == len(KILLS) + 1, [f["parameters"] for f in flow_runs]
    names = [f["name"] for f in reversed(flow_runs)]  # named after the run, found by it in the UI's list
    assert names == [run_id] + [f"{run_id}-resume"] * len(KILLS), names
    assert all({"mappa", "env:mathchat", "config:fault"} <= set(f["tags"]) for f in flow_runs), flow_runs[0][
        "tags"
    ]
    iterations = iteration_runs(api_url, [f["id"] for f in flow_runs])
    last = [child["name"] for child in iterations[flow_runs[0]["id"]]]
    assert last == ["iteration-0000", "iteration-0001"], last  # the last resume's iterations, as subflow runs
    ids = {"any_": [f["id"] for f in flow_runs] + [c["id"] for runs in iterations.values() for c in runs]}
    task_runs = api("POST", f"{api_url}/task_runs/filter", json={"flow_runs": {"id": ids}}).json()
    logs = api("POST", f"{api_url}/logs/filter", json={"logs": {"flow_run_id": ids}}).json()
    artifacts = api("POST", f"{api_url}/artifacts/filter", json={"flow_runs": {"id": ids}}).json()
    blocks = {"block_types": {"slug": {"any_": ["remote-file-system"]}}, "include_secrets": True}
    blocks = api("POST", f"{api_url}/block_documents/filter", json=blocks).json()
    dump = json.dumps([flow_runs, task_runs, logs, artifacts, blocks]).encode()

    assert {"basepath": f"{root}/{run_id}", "settings": {}} in [b["data"] for b in blocks], blocks
    assert f"run {run_id} -> {root}/{run_id}".encode() in dump, "no flow logs reached the server"
    assert f"mappa-{run_id}-report".encode() in dump, "no report artifacts reached the server"
    stage, it, _ = KILLS[-1]  # the last resume starts after this stage: what finished before is cached
    order = [f"{stage}-{it}" for it in (0, 1) for stage in STAGES]
    done_before = order[: order.index(f"{stage}-{it}") + 1]
    last_ids = {child["id"] for child in iterations[flow_runs[0]["id"]]}
    last_tasks = {t["name"]: t for t in task_runs if t["flow_run_id"] in last_ids}
    states = {name: task["state"]["name"] for name, task in last_tasks.items()}
    # killed after update-1's work, before or after Prefect stored its result and report-1 ended: either
    # stage then shows Cached, or Completed without redoing its work (its manifest matched: no `started`)
    for name in ("update-1", "report-1"):
        assert states.get(name) in ("Cached", "Completed"), (name, states)
        states[name] = "Cached" if name in done_before else "Completed"
    assert states == {name: "Cached" if name in done_before else "Completed" for name in order}, states
    names = {t["id"]: t["name"] for t in task_runs}
    for before, after in (("rollout-1", "score-1"), ("update-1", "report-1")):  # the graph's arrows
        waits = [names[i["id"]] for i in last_tasks[after]["task_inputs"]["wait_for"]]
        assert before in waits, (after, last_tasks[after]["task_inputs"])
    return dump


def check_inspect(run: Run, root: str, folder: Path, capsys, monkeypatch) -> str:
    """`mappa inspect` of the run, an iteration, a trajectory and the curves, in this process, which reaches
    S3 through its environment only."""
    from mappa import cli

    trajectory_id = run.store.read_parquet(*output_parts(run, 1, "rollout"))["trajectory_id"].iloc[0]
    plot = folder / "curves.png"
    monkeypatch.setattr(cli.console, "width", 240)  # tables wide enough to keep each cell on one line
    printed = []
    for args in ([], ["--iteration", "1"], ["--trajectory", trajectory_id], ["--plot", str(plot)]):
        assert cli.main(["inspect", run.run_id, "--root", root, *args]) == 0
        printed.append(capsys.readouterr().out)
    summary, iteration, trajectory, curves = printed
    assert f"run {run.run_id}" in summary and summary.count("rollout, score, advantages, update") == 2
    assert "iteration 1: agents" in iteration and "Judged by the scripted test coach" in iteration
    assert all(seat in iteration for seat in SEATS)
    assert trajectory_id in trajectory and "coach: Judged by the scripted test coach" in trajectory
    assert "curves of 2 iteration(s)" in curves and plot.read_bytes().startswith(PNG_SIGNATURE)
    return "".join(printed)


def find_secrets(where: str, blob: bytes, values: dict[str, str]) -> list[str]:
    return [f"{name} in {where}" for name, value in values.items() if value.encode() in blob]


def scan_ray_logs(folder: Path, values: dict[str, str]) -> list[str]:
    """Every file of a child's Ray temp folder (session logs of the driver, raylet, GCS and workers)."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            found += find_secrets(str(path), path.read_bytes(), values)
    return found


def test_killed_in_every_stage_resumed_and_read_back_from_s3_without_leaking_secrets(
    tmp_path, tiny_model, prefect_api_url, moto_s3, uninterrupted, capsys, monkeypatch
):
    run_id = f"fault-{uuid.uuid4().hex[:8]}"  # finds this run's flow runs on the session's Prefect server
    coach_key = "sk-test-" + secrets.token_urlsafe(24)
    env = child_env(prefect_api_url, **{COACH_KEY_ENV: coach_key})
    env["PREFECT_LOGGING_LEVEL"] = "INFO"  # mappa's default: flow logs reach the server (and are scanned)
    values = {name: moto_s3.env[name] for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    values[COACH_KEY_ENV] = coach_key

    with CoachServer() as server:
        config = write_config(tmp_path, tiny_model, server.base_url, moto_s3.root)
        started = time.monotonic()
        processes = kill_in_every_stage(config, moto_s3.root, run_id, env, server, tmp_path)
        print(f"train, {len(KILLS)} kills and resumes on S3: {time.monotonic() - started:.1f} s")
        answered = server.state.answered
        assert server.state.authorizations == {f"Bearer {coach_key}"}, "the coach key did not arrive"

    run = Run.open(moto_s3.root, run_id)
    check_events(run)
    objects = bucket_objects(moto_s3.bucket)
    assert max(answered.values()) == 1, "the coach answered the same chat twice"
    assert sum(answered.values()) == check_artifacts(run, objects)
    prefect_dump = check_prefect(prefect_api_url, run_id, moto_s3.root)
    printed = check_inspect(run, moto_s3.root, tmp_path, capsys, monkeypatch)

    ledger = read_ledger(run)
    for seat in SEATS:  # checkpoint retention deleted iteration 0's states, through the store, on S3
        assert not [key for key in objects if f"/checkpoints/{seat}/{iteration_name(0)}/" in key], seat
        assert ledger[seat][iteration_name(0)]["holds"] is None
        resumed = load(objects[f"runs/{run_id}/checkpoints/{seat}/{iteration_name(1)}/model.safetensors"])
        for name, tensor in uninterrupted[seat].items():
            assert torch.equal(resumed[name], tensor), f"{seat}.{name} differs from the uninterrupted run"

    leaks = [hit for key, blob in objects.items() for hit in find_secrets(f"s3://mappa/{key}", blob, values)]
    for process in processes:
        leaks += find_secrets(f"mappa's output ({process.log.name})", process.output().encode(), values)
    leaks += find_secrets("mappa inspect's output", printed.encode(), values)
    leaks += find_secrets("the Prefect server", prefect_dump, values)
    leaks += find_secrets("config.yaml", config.read_bytes(), values)
    leaks += scan_ray_logs(Path(env["MAPPA_RAY_TMP"]), values)
    shutil.rmtree(env["MAPPA_RAY_TMP"], ignore_errors=True)
    assert not leaks, leaks
    print(f"scanned {len(objects)} objects ({sum(map(len, objects.values())) / 1e6:.1f} MB) and the logs")
