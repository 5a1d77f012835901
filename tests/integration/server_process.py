"""A server the tests start in a process of its own (Prefect's, vLLM's): on a free loopback port, its output
in a log file, waited for until it answers, and stopped (terminated, killed if it lingers) when the block
ends, also when the test fails."""

from __future__ import annotations

import socket
import subprocess
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
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            deadline = time.monotonic() + timeout_s
            while not _answers(ready):
                if server.poll() is not None or time.monotonic() > deadline:
                    log_end = log_path.read_text()[-3000:]
                    pytest.fail(f"{' '.join(command[:3])} did not start in {timeout_s:g} s: {log_end}")
                time.sleep(0.5)
            yield server
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()


def _answers(ready: Callable[[], bool]) -> bool:
    try:
        return ready()
    except httpx.HTTPError:
        return False
