"""The Prefect UI's path, end to end: a real Prefect server on loopback, `mappa serve`, a deployment
run whose score stage fails (the coach endpoint is down), `prefect flow-run retry` (what the UI's Retry
does), and a check that the retried run finished without recomputing the stages that had finished.

With Chromium installed (Debian's `chromium`), the flow run's page, its retried iteration's page and the
iteration's report are screenshotted headless into $MAPPA_UI_SCREENSHOT (default: the test's temporary
folder; `-iteration` and `-report` beside it), outside the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from mappa_process import MappaProcess, child_env
from openai_test_server import CoachServer
from prefect_api import api, iteration_runs, stage_task_runs
from server_process import free_port, server_process
from tiny_run import scripted_coach, write_tiny_config

from mappa.stages import output_parts, stage_complete
from mappa.storage.run import Run

pytestmark = pytest.mark.slow

TIMEOUT_S = 600


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory, request):
    """Where Chromium is installed, `prefect server start` on a free loopback port with its own PREFECT_HOME
    and the UI (for the screenshots); elsewhere the session's Prefect server (the same server app without
    the UI: 15 s of start-up saved). Yields the API URL."""
    if not shutil.which("chromium"):
        yield request.getfixturevalue("prefect_api_url")
        return
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
        PREFECT_UI_API_URL=url,  # what the browser asks (default: port 4200)
    )
    prefect = str(Path(sys.executable).with_name("prefect"))
    command = [prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    healthy = lambda: httpx.get(f"{url}/health", timeout=2).status_code == 200  # noqa: E731
    with server_process(command, env, home / "server.log", healthy, timeout_s=180):
        yield url


def _flow_run(api_url: str, flow_run_id: str) -> dict:
    return api("GET", f"{api_url}/flow_runs/{flow_run_id}").json()


def _wait_final(api_url: str, flow_run_id: str, previous_updated: str | None = None) -> dict:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        run = _flow_run(api_url, flow_run_id)
        state = run.get("state") or {}
        final = state.get("type") in {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
        if final and state.get("timestamp") != previous_updated:
            return run
        time.sleep(1)
    raise AssertionError(f"flow run {flow_run_id} did not finish: {_flow_run(api_url, flow_run_id)['state']}")


def _wait_for_text(process: MappaProcess, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in process.output():
        assert time.monotonic() < deadline, f"{text!r} not in the log: {process.output()[-2000:]}"
        time.sleep(0.5)


def _create_deployment_run(api_url: str, parameters: dict) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # `mappa serve` registers the deployments once it has started
        response = api("GET", f"{api_url}/deployments/name/mappa-train/mappa-train")
        if response.status_code == 200:
            deployment_id = response.json()["id"]
            created = api(
                "POST",
                f"{api_url}/deployments/{deployment_id}/create_flow_run",
                json={"parameters": parameters},
            )
            created.raise_for_status()
            return created.json()["id"]
        time.sleep(1)
    raise AssertionError("mappa serve did not register mappa-train/mappa-train in 120 s")


def _screenshot(api_url: str, page: str, target: Path) -> None:
    ui = api_url.removesuffix("/api")
    settings = api("GET", f"{ui}/ui-settings").json()  # warm: the page asks this first
    assert settings["api_url"] == api_url, settings
    profile = target.parent / f"chromium-profile-{target.stem}"
    command = [
        shutil.which("chromium") or "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1600,1000",
        "--virtual-time-budget=15000",
        f"--screenshot={target}",
        f"{ui}/{page}",
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=120)


def test_failed_stage_retried_from_prefect_skips_finished_stages(tmp_path, tiny_model, prefect_server):
    with CoachServer() as coach:
        path = write_tiny_config(
            tmp_path / "config.yaml",
            tiny_model,
            tmp_path / "runs",
            name="ui",
            coach=scripted_coach(coach.base_url),
            retries={"score": 0, "update": 0, "report": 0},
            cluster={"num_cpus": 2, "torch_threads": 1},
        )
        coach.state.fail_next = 10**6  # the coach endpoint is down: the score stage fails
        serve = MappaProcess(["serve"], child_env(prefect_server), tmp_path / "serve.txt")
        try:
            flow_run_id = _create_deployment_run(
                prefect_server, {"config_path": str(path), "run_id": "ui-run", "overrides": []}
            )
            failed = _wait_final(prefect_server, flow_run_id)
            assert failed["state"]["type"] == "FAILED", (failed["state"], serve.output()[-3000:])
            _wait_for_text(serve, "Process exited")  # the failed attempt's process is gone;
            time.sleep(5)  # the runner then proposes Crashed, which would override an earlier retry
            failed = _flow_run(prefect_server, flow_run_id)
            run = Run.open(str(tmp_path / "runs"), "ui-run")
            assert stage_complete(run, 0, "rollout") and not stage_complete(run, 0, "score")

            coach.state.fail_next = 0  # the endpoint is back
            prefect = str(Path(sys.executable).with_name("prefect"))
            retry = subprocess.run(
                [prefect, "flow-run", "retry", flow_run_id],
                env={**os.environ, "PREFECT_API_URL": prefect_server},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert retry.returncode == 0, retry.stdout + retry.stderr
            done = _wait_final(prefect_server, flow_run_id, failed["state"]["timestamp"])
            assert done["state"]["type"] == "COMPLETED", (done["state"], serve.output()[-3000:])
        finally:
            serve.kill()  # before the server goes (PITFALLS: serve hangs on a vanished server)

    kinds = Counter((e["stage"], e["kind"]) for e in run.events())
    assert kinds[("rollout", "started")] == kinds[("rollout", "finished")] == 1, kinds
    assert kinds[("score", "started")] == 2 and kinds[("score", "finished")] == 1, kinds
    for stage in ("advantages", "update"):
        assert kinds[(stage, "started")] == kinds[(stage, "finished")] == 1, kinds
    assert sum(coach.state.answered.values()) == len(run.store.read_parquet(*output_parts(run, 0, "score")))

    (iterations,) = iteration_runs(prefect_server, [flow_run_id]).values()
    assert [(i["name"], i["state"]["type"]) for i in iterations] == [
        ("iteration-0000", "FAILED"),  # the iteration is a subflow run; the retry ran it again
        ("iteration-0000", "COMPLETED"),
    ], iterations
    tasks = stage_task_runs(prefect_server, [flow_run_id])
    runs = sorted((t["created"], t["name"], t["state"]["name"], t["run_count"]) for t in tasks)
    print("task runs:", *runs, sep="\n  ")
    states = {name: state for _, name, state, _ in runs}  # each task's latest run: the retried attempt
    assert states["rollout-0"] == "Cached", states  # Prefect's cache agrees with the manifest
    assert states["update-0"] == "Completed" and states["report-0"] == "Completed", states
    expected = {f"mappa-ui-run-{kind}" for kind in ("agents", "report", "report-iter-0000", "progress")}
    keys = {"artifacts": {"key": {"any_": sorted(expected)}}}
    artifacts = api("POST", f"{prefect_server}/artifacts/filter", json=keys).json()
    assert expected <= {a["key"] for a in artifacts}, artifacts  # each iteration's report, the run's table
    if shutil.which("chromium"):  # what a user sees: the run's page and the iteration's report
        shot = Path(os.environ.get("MAPPA_UI_SCREENSHOT", tmp_path / "flow-run.png"))
        report = shot.with_name(f"{shot.stem}-report.png")
        report_id = next(a["id"] for a in artifacts if a["key"] == "mappa-ui-run-report")
        iteration = shot.with_name(f"{shot.stem}-iteration.png")
        _screenshot(prefect_server, f"runs/flow-run/{flow_run_id}", shot)
        _screenshot(prefect_server, f"runs/flow-run/{iterations[-1]['id']}", iteration)  # its stages' graph
        _screenshot(prefect_server, f"artifacts/artifact/{report_id}", report)
        assert all(path.stat().st_size > 10_000 for path in (shot, iteration, report))
