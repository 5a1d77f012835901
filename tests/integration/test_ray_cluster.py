"""A run on a real two-node Ray cluster, started as users start one (`ray start --head`, then `ray start
--address` for a second node with its own temp folder and a custom resource), with the artifact root on
S3 only (moto's server: the nodes' environments hold its credentials, as instance roles would):

1. `ray job submit --working-dir` starts `mappa train` on the cluster; `cluster.placement` puts the solver
   and the executor on the second node and the verifier on the head, checked through Ray's state API.
2. The second node is lost (its raylet, agents and workers SIGKILLed by pid) while the run works: the run
   fails with one line naming the agent and the lost node.
3. `mappa resume` refuses at once, naming the resource no alive node has; `mappa resume --set
   cluster.placement.solver={}` completes the run on the head. Nothing finished is redone, the artifacts
   read back from S3, and no worker of the run is left on either node.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from mappa_process import MappaProcess, child_env
from ray_nodes import RayNode, wait_until
from tiny_run import write_tiny_config

from mappa.stages import TRAINING, output_parts, stage_complete
from mappa.storage.run import Run

pytestmark = pytest.mark.slow

RUN_ID = "two-nodes"
PLACEMENT = {"solver": {"node_b": 1}, "executor": {"node_b": 1}, "verifier": {"node_a": 1}}
NO_TOKEN = {"RAY_AUTH_MODE": "disabled"}  # loopback only; a real cluster shares one RAY_AUTH_TOKEN instead
FAST_NODE_LOSS = {  # the head declares a silent node dead after ~6 s (Ray's default: ~30 s)
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "3",
}


@pytest.fixture
def cluster(moto_s3):
    """A head (resource `node_a`) and a second node (`node_b`), both with the S3 credentials."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")}, **moto_s3.env}
    env.update(RAY_USAGE_STATS_ENABLED="0", **NO_TOKEN)
    head = RayNode({"node_a": 1}, {**env, **FAST_NODE_LOSS})
    nodes = [head]
    try:
        nodes.append(RayNode({"node_b": 2}, env, head=head.address))
        yield head, nodes[1]
    finally:
        for node in reversed(nodes):
            node.kill()


def _workers(head: RayNode, state: str | None = None) -> dict[str, str]:
    """The run's ModelWorker actors (alive and dead, or those in `state`) -> the node id each ran on."""
    from ray.util.state import list_actors

    filters = [("class_name", "=", "ModelWorker")] + ([("state", "=", state)] if state else [])
    actors = list_actors(address=head.dashboard, filters=filters, limit=1000, raise_on_missing_output=False)
    return {a.name: a.node_id for a in actors if a.name and a.name.startswith(f"mappa-{RUN_ID}-")}


def _node_ids(head: RayNode) -> dict[str, str]:
    """Custom resource (`node_a`, `node_b`) -> the id of the node that has it."""
    from ray.util.state import list_nodes

    nodes = list_nodes(address=head.dashboard, detail=True, raise_on_missing_output=False)
    return {key: n.node_id for n in nodes for key in n.resources_total if key.startswith("node_")}


def _submit(head: RayNode, folder: Path, prefect_api_url: str) -> str:
    """`ray job submit --no-wait --working-dir FOLDER -- python -m mappa.cli train config.yaml`: its id."""
    runtime_env = {"env_vars": {"PREFECT_API_URL": prefect_api_url, "PREFECT_LOGGING_LEVEL": "WARNING"}}
    command = [
        str(Path(sys.executable).with_name("ray")),
        "job",
        "submit",
        f"--address={head.dashboard}",
        f"--working-dir={folder}",
        f"--runtime-env-json={json.dumps(runtime_env)}",
        "--no-wait",
        "--",
        sys.executable,  # the cluster's Python, where mappa is installed
        "-m",
        "mappa.cli",
        "train",
        "config.yaml",
        "--run-id",
        RUN_ID,
    ]
    done = subprocess.run(
        command, env={**os.environ, **NO_TOKEN}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return re.search(r"raysubmit_\w+", done.stdout + done.stderr).group(0)


def test_a_run_on_two_nodes_with_s3_only_survives_losing_one(
    cluster, moto_s3, tiny_model, prefect_api_url, tmp_path
):
    from ray.job_submission import JobStatus, JobSubmissionClient

    head, node_b = cluster
    job_folder = tmp_path / "job"
    job_folder.mkdir()
    write_tiny_config(
        job_folder / "config.yaml",
        tiny_model,
        moto_s3.root,
        name="cluster",
        cluster={"placement": PLACEMENT, "torch_threads": 1},
        retries={"rollout": 0, "score": 0, "advantages": 0, "update": 0, "report": 0},
    )
    jobs = JobSubmissionClient(head.dashboard)
    job = _submit(head, job_folder, prefect_api_url)

    # 1. placement: each seat's worker is alive on the node its resources name
    seats = {f"mappa-{RUN_ID}-{seat}" for seat in PLACEMENT}

    def placed():
        if jobs.get_job_status(job) in (JobStatus.FAILED, JobStatus.STOPPED):
            raise AssertionError(jobs.get_job_logs(job)[-4000:])
        alive = _workers(head, "ALIVE")
        return alive if seats <= set(alive) else None

    alive = wait_until(placed, 300, "the run's three workers")
    nodes = _node_ids(head)
    expected = {f"mappa-{RUN_ID}-{seat}": nodes[next(iter(r))] for seat, r in PLACEMENT.items()}
    assert {name: alive[name] for name in seats} == expected, (alive, nodes)

    # 2. the second node is lost while the run works
    killed = node_b.kill()
    assert killed and not node_b.processes()
    ended = (JobStatus.FAILED, JobStatus.SUCCEEDED)
    final = wait_until(lambda: (s := jobs.get_job_status(job)) in ended and s, 300, "the job's end")
    logs = jobs.get_job_logs(job)
    assert final == JobStatus.FAILED, logs[-4000:]
    (line,) = [text for text in logs.splitlines() if text.startswith("error: run two-nodes stopped in")]
    # the loss is seen either by a working stage (its worker died: "agent X ... that node is gone") or, when
    # it falls between stages, by the next stage's placement check (no alive node has node_b)
    assert any(seat in line for seat in ("solver", "executor")), line
    seen = "that node is gone" in line or "which no alive node of the Ray cluster has" in line
    assert "node_b" in line and seen and "Traceback" not in logs, logs[-3000:]
    run = Run.open(moto_s3.root, RUN_ID)
    finished_before = Counter((e["iteration"], e["stage"]) for e in run.events() if e["kind"] == "finished")

    # 3. a resume that still asks for the lost node is refused at once; one without it completes the run
    env = child_env(prefect_api_url, RAY_ADDRESS=head.address, **NO_TOKEN)
    refused = MappaProcess(["resume", RUN_ID, "--root", moto_s3.root], env, tmp_path / "refused.txt")
    assert refused.wait(timeout=300) == 1, refused.output()[-3000:]
    assert "asks for {'node_b': 1.0}" in refused.output() and "no alive node" in refused.output()
    moved = ["--set", "cluster.placement.solver={}", "--set", "cluster.placement.executor={}"]
    resumed = MappaProcess(["resume", RUN_ID, "--root", moto_s3.root, *moved], env, tmp_path / "resumed.txt")
    assert resumed.wait(timeout=600) == 0, resumed.output()[-3000:]

    for stage in TRAINING:
        assert stage_complete(run, 0, stage), stage
    assert set(run.store.read_json(*output_parts(run, 0, "update"))) == set(PLACEMENT)
    finished = Counter((e["iteration"], e["stage"]) for e in run.events() if e["kind"] == "finished")
    assert all(count == 1 for count in finished.values()), finished  # nothing finished was done twice
    assert finished_before.keys() <= finished.keys()
    assert not _workers(head, "ALIVE"), "a worker of the run outlived it"
    assert set(_workers(head).values()) <= {nodes["node_a"], nodes["node_b"]}
    assert not node_b.processes()
