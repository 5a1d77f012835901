"""Runs model-written Python code in a separate, limited process.

What it protects against:
- runaway programs: a wall-clock timeout kills the whole process group (and, with bubblewrap, the whole PID
  namespace); RLIMIT_CPU, RLIMIT_AS (memory), RLIMIT_FSIZE (file size), RLIMIT_NOFILE and RLIMIT_CORE=0
  bound each process; output is read incrementally, trimmed, and a program flooding it is killed, so the
  parent's memory stays bounded whatever the program does;
- leaking the parent's secrets through the environment: the program gets a minimal, fixed environment;
- with bubblewrap (isolation "bwrap", or "auto": bubblewrap, and a refusal to run where it does not work):
  network access (own loopback only, so not even services on the host's 127.0.0.1); seeing files: the
  program sees only what it needs, read-only: the system's programs and libraries (/usr and the /bin,
  /lib links), a few files of /etc (the loader cache, users, time zone, certificates), the Python
  environment it runs in (its prefix: a venv with its site-packages, wherever it lives); and read-write
  its own work folder, an empty private /tmp and an empty home (/tmp/home). Not visible: /root, /home,
  /opt, /srv, /var, /work, the rest of /etc (host keys, shadow), the project checkout outside the
  environment, the run's artifact root, checkpoints, the coach cache, other trajectories' work folders,
  and `hidden_paths` inside the visible trees (covered by an empty folder or /dev/null); /proc shows the
  program's own processes only (own PID namespace); System V IPC; when run as root, all capabilities are
  dropped.

What it does NOT protect against:
- without bubblewrap (isolation "none", which a run must ask for explicitly): no network or filesystem
  isolation at all; the program can read and write anything this user can (as root: anything), reach the
  network, and a child that calls setsid() leaves the process group and survives the timeout;
- reading the visible trees: the Python environment's files (a secret stored inside the venv is
  readable), /usr; what the program prints ends up in trajectories and goes to the coach;
- memory is address space per process, not resident memory of the whole run: N child processes may use N
  times memory_mb; libraries reserving large virtual ranges may fail under a low limit;
- CPU time is per process (all threads of one process together); children get fresh budgets, bounded only by
  the wall clock; there is no limit on the number of processes (fork bombs) besides the timeout;
- a determined attacker with a kernel exploit, or one abusing the machine's remaining kernel surface.

How one run goes: the code is written to a uniquely named script in the work folder (its path reads
`program.py` in the output, so a traceback is the same text in every run and does not name the folder),
and a small launcher (`python -I -S -c _LAUNCHER`) sets the resource limits on itself and then execs the
real interpreter on the script, so the limits bind the model's code and its children but never bubblewrap
or this process (no `preexec_fn`, which is unsafe in a multi-threaded parent such as a Ray worker). Under
bubblewrap the launcher runs inside the sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mappa.core.types import ToolResult
from mappa.sandbox.capture import CaptureProtocol

log = logging.getLogger(__name__)

ISOLATION_MODES = ("auto", "bwrap", "none")
SCRIPT_PREFIX = ".mappa_snippet_"  # scripts of concurrent runs in a shared folder never show up in `files`
SHOWN_SCRIPT = "program.py"  # the script's name in the output (tracebacks): the same in every run
MAX_LISTED_FILES = 200
MAX_WALKED_FILES = 10_000
OPEN_FILES_LIMIT = 1024
RUNAWAY_OUTPUT_BYTES = 16 * 1024 * 1024  # per stream; past this the program is killed, not just trimmed
KILL_GRACE_S = 1.0  # how long to wait for the exit after SIGKILL, and for the pipes to close after the exit
BWRAP_PROBE_TIMEOUT_S = 15.0
MEMORY_ERROR_MARKERS = ("MemoryError", "Cannot allocate memory", "can't allocate memory", "std::bad_alloc")

# Runs as `python -I -S -c _LAUNCHER MEMORY_BYTES CPU_S FILE_BYTES NOFILE PYTHON SCRIPT`. Limits never exceed
# a hard limit the parent already has; hard limits are set too, so the program cannot raise them again.
_LAUNCHER = """
import os, resource as r, sys
def limit(kind, soft, hard):
    current = r.getrlimit(kind)[1]
    if current != r.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    r.setrlimit(kind, (soft, hard))
memory, cpu, fsize, nofile = (int(value) for value in sys.argv[1:5])
limit(r.RLIMIT_AS, memory, memory)
limit(r.RLIMIT_CPU, cpu, cpu + 1)
limit(r.RLIMIT_FSIZE, fsize, fsize)
limit(r.RLIMIT_CORE, 0, 0)
limit(r.RLIMIT_NOFILE, nofile, nofile)
os.execv(sys.argv[5], sys.argv[5:])
"""


class SandboxUnavailableError(RuntimeError):
    """isolation="bwrap" was asked for, but bubblewrap is missing or does not work on this machine."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one run. Memory is address space (RLIMIT_AS), not resident memory."""

    timeout_s: float = 10.0  # wall clock
    memory_mb: int = 1024  # RLIMIT_AS of the program (each process it starts gets its own)
    cpu_s: int = 20  # RLIMIT_CPU, per process
    max_output_chars: int = 8000  # stdout and stderr each keep this many chars (head and tail)
    max_file_mb: int = 64  # RLIMIT_FSIZE: largest file the program may write
    isolation: str = "auto"  # "auto": bubblewrap when it works here, else plain process; "bwrap"; "none"
    hidden_paths: tuple[str, ...] = ()  # absolute paths the program must not read (e.g. hidden test labels)

    def __post_init__(self) -> None:
        relative = [path for path in self.hidden_paths if not Path(path).is_absolute()]
        if relative:
            raise ValueError(f"SandboxLimits.hidden_paths must be absolute, got {relative}")
        if self.isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation must be one of {ISOLATION_MODES}, got {self.isolation!r}")
        for name in ("timeout_s", "memory_mb", "cpu_s", "max_output_chars", "max_file_mb"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxLimits.{name} must be positive, got {getattr(self, name)!r}")


DEFAULT_LIMITS = SandboxLimits()


@dataclass(frozen=True)
class _Outcome:
    returncode: int | None
    timed_out: bool
    runaway_output: bool
    stdout: str
    stderr: str
    duration_s: float


def bwrap_available() -> bool:
    """Whether bubblewrap is on PATH and can start a sandbox here (checked once, then cached)."""
    return _probe_bwrap()[0]


@functools.cache
def _probe_bwrap() -> tuple[bool, str]:
    executable = shutil.which("bwrap")
    if executable is None:
        return False, "`bwrap` is not on PATH (apt-get install bubblewrap)"
    with tempfile.TemporaryDirectory(prefix="mappa-bwrap-probe-") as folder:
        command = [*_bwrap_prefix(executable, Path(folder).resolve()), sys.executable, "-I", "-S", "-c", ""]
        try:
            probe = subprocess.run(command, capture_output=True, timeout=BWRAP_PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"bwrap could not start a sandbox: {exc}"
    if probe.returncode != 0:
        reason = probe.stderr.decode(errors="replace").strip() or f"exit code {probe.returncode}"
        return False, f"bwrap could not start a sandbox: {reason}"
    return True, "ok"


@functools.cache
def _warn_paths_readable(paths: tuple[str, ...]) -> None:
    log.warning("sandbox: without bubblewrap the program can read the paths it should not see: %s", paths)


def check_isolation(isolation: str) -> None:
    """Raise `SandboxUnavailableError`, naming the fix, when `isolation` needs bubblewrap and it does not
    work here (a run checks this before it starts)."""
    if isolation == "none":
        return
    works, reason = _probe_bwrap()
    if not works:
        raise SandboxUnavailableError(
            f"the code sandbox needs bubblewrap, but {reason}: install it (apt-get install bubblewrap), or "
            f"set sandbox.isolation: none to run model-written code without isolation (it can then read "
            f"and write this user's files and reach the network)"
        )


def _use_bwrap(isolation: str) -> bool:
    check_isolation(isolation)
    return isolation != "none"


SYSTEM_TREES = ("/usr",)  # read-only: the system's programs and libraries
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # merged-/usr links, or folders
SYSTEM_FILES = (  # the parts of /etc a Python program needs; the rest (host keys, shadow) stays hidden
    "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
    "/etc/timezone", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf",
    "/etc/ssl", "/etc/ca-certificates", "/etc/mime.types", "/etc/fonts", "/etc/os-release",
    "/etc/python3", "/etc/python3.11", "/etc/xdg/matplotlib",
)  # fmt: skip
SANDBOX_HOME = "/tmp/home"


def _system_binds() -> list[str]:
    """What every program sees, read-only: /usr, the top-level links into it (or the folders, where /usr
    is not merged), a short list of /etc, and the Python environment this process runs in."""
    binds: list[str] = []
    for tree in SYSTEM_TREES:
        binds += ["--ro-bind", tree, tree]
    for path in SYSTEM_LINKS:
        if os.path.islink(path):
            binds += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            binds += ["--ro-bind", path, path]
    for path in SYSTEM_FILES:
        if os.path.lexists(path):
            binds += ["--ro-bind", path, path]
    return binds


def _interpreter_binds() -> list[str]:
    """Read-only binds of the Python environment: its prefix (a venv, wherever it lives: a checkout, a CI
    clone under /tmp), the base installation's and the interpreter's folder, where outside /usr."""
    roots = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent}
    roots |= {path.resolve() for path in roots}
    binds: list[str] = []
    for path in sorted(roots, key=lambda p: len(p.parts)):
        if path.exists() and not path.is_relative_to("/usr"):
            binds += ["--ro-bind", str(path), str(path)]
    return binds


def _hiding_binds(paths: tuple[str, ...]) -> list[str]:
    """Cover each existing path: an empty tmpfs over a folder, /dev/null over a file. The path's real
    location is covered (bwrap cannot mount through a symlink, e.g. a symlinked venv), which hides it
    under every name that leads there."""
    binds: list[str] = []
    for path in map(os.path.realpath, paths):
        if Path(path).is_dir():
            binds += ["--tmpfs", path]
        elif Path(path).exists():
            binds += ["--ro-bind", "/dev/null", path]
    return binds


def _bwrap_prefix(executable: str, folder: Path, hidden: tuple[str, ...] = ()) -> list[str]:
    prefix = [
        executable, *_system_binds(), "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
        "--dir", SANDBOX_HOME, *_interpreter_binds(), *_hiding_binds(hidden),
        "--bind", str(folder), str(folder), "--chdir", str(folder),
        "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        "--die-with-parent", "--new-session",
    ]  # fmt: skip
    if os.geteuid() == 0:
        prefix += ["--cap-drop", "ALL"]  # bwrap keeps all capabilities for root unless told otherwise
    return [*prefix, "--"]


def _command(script: Path, folder: Path, limits: SandboxLimits, bwrap: bool) -> list[str]:
    launcher = [
        sys.executable, "-I", "-S", "-c", _LAUNCHER,
        str(limits.memory_mb * 1024 * 1024), str(limits.cpu_s), str(limits.max_file_mb * 1024 * 1024),
        str(OPEN_FILES_LIMIT), sys.executable, str(script),
    ]  # fmt: skip
    if not bwrap:
        return launcher
    return [*_bwrap_prefix(shutil.which("bwrap") or "bwrap", folder, limits.hidden_paths), *launcher]


def _child_env(folder: Path, bwrap: bool) -> dict[str, str]:
    """The whole environment of the program: nothing of the parent's (API keys, cloud credentials) leaks.
    Its home is empty (a folder of the private /tmp) under bubblewrap, its work folder without."""
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": SANDBOX_HOME if bwrap else str(folder),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
    }


@contextlib.contextmanager
def _work_folder(workdir: str | Path | None) -> Iterator[Path]:
    if workdir is not None:
        folder = Path(workdir).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    folder = Path(tempfile.mkdtemp(prefix="mappa-sandbox-")).resolve()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _list_files(folder: Path) -> tuple[str, ...]:
    found: list[str] = []
    for root, _dirs, names in os.walk(folder):
        for name in names:
            relative = Path(root, name).relative_to(folder).as_posix()
            if not (relative.startswith(SCRIPT_PREFIX) and "/" not in relative):
                found.append(relative)
        if len(found) >= MAX_WALKED_FILES:
            break
    return tuple(sorted(found)[:MAX_LISTED_FILES])


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _wait_for_any(events: list[asyncio.Event], timeout_s: float) -> bool:
    """Waits until one of `events` is set or the time is up; True when one was set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        done, _ = await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    return bool(done)


async def _supervise(pid: int, protocol: CaptureProtocol, timeout_s: float) -> str:
    """Waits for the program, killing its group on timeout or flooding; says how it ended:
    "exited", "timeout" or "output"."""
    await _wait_for_any([protocol.exited, protocol.flooded], timeout_s)
    if protocol.exited.is_set():
        return "exited"
    ending = "output" if protocol.flooded.is_set() else "timeout"
    _kill_group(pid)
    await _wait_for_any([protocol.exited], KILL_GRACE_S)
    return ending


async def _execute(command: list[str], folder: Path, limits: SandboxLimits, bwrap: bool) -> _Outcome:
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    transport, protocol = await loop.subprocess_exec(
        lambda: CaptureProtocol(limits.max_output_chars, RUNAWAY_OUTPUT_BYTES),
        *command, cwd=folder, env=_child_env(folder, bwrap), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    pid = transport.get_pid()
    try:
        ending = await _supervise(pid, protocol, limits.timeout_s)
    finally:
        # Children left behind in the group; also on cancellation. (Once the group is empty its id could in
        # principle be reused by a new group leader before this call; the window is microseconds.)
        _kill_group(pid)
        # Drain what is still in the pipes; a process that escaped the group may hold them open: not long.
        await _wait_for_any([protocol.pipes_closed], KILL_GRACE_S)
        transport.close()
    return _Outcome(
        returncode=transport.get_returncode(),
        timed_out=ending == "timeout",
        runaway_output=ending == "output",
        stdout=protocol.stdout.text(),
        stderr=protocol.stderr.text(),
        duration_s=time.monotonic() - started,
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _normalise_exit(returncode: int | None, bwrap: bool) -> int | None:
    """bubblewrap reports a program killed by signal N as 128 + N; report it as -N, like subprocess."""
    if bwrap and returncode is not None and 128 < returncode <= 128 + 64:
        return -(returncode - 128)
    return returncode


def _explain(outcome: _Outcome, exit_code: int | None, limits: SandboxLimits, bwrap: bool) -> str | None:
    """Why the sandbox ended or refused the run, when it did (a timeout is told by `timed_out` alone)."""
    if outcome.runaway_output:
        return f"output limit: the program wrote more than {RUNAWAY_OUTPUT_BYTES // 2**20} MiB and was killed"
    if outcome.timed_out or exit_code in (0, None):
        return None
    stderr_tail = outcome.stderr[-2000:]
    if exit_code == -signal.SIGXCPU:
        return f"cpu limit: the program used more than {limits.cpu_s} s of CPU time and was killed"
    if exit_code == -signal.SIGXFSZ or "File too large" in stderr_tail:
        return f"file size limit: the program tried to write a file larger than {limits.max_file_mb} MB"
    if any(marker in stderr_tail for marker in MEMORY_ERROR_MARKERS):
        return f"memory limit: the program ran out of its {limits.memory_mb} MB of memory"
    if bwrap and exit_code == 1 and outcome.stderr.startswith("bwrap:"):
        return f"sandbox setup failed: {outcome.stderr.strip().splitlines()[0]}"
    if exit_code == -signal.SIGKILL:
        return "the program was killed by SIGKILL (possibly the kernel's out-of-memory killer)"
    if exit_code < 0:
        return f"the program was killed by {_signal_name(-exit_code)}"
    return None


async def run_python_async(
    code: str, workdir: str | Path | None = None, limits: SandboxLimits = DEFAULT_LIMITS
) -> ToolResult:
    """Runs `code` in the sandbox without blocking the event loop; many runs may go on at once.

    With `workdir`, the program runs there and its files stay (a shared workspace); without, it runs in a
    fresh temporary folder that is removed afterwards. Raises SandboxUnavailableError, naming the fix,
    when the isolation asks for bubblewrap ("auto", "bwrap") and it does not work here.
    """
    bwrap = _use_bwrap(limits.isolation)
    if limits.hidden_paths and not bwrap:
        _warn_paths_readable(limits.hidden_paths)
    with _work_folder(workdir) as folder:
        script = folder / f"{SCRIPT_PREFIX}{uuid.uuid4().hex[:12]}.py"
        script.write_text(code, encoding="utf-8")
        try:
            outcome = await _execute(_command(script, folder, limits, bwrap), folder, limits, bwrap)
        finally:
            script.unlink(missing_ok=True)
        files = _list_files(folder)
    killed_by_sandbox = outcome.timed_out or outcome.runaway_output
    exit_code = None if killed_by_sandbox else _normalise_exit(outcome.returncode, bwrap)
    return ToolResult(
        stdout=outcome.stdout.replace(str(script), SHOWN_SCRIPT),
        stderr=outcome.stderr.replace(str(script), SHOWN_SCRIPT),
        exit_code=exit_code,
        timed_out=outcome.timed_out,
        duration_s=round(outcome.duration_s, 3),
        files=files,
        error=_explain(outcome, exit_code, limits, bwrap),
    )


async def run_programs_async(
    programs: list[tuple[str | None, str | Path | None, SandboxLimits]], concurrency: int
) -> list[ToolResult | None]:
    """Run (code, workdir, limits) programs at most `concurrency` at a time, results in order; a program
    whose code is None (the agent wrote no code block) is not run and gets None."""
    gate = asyncio.Semaphore(concurrency)

    async def run(code: str | None, workdir: str | Path | None, limits: SandboxLimits) -> ToolResult | None:
        if code is None:
            return None
        async with gate:
            return await run_python_async(code, workdir, limits)

    return list(await asyncio.gather(*(run(*program) for program in programs)))


def run_python(
    code: str, workdir: str | Path | None = None, limits: SandboxLimits = DEFAULT_LIMITS
) -> ToolResult:
    """Blocking form of `run_python_async`; also safe to call from code that runs inside an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_python_async(code, workdir, limits))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mappa-sandbox") as pool:
        return pool.submit(asyncio.run, run_python_async(code, workdir, limits)).result()
