"""When the Ray head goes away mid-run (its GCS process killed, its machine restarted), the run ends in one
line and `mappa resume` continues it once a head is back.

Measured without this watch (Ray 2.60, a `ray start --head` cluster on loopback, its processes SIGKILLed
during a run's update stage): the driver, the `mappa` command, waits for the GCS for
`RAY_gcs_rpc_server_reconnect_timeout_s` (60 s), then Ray's core ends the process itself with a C++ log line
("Failed to connect to GCS within 60 seconds ... The program will terminate"): exit code 1, no word of
which run, which stage or what to do; the finished stages were kept and `mappa resume` finished the run.
A local cluster (`ray.init` started by the command) is the same: its GCS is a process of the run's own.

The watch, a daemon thread started when a run's workers are first asked for, opens a TCP connection to the
GCS every `POLL_S`; once the GCS has refused for `lost_after_s()` (10 s before Ray would end the process)
it ends the command itself: the run's one line on standard error and in the log (the stage that was
running, the head's address, the resume command), a `failed` event for that stage, exit code 1. The run's
lock is left to the next command on this host, which takes over a lock whose process is gone.

Not covered: a head that comes back within Ray's reconnect window with GCS fault tolerance (external Redis):
the watch then sees it answer again and does nothing, and Ray carries on as it does.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from typing import Any

from mappa.storage.run import Run

POLL_S = 2.0
RAY_RECONNECT_S = 60.0  # Ray's default RAY_gcs_rpc_server_reconnect_timeout_s

_lock = threading.Lock()
_watch: dict[str, Any] = {}


def lost_after_s() -> float:
    """How long the GCS may refuse before the run is declared lost: 10 s before Ray ends the process."""
    reconnect = float(os.environ.get("RAY_gcs_rpc_server_reconnect_timeout_s", RAY_RECONNECT_S))
    return max(5.0, reconnect - 10.0)


def gcs_answers(address: str, timeout_s: float = 2.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def watch_head(run: Run) -> None:
    """Watch this process's Ray head on behalf of `run` (idempotent; a later run in the same process takes
    the watch over)."""
    import ray

    try:
        address = ray.get_runtime_context().gcs_address
    except Exception:  # noqa: BLE001 - a Ray client connection (ray://) has no GCS of its own to watch
        return
    with _lock:
        _watch.update(run=run, address=address)
        if _watch.get("thread") is None:
            thread = threading.Thread(target=_watch_loop, name="mappa-ray-head-watch", daemon=True)
            _watch["thread"] = thread
            thread.start()


def _watch_loop() -> None:
    import ray

    refused_since: float | None = None
    while True:
        time.sleep(POLL_S)
        with _lock:
            if not ray.is_initialized():  # shut down on purpose: the watch ends with it
                _watch.clear()
                return
            address, run = _watch["address"], _watch["run"]
        if gcs_answers(address):
            refused_since = None
            continue
        refused_since = refused_since if refused_since is not None else time.monotonic()
        if time.monotonic() - refused_since >= lost_after_s():
            _end_run(run, address, time.monotonic() - refused_since)


def head_lost_line(run: Run, address: str, seconds: float, running: tuple[int, str] | None) -> str:
    where = f" in {running[1]} (iteration {running[0]})" if running else ""
    configured = run.config.cluster.address or os.environ.get("RAY_ADDRESS")
    head = "the Ray cluster's head" if configured else "the local Ray cluster this command started"
    address = configured or address  # the one the user wrote, where they wrote one
    when = f" once a Ray head answers at {address}" if configured else ""
    return (
        f"error: run {run.run_id} stopped{where}: {head} ({address}) stopped answering for {seconds:.0f} s, "
        f"and the run's workers went with it. Finished stages are kept. Continue with: mappa resume "
        f"{run.run_id} --root {run.config.storage.root}{when}"
    )


def running_stage(run: Run) -> tuple[int, str] | None:
    """The (iteration, stage) that started last and has not finished, from the run's events."""
    try:
        events = run.events()
    except Exception:  # noqa: BLE001 - the line goes out without it
        return None
    done = {(e["iteration"], e["stage"]) for e in events if e["kind"] in ("finished", "failed", "skipped")}
    started = [(e["iteration"], e["stage"]) for e in events if e["kind"] == "started"]
    open_ = [key for key in started if key not in done]
    return open_[-1] if open_ else None


def _end_run(run: Run, address: str, seconds: float) -> None:
    running = running_stage(run)
    line = head_lost_line(run, address, seconds, running)
    logging.getLogger("mappa").error(line)  # into the run's log file
    if running is not None:
        try:
            run.record_event(*running, "failed", error=line.split(": ", 1)[1])
        except Exception:  # noqa: BLE001 - the line matters more than the event
            pass
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    logging.shutdown()
    os._exit(1)  # Ray would end the process 10 s later, with no word of the run
