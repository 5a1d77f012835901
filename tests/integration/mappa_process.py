"""`mappa` commands in child processes that a test can SIGKILL mid-stage, as a lost node or an OOM kill would.

Every child gets a unique marker in its environment; `kill()` sends SIGKILL to the child's process group
and then to every process that still carries the marker (Ray's raylet, GCS and workers start their own
sessions), so nothing of the killed run survives and nothing else on the machine is touched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

MARKER = "MAPPA_TEST_PROCESS"
LINGER_S = 15  # Ray's daemons stop a moment after their driver


def child_env(prefect_api_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env.update(
        PREFECT_API_URL=prefect_api_url,
        PREFECT_LOGGING_LEVEL="WARNING",
        MAPPA_RAY_TMP=tempfile.mkdtemp(prefix="ray-", dir="/tmp"),
    )
    env.update(extra)  # a test's settings win
    return env


class MappaProcess:
    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.marker = uuid.uuid4().hex
        self.left: list[str] = []
        self.log = log
        self._log_file = open(log, "ab")  # closed by wait() or kill()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mappa.cli", *args],
            env={**env, MARKER: self.marker},
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait(self, timeout: float) -> int:
        """The child's exit code. The processes of its run still alive `LINGER_S` after it ended are
        recorded in `left` (their command lines; a clean end leaves none) and killed."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"mappa did not finish in {timeout} s; log:\n{self.output()}") from None
        try:
            deadline = time.monotonic() + LINGER_S
            while self._marked() and time.monotonic() < deadline:
                time.sleep(0.5)
            self.left = [_cmdline(pid) for pid in self._marked()]
            return code
        finally:
            self._stop_leftovers()
            self._log_file.close()

    def wait_for_event(
        self, root: str | Path, run_id: str, wanted: tuple[int, str, str], timeout: float
    ) -> None:
        """Return once run `run_id` under `root` has the event (iteration, stage, kind); fail the test if
        the child ends first or `timeout` seconds pass."""
        from mappa.storage.run import Run

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (Path(root) / run_id / "events").is_dir():
                events = Run.open(str(root), run_id).events()
                if any((e["iteration"], e["stage"], e["kind"]) == wanted for e in events):
                    return
            assert self.process.poll() is None, f"the run ended before {wanted}: {self.output()[-3000:]}"
            time.sleep(0.1)
        raise AssertionError(f"no {wanted} after {timeout} s")

    def interrupt(self, timeout: float = 90) -> int:
        """Ctrl-C as a terminal sends it: SIGINT to the child's process group; its exit code."""
        os.killpg(self.process.pid, signal.SIGINT)
        return self.wait(timeout)

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
        self._stop_leftovers()
        self._log_file.close()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def _marked(self) -> list[int]:
        """The processes that carry this child's marker."""
        needle = f"{MARKER}={self.marker}".encode()
        return [pid for pid in _pids() if needle in _environ(pid)]

    def _stop_leftovers(self) -> None:
        """SIGKILL the processes that carry this child's marker (Ray's daemons outlive their driver)."""
        for _ in range(50):
            pids = self._marked()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return f"{pid} (gone)"


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""
