"""A run outlives its Prefect server: a real `prefect server start` crashed (SIGKILL) in the middle of a tiny
`mappa train` and started again on the same port and database.

1. The server goes away once iteration 0's update has started and stays away for `OUTAGE_S` plus its
   start-up: the update finishes meanwhile, the run waits at the next stage boundary, says so, and
   finishes; no stage runs twice, and the server ends up with every task run and the flow run completed
   (the update's final state, whose event was dropped, is set again once the server is back). Prefect's
   own client is told to give up within seconds (PREFECT_CLIENT_MAX_RETRIES=1), so what carries the run is
   mappa's wait, not Prefect's minute of retries.
2. `mappa resume` to a second iteration with a 5 s budget, the server crashed inside that iteration's
   rollout and kept away: the command stops with one line naming the API's URL, the step and the resume
   command, no traceback, no process left; with the server back, `mappa resume` finishes the run, the
   finished stages' manifests byte for byte as they were, each stage finished once per iteration.

The 150 s outages of the issue, at several moments and with Prefect's default retries:
`benchmarks/prefect_outage.py` (too slow for the suite).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from mappa_process import MappaProcess, child_env
from prefect_api import post, stage_task_runs
from server_process import PrefectServer
from tiny_run import NO_RETRIES, write_tiny_config

from mappa.stages import TRAINING
from mappa.storage.run import MANIFEST, Run

pytestmark = pytest.mark.slow

TIMEOUT_S = 600
OUTAGE_S = 2  # plus the server's start-up, about 15 s
STAGES = (*TRAINING, "report", "retention")


def manifests(root: Path, run_id: str) -> dict[str, bytes]:
    """Every stage manifest of the run, by path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in (root / run_id).glob(f"iter-*/*/{MANIFEST}")}


def test_a_prefect_outage_is_waited_through_and_a_longer_one_stops_in_one_line(tmp_path, tiny_model):
    root = tmp_path / "runs"
    config = write_tiny_config(
        tmp_path / "config.yaml",
        tiny_model,
        root,
        name="outage",
        iterations=1,
        retries={**NO_RETRIES, "prefect_outage_s": 300},
        cluster={"num_cpus": 2, "torch_threads": 1},
    )
    with PrefectServer(tmp_path / "prefect-home") as server:
        env = child_env(server.url, PREFECT_CLIENT_MAX_RETRIES="1", PREFECT_LOGGING_LEVEL="INFO")
        train = MappaProcess(["train", str(config), "--run-id", "outage"], env, tmp_path / "train.txt")
        train.wait_for_event(root, "outage", (0, "update", "started"), TIMEOUT_S)
        server.crash()
        time.sleep(OUTAGE_S)
        server.start()
        assert train.wait(TIMEOUT_S) == 0, train.output()[-4000:]
        printed = train.output()
        assert f"the Prefect API at {server.url} does not answer; the run waits before" in printed, printed[
            -4000:
        ]
        assert f"the Prefect API at {server.url} is back after" in printed
        for noise in (
            "Error logging to API",
            "EventsWorker",
            "Unable to connect to 'ws://",
        ):  # in the log file
            assert noise not in printed, printed[-4000:]
        assert train.left == [], train.left
        (flow_run,) = post(server.url, "flow_runs/filter", {"flow_runs": {"name": {"any_": ["outage"]}}})
        assert flow_run["state"]["type"] == "COMPLETED", flow_run["state"]
        tasks = stage_task_runs(server.url, [flow_run["id"]])
        assert len(tasks) == len(STAGES), [t["name"] for t in tasks]
        # the update ended while the server was away: its state was set again once it was back
        assert {t["name"]: t["state"]["type"] for t in tasks} == {t["name"]: "COMPLETED" for t in tasks}
        run = Run.open(str(root), "outage")
        kinds = Counter((e["iteration"], e["stage"], e["kind"]) for e in run.events())
        for iteration in (0,):
            for stage in STAGES:
                assert kinds[(iteration, stage, "finished")] == 1, (iteration, stage, sorted(kinds.items()))
                assert kinds[(iteration, stage, "started")] == 1, (iteration, stage, sorted(kinds.items()))

        before = manifests(root, "outage")
        wanted = {f"outage/iter-0000/{stage}/{MANIFEST}" for stage in (*TRAINING, "retention")}
        assert wanted <= set(before), sorted(before)
        args = ["resume", "outage", "--root", str(root), "--iterations", "2"]
        resume = MappaProcess([*args, "--set", "retries.prefect_outage_s=5"], env, tmp_path / "resume.txt")
        resume.wait_for_event(root, "outage", (1, "rollout", "started"), TIMEOUT_S)
        server.crash()
        code = resume.wait(TIMEOUT_S)
        printed = resume.output()
        lines = [line for line in printed.splitlines() if line.strip()]
        assert code == 1 and "Traceback" not in printed, printed[-4000:]
        stopped = [line for line in lines if line.startswith("error: run outage stopped")]
        assert len(stopped) == 1, lines[-10:]
        assert f"the Prefect API at {server.url} did not answer for" in stopped[0], stopped
        assert "retries.prefect_outage_s" in stopped[0] and "of iteration 1" in stopped[0], stopped
        assert f"Continue with: mappa resume outage --root {root}" in stopped[0], stopped
        assert resume.left == [], resume.left

        server.start()
        again = MappaProcess(["resume", "outage", "--root", str(root)], env, tmp_path / "again.txt")
        assert again.wait(TIMEOUT_S) == 0, again.output()[-4000:]
        assert again.left == [], again.left
    after = manifests(root, "outage")
    assert {name: after[name] for name in before} == before  # iteration 0 untouched
    kinds = Counter((e["iteration"], e["stage"], e["kind"]) for e in Run.open(str(root), "outage").events())
    for stage in STAGES:
        assert kinds[(1, stage, "finished")] == 1, (stage, sorted(kinds.items()))


def test_an_abandoned_iteration_subflow_is_marked_crashed_and_nothing_else(prefect_api_url):
    """What `crash_abandoned_subflows` does on a real server: the `iteration-0000` subflow run left Running
    by an attempt whose final report met an outage becomes Crashed; a completed one, another iteration's
    and another parent's stay as they were."""
    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.states import Completed, Running

    from mappa.flows.prefect_outage import crash_abandoned_subflows

    @flow(name="outage-test-parent")
    def parent() -> None: ...

    @flow(name="outage-test-iteration")
    def iteration() -> None: ...

    @task(name="outage-test-subflow")
    def subflow_task() -> None: ...

    with get_client(sync_client=True) as client:
        parents = [client.create_flow_run(parent, name=f"parent-{i}") for i in range(2)]
        children = {}
        for key, (owner, name, state) in {
            "abandoned": (parents[0], "iteration-0000", Running()),
            "redone": (parents[0], "iteration-0000", Completed()),
            "next": (parents[0], "iteration-0001", Running()),
            "elsewhere": (parents[1], "iteration-0000", Running()),
        }.items():
            link = client.create_task_run(subflow_task, flow_run_id=owner.id, dynamic_key=key)
            child = client.create_flow_run(iteration, name=name, parent_task_run_id=link.id)
            client.set_flow_run_state(child.id, state, force=True)
            children[key] = child.id
        assert crash_abandoned_subflows(str(parents[0].id), "iteration-0000") == 1
        states = {key: client.read_flow_run(run_id).state.type.value for key, run_id in children.items()}
    assert states == {
        "abandoned": "CRASHED",
        "redone": "COMPLETED",
        "next": "RUNNING",
        "elsewhere": "RUNNING",
    }
