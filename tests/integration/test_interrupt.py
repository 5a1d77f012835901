"""Ctrl-C during a rollout: `mappa train` stops within seconds, ends with one line (what was kept, the
command that resumes) instead of a traceback, and leaves no process behind. Not covered: a Ctrl-C while
Ray itself starts, which Ray's logging can swallow ("Exception ignored ... KeyboardInterrupt"): a second
Ctrl-C is needed then."""

import os
import signal
import subprocess
import time

import pytest
from mappa_process import MARKER, MappaProcess, _environ, _pids, child_env
from tiny_run import write_tiny_config

pytestmark = pytest.mark.slow


def test_ctrl_c_during_the_rollout_stops_the_run_with_one_line_and_no_leftovers(
    tmp_path, tiny_model, prefect_api_url
):
    root = tmp_path / "runs"
    rollout = {"problems_per_iteration": 8, "max_new_tokens": 64}
    config = write_tiny_config(tmp_path / "config.yaml", tiny_model, root, iterations=2, rollout=rollout)
    child = MappaProcess(
        ["train", str(config), "--run-id", "ctrl-c"], child_env(prefect_api_url), tmp_path / "log"
    )
    events = root / "ctrl-c" / "events"
    deadline = time.monotonic() + 180
    # the rollout is generating: its stage started and the run's Ray is up (a signal during Ray's own
    # start-up can be swallowed by its logging: "Exception ignored ... KeyboardInterrupt")
    while not (
        events.exists()
        and any("rollout-started" in name for name in os.listdir(events))
        and "Started a local Ray instance" in child.output()
    ):
        assert child.process.poll() is None, child.output()
        assert time.monotonic() < deadline, "the rollout never started:\n" + child.output()
        time.sleep(0.2)
    time.sleep(5)  # the agents' workers load their models
    os.killpg(child.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the foreground group
    stopped = time.monotonic()
    try:
        code = child.process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()  # nothing of a stuck run may outlive the test
        raise AssertionError("mappa train did not stop within 60 s of Ctrl-C:\n" + child.output()) from None
    seconds = time.monotonic() - stopped
    time.sleep(3)  # Ray's daemons stop when their driver exits
    needle = f"{MARKER}={child.marker}".encode()
    leftovers = [pid for pid in _pids() if needle in _environ(pid)]
    child.wait(timeout=10)  # closes the log, stops any leftover
    out = child.output()
    assert code == 130, out
    assert seconds < 30, f"took {seconds:.0f} s to stop"
    assert "interrupted: run ctrl-c stopped" in " ".join(out.split()) and "mappa resume ctrl-c" in out, out
    # mappa's own line ends the output: no traceback of the interrupt follows it (Ray and Prefect may log
    # their own "Crash detected" lines before it)
    assert "Traceback" not in out[out.rindex("interrupted:") :], out[-3000:]
    assert not leftovers, f"processes left behind: {leftovers}"
