"""Real Ray nodes on this machine, started as users start them: `ray start --head`, then `ray start
--address=...` for each further node, each with its own temp folder, ports and custom resources.

A node's processes (raylet, its agents, its workers) are found by its temp folder, which every one of them
names on its command line or descends from a process that does; `kill()` SIGKILLs them all, as a lost
machine would, and touches no other Ray on the machine (the session's local Ray included; `ray stop` would
stop every Ray here).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from server_process import free_port


def _ray() -> str:
    return str(Path(sys.executable).with_name("ray"))


class RayNode:
    def __init__(
        self,
        resources: dict[str, float],
        env: dict[str, str],
        head: str | None = None,
        port: int | None = None,
        dashboard: bool = True,
    ) -> None:
        """Start a node with 2 CPUs and `resources`: the head if `head` is None (on `port`, default a free
        one; with its dashboard unless `dashboard` is false), else joining `head` (host:port). `env` is the
        node's environment (what its workers see: the store's credentials)."""
        self.temp_dir = tempfile.mkdtemp(prefix="rn-", dir="/tmp")  # short: Ray's socket paths
        self.port = port or free_port()
        self.dashboard_port = free_port()
        ports = [
            f"--node-manager-port={free_port()}",
            f"--object-manager-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
        ]
        if head is None:
            role = [
                "--head",
                f"--port={self.port}",
                "--node-ip-address=127.0.0.1",
                f"--include-dashboard={str(dashboard).lower()}",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={self.dashboard_port}",
            ]
        else:
            role = [f"--address={head}", "--node-ip-address=127.0.0.1"]
        command = [
            _ray(),
            "start",
            *role,
            *ports,
            "--num-cpus=2",
            f"--resources={json.dumps(resources)}",
            f"--temp-dir={self.temp_dir}",
            "--disable-usage-stats",
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            self.kill()
            raise AssertionError(f"ray start failed:\n{done.stdout}\n{done.stderr}")
        self.address = f"127.0.0.1:{self.port}"
        self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"

    def processes(self) -> list[psutil.Process]:
        """The node's processes: those naming its temp folder, and their descendants."""
        found: dict[int, psutil.Process] = {}
        for process in psutil.process_iter(["cmdline"]):
            try:
                if any(self.temp_dir in part for part in process.info["cmdline"] or []):
                    found[process.pid] = process
                    for child in process.children(recursive=True):
                        found[child.pid] = child
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        found.pop(os.getpid(), None)
        return list(found.values())

    def kill(self) -> list[int]:
        """SIGKILL every process of the node; their pids."""
        processes = self.processes()
        for process in processes:
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                continue
        psutil.wait_procs(processes, timeout=10)
        return [process.pid for process in processes]


def wait_until(check, timeout: float, what: str, every: float = 0.5):
    """`check()`'s first truthy answer within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
