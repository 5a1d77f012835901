"""A server the tests start in a process of its own (Prefect's, vLLM's): on a free loopback port, its output
in a log file, waited for until it answers, and stopped (terminated, killed if it lingers) when the block
ends, also when the test fails; and a Prefect server a test can crash and start again (`PrefectServer`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def server_process(
    command: list[str], env: dict[str, str], log_path: Path, ready: Callable[[], bool], timeout_s: float
) -> Iterator[subprocess.Popen]:
    """Start `command`; fail the test with the log's end unless `ready()` is true within `timeout_s` (an
    HTTP error counts as not yet); stop it after the block."""
    server = start_server(command, env, log_path, ready, timeout_s)
    try:
        yield server
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def start_server(
    command: list[str], env: dict[str, str], log_path: Path, ready: Callable[[], bool], timeout_s: float
) -> subprocess.Popen:
    """Start `command` in a session of its own, its output in `log_path`; fail the test with the log's end
    (the server SIGKILLed) unless `ready()` is true within `timeout_s`."""
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + timeout_s
    while not _answers(ready):
        if server.poll() is not None or time.monotonic() > deadline:
            _kill_group(server)
            log_end = log_path.read_text()[-3000:]
            pytest.fail(f"{' '.join(command[:3])} did not start in {timeout_s:g} s: {log_end}")
        time.sleep(0.5)
    return server


def _kill_group(server: subprocess.Popen) -> None:
    """SIGKILL `server` and the processes of its session (no shutdown, as a crash would end them)."""
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait(timeout=30)


def _answers(ready: Callable[[], bool]) -> bool:
    try:
        return ready()
    except httpx.HTTPError:
        return False


class PrefectServer:
    """`prefect server start` on a fixed loopback port with its own PREFECT_HOME, which a test can crash
    (SIGKILL to its process group) and start again: the same URL, the same SQLite database of runs."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api"
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self, timeout_s: float = 180) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update(PREFECT_HOME=str(self.home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
        env.update(PREFECT_LOGGING_LEVEL="WARNING", PREFECT_UI_ENABLED="false")
        prefect = str(Path(sys.executable).with_name("prefect"))
        command = [prefect, "server", "start", "--host", "127.0.0.1", "--port", str(self.port)]
        self.starts += 1
        healthy = lambda: httpx.get(f"{self.url}/health", timeout=2).status_code == 200  # noqa: E731
        self.process = start_server(command, env, self.home / f"server-{self.starts}.log", healthy, timeout_s)

    def crash(self) -> None:
        """SIGKILL the server and its children: no shutdown, as a lost node or an OOM kill would."""
        if self.process is not None:
            _kill_group(self.process)
            self.process = None

    def __enter__(self) -> PrefectServer:
        self.home.mkdir(parents=True, exist_ok=True)
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.crash()
