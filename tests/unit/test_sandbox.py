"""The sandbox for model-written code: capture, limits, isolation (bubblewrap where available)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import socket
import time
from pathlib import Path

import pytest

from mappa.sandbox import (
    SandboxLimits,
    SandboxUnavailableError,
    bwrap_available,
    run_python,
    run_python_async,
    runner,
)
from mappa.sandbox.capture import OutputCapture

NEEDS_BWRAP = pytest.mark.skipif(
    not bwrap_available(),
    reason="bubblewrap (`bwrap`) is missing or cannot create a sandbox here (apt-get install bubblewrap; "
    "unprivileged users also need user namespaces enabled)",
)
ISOLATIONS = [pytest.param("none", id="plain"), pytest.param("bwrap", id="bwrap", marks=NEEDS_BWRAP)]
REPO_ROOT = Path(__file__).resolve().parents[2]


# Wall-clock bounds in these tests are generous: the suite runs them beside integration tests that keep
# both cores busy, where a trivial program can wait seconds for a core. A test about the timeout sets its own.
SLOW_MACHINE_S = 30.0


@pytest.fixture(params=ISOLATIONS)
def limits(request: pytest.FixtureRequest) -> SandboxLimits:
    return SandboxLimits(timeout_s=SLOW_MACHINE_S, memory_mb=512, isolation=request.param)


def test_stdout_is_captured(limits: SandboxLimits) -> None:
    result = run_python("print('hello'); print(6 * 7)", limits=limits)
    assert result.ok
    assert result.stdout == "hello\n42\n"
    assert result.stderr == ""
    assert result.exit_code == 0 and not result.timed_out and result.error is None
    assert result.files == ()


def test_exception_gives_nonzero_exit_and_traceback(limits: SandboxLimits) -> None:
    result = run_python("x = 1\nraise ValueError('boom')", limits=limits)
    assert result.exit_code == 1
    assert not result.ok
    assert "Traceback" in result.stderr and "ValueError: boom" in result.stderr
    assert result.error is None  # the program failed; the sandbox did not step in


def test_a_traceback_reads_the_same_in_every_run(limits: SandboxLimits) -> None:
    """The script's random path would reach the agents' prompts, making rollouts irreproducible."""
    code = "def total(n):\n    return n * price\n\nprint(total(3))"
    first, second = (run_python(code, limits=limits) for _ in range(2))
    assert first.stderr == second.stderr
    assert 'File "program.py", line 2, in total' in first.stderr
    assert runner.SCRIPT_PREFIX not in first.stderr and "mappa-sandbox-" not in first.stderr


def test_exit_codes_and_signals_are_reported_like_subprocess(limits: SandboxLimits) -> None:
    assert run_python("import sys; sys.exit(3)", limits=limits).exit_code == 3
    killed = run_python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", limits=limits)
    assert killed.exit_code == -9
    assert "SIGKILL" in (killed.error or "")


def test_infinite_loop_is_stopped_by_the_timeout(limits: SandboxLimits) -> None:
    started = time.monotonic()
    one_second = SandboxLimits(timeout_s=1.0, isolation=limits.isolation)
    result = run_python("while True:\n    pass", limits=one_second)
    assert result.timed_out
    assert result.exit_code is None
    assert not result.ok
    assert 0.9 < result.duration_s < 6.0  # stopped at about 1 s (more on a busy machine), not later
    assert time.monotonic() - started < 8.0


def test_timeout_kills_the_programs_children_too(limits: SandboxLimits, tmp_path: Path) -> None:
    ticker = "import time\nwhile True:\n    open('tick', 'a').write('x')\n    time.sleep(0.05)\n"
    code = f"import os, subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {ticker!r}])\n"
    code += "while not os.path.exists('tick'):\n    time.sleep(0.01)\n"  # the child runs (a busy machine)
    code += "time.sleep(60)\n"
    three_seconds = SandboxLimits(timeout_s=3.0, isolation=limits.isolation)
    result = run_python(code, workdir=tmp_path, limits=three_seconds)
    assert result.timed_out
    size_after_run = (tmp_path / "tick").stat().st_size
    time.sleep(0.4)
    assert (tmp_path / "tick").stat().st_size == size_after_run, "the child kept running after the timeout"


def test_a_child_that_leaves_the_group_cannot_hold_the_run_open() -> None:
    # Without bubblewrap such a child survives (documented); it must not keep the run waiting on its pipes.
    code = "import subprocess\nchild = subprocess.Popen(['sleep', '30'], start_new_session=True)\n"
    code += "print(child.pid)"
    result = run_python(code, limits=SandboxLimits(timeout_s=SLOW_MACHINE_S, isolation="none"))
    os.kill(int(result.stdout), signal.SIGKILL)
    assert result.ok
    assert result.duration_s < 15.0  # held open, it would have waited for the 30 s sleep


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("data = bytearray(4 * 1024**3)", id="one-4GB-block"),
        pytest.param("chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))", id="growing"),
    ],
)
def test_memory_hog_is_stopped_and_the_parent_is_fine(limits: SandboxLimits, code: str) -> None:
    parent_limit = resource.getrlimit(resource.RLIMIT_AS)
    hog_limits = SandboxLimits(memory_mb=256, timeout_s=SLOW_MACHINE_S, isolation=limits.isolation)
    result = run_python(code, limits=hog_limits)
    assert result.exit_code not in (0, None)
    assert not result.timed_out
    assert "MemoryError" in result.stderr
    assert result.error is not None and "memory limit" in result.error and "256 MB" in result.error
    assert result.duration_s < 10.0  # stopped by the memory limit, long before the timeout
    assert resource.getrlimit(resource.RLIMIT_AS) == parent_limit
    assert bytearray(300 * 1024**2)  # the parent can still allocate more than the child's limit
    assert run_python("print('still fine')", limits=limits).stdout == "still fine\n"


def test_cpu_limit_kills_a_cpu_bound_program(limits: SandboxLimits) -> None:
    cpu_limit = SandboxLimits(cpu_s=1, timeout_s=SLOW_MACHINE_S, isolation=limits.isolation)
    result = run_python("while True:\n    pass", limits=cpu_limit)
    assert not result.timed_out
    assert result.exit_code == -24  # SIGXCPU
    assert result.error is not None and result.error.startswith("cpu limit")


def test_file_size_limit(limits: SandboxLimits) -> None:
    code = "open('big.bin', 'wb').write(b'0' * (2 * 1024**2))"
    result = run_python(code, limits=SandboxLimits(max_file_mb=1, isolation=limits.isolation))
    assert result.exit_code == 1
    assert "File too large" in result.stderr
    assert result.error is not None and result.error.startswith("file size limit")


def test_environment_is_scrubbed(limits: SandboxLimits, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-do-not-leak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-test-do-not-leak")
    code = "import os, json; print(json.dumps(dict(os.environ)))"
    result = run_python(code, limits=limits)
    assert result.ok, result.stderr
    assert "do-not-leak" not in result.stdout
    env = json.loads(result.stdout)
    given = {"PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "OMP_NUM_THREADS"}
    harmless = {"PWD", "LC_CTYPE"}  # set by bwrap --chdir; by Python when it coerces the C locale
    assert set(env) <= given | {"MPLBACKEND"} | harmless
    assert env["OMP_NUM_THREADS"] == "1" and env["MPLBACKEND"] == "Agg"


def test_files_are_listed_and_a_given_workdir_keeps_them(limits: SandboxLimits, tmp_path: Path) -> None:
    code = (
        "import os\n"
        "os.makedirs('out', exist_ok=True)\n"
        "open('out/result.txt', 'w').write('42')\n"
        "open('notes.md', 'w').write('hi')\n"
        "print(os.getcwd(), os.environ['HOME'])\n"
    )
    result = run_python(code, workdir=tmp_path, limits=limits)
    assert result.ok, result.stderr
    assert result.files == ("notes.md", "out/result.txt")
    home = runner.SANDBOX_HOME if limits.isolation == "bwrap" else str(tmp_path.resolve())  # bwrap: empty
    assert result.stdout.split() == [str(tmp_path.resolve()), home]
    assert (tmp_path / "out" / "result.txt").read_text() == "42"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md", "out"]  # the script itself is gone
    # A later run (another agent) shares the workspace.
    later = run_python("print(open('out/result.txt').read())", workdir=tmp_path, limits=limits)
    assert later.stdout == "42\n"
    assert later.files == ("notes.md", "out/result.txt")


def test_fresh_workdir_is_removed_afterwards(limits: SandboxLimits) -> None:
    result = run_python("import os; open('x.txt', 'w').write('x'); print(os.getcwd())", limits=limits)
    assert result.files == ("x.txt",)
    assert not Path(result.stdout.strip()).exists()


def test_output_is_trimmed_and_says_so(limits: SandboxLimits) -> None:
    code = "import sys\nprint('START' + 'x' * 20000 + 'END')\nsys.stderr.write('e' * 5000 + 'LAST')"
    trimmed = SandboxLimits(max_output_chars=1000, timeout_s=SLOW_MACHINE_S, isolation=limits.isolation)
    result = run_python(code, limits=trimmed)
    assert result.ok
    assert len(result.stdout) < 1100
    assert result.stdout.startswith("START") and result.stdout.endswith("END\n")
    assert "[... trimmed 19009 chars ...]" in result.stdout  # 20009 chars written, 1000 kept
    assert result.stderr.endswith("LAST") and "[... trimmed 4004 chars ...]" in result.stderr


def test_runaway_output_is_killed(limits: SandboxLimits) -> None:
    code = "import sys\nwhile True:\n    sys.stdout.write('y' * 65536)"
    result = run_python(code, limits=limits)
    assert not result.timed_out and result.exit_code is None
    assert result.error is not None and result.error.startswith("output limit")
    assert len(result.stdout) < limits.max_output_chars + 100
    assert result.duration_s < 10.0  # stopped by the output limit, long before the timeout


def test_undecodable_output_is_replaced(limits: SandboxLimits) -> None:
    result = run_python("import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe done')", limits=limits)
    assert result.stdout == "ok \ufffd\ufffd done"


@NEEDS_BWRAP
def test_no_network_under_bwrap() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"import socket\nprint(socket.socket().connect_ex(('127.0.0.1', {port})))"
        sandboxed = run_python(code, limits=SandboxLimits(isolation="bwrap"))
        plain = run_python(code, limits=SandboxLimits(isolation="none"))
    assert sandboxed.ok and plain.ok
    assert sandboxed.stdout.strip() != "0", "the sandbox reached the host's loopback"
    assert plain.stdout.strip() == "0"  # without bubblewrap there is no network isolation at all


@NEEDS_BWRAP
def test_system_is_read_only_and_tmp_is_private_under_bwrap(tmp_path: Path) -> None:
    import sys

    targets = ["/usr/mappa-sandbox-probe", str(Path(sys.prefix) / "mappa-sandbox-probe")]
    hidden = REPO_ROOT / "mappa-sandbox-probe"  # the checkout is not visible: a write lands nowhere real
    code = (
        "import os\n"
        f"for target in {targets!r}:\n"
        "    try:\n"
        "        open(target, 'w').write('x')\n"
        "        print('WROTE', target)\n"
        "    except OSError as exc:\n"
        "        print('refused', exc.errno)\n"
        "try:\n"
        f"    open({str(hidden)!r}, 'w').write('x')\n"
        "except OSError:\n"
        "    pass\n"
        "open('/tmp/mappa-private', 'w').write('x')\n"
        "print(os.listdir('/tmp'))\n"
    )
    result = run_python(code, workdir=tmp_path, limits=SandboxLimits(isolation="bwrap"))
    assert result.ok, result.stderr
    assert result.stdout.count("refused 30") == 2, result.stdout  # EROFS: the system and the environment
    assert not any(Path(target).exists() for target in [*targets, str(hidden)])
    assert not Path("/tmp/mappa-private").exists()


@NEEDS_BWRAP
def test_a_program_sees_none_of_the_hosts_files_and_its_libraries_still_work(tmp_path: Path) -> None:
    """A file planted in each place a secret or another run's data could be: none can be listed or read,
    under the default settings; numpy, pandas and scikit-learn programs run."""
    import uuid

    tag = f"mappa-planted-{uuid.uuid4().hex[:8]}"
    home = Path.home()
    places = [
        home / tag, *(home / folder / tag for folder in (".aws", ".ssh", ".config", ".docker")),
        home / ".cache" / "huggingface" / tag, home / f".netrc-{tag}", Path("/home") / tag / "secret",
        REPO_ROOT / tag, REPO_ROOT / "runs" / tag, Path("/opt") / tag, Path("/var/tmp") / tag,
    ]  # fmt: skip
    made: list[Path] = []
    for place in places:
        for parent in reversed(place.parents):
            if not parent.exists():
                parent.mkdir()
                made.append(parent)
        place.write_text("secret")
        made.append(place)
    other = run_python(f"open('{tag}', 'w').write('other trajectory')", limits=SandboxLimits(timeout_s=30))
    other_folder = tmp_path / "other-trajectory"
    run_python(f"open('{tag}', 'w').write('x')", workdir=other_folder, limits=SandboxLimits(timeout_s=30))
    probes = [*map(str, places), str(other_folder / tag), str(home), "/home", str(REPO_ROOT)]
    code = (
        "import os\n"
        f"for path in {probes!r}:\n"
        "    try:\n"
        "        print('SEEN', path, os.listdir(path) if os.path.isdir(path) else open(path).read())\n"
        "    except OSError:\n"
        "        pass\n"
        "print('processes', len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
        "import numpy, pandas\n"
        "from sklearn.linear_model import LinearRegression\n"
        "x = pandas.DataFrame({'a': numpy.arange(5.0)})\n"
        "print('fit', round(float(LinearRegression().fit(x, 2 * x['a']).coef_[0]), 3))\n"
    )
    try:
        result = run_python(code, workdir=tmp_path / "work", limits=SandboxLimits(timeout_s=60))
    finally:
        for path in reversed(made):
            path.unlink() if path.is_file() else path.rmdir()
    assert other.ok and result.ok, other.stderr + result.stderr
    seen = [line for line in result.stdout.splitlines() if line.startswith("SEEN") and tag in line]
    assert not seen, seen
    listed = [line for line in result.stdout.splitlines() if line.startswith("SEEN")]
    assert all(tag not in line and "secret" not in line for line in listed), listed
    processes = int(result.stdout.split("processes ")[1].split()[0])
    assert processes < 5, result.stdout  # its own PID namespace: bwrap, the launcher, the program
    assert "fit 2.0" in result.stdout


def test_async_runs_snippets_concurrently(limits: SandboxLimits) -> None:
    async def both() -> list:
        return await asyncio.gather(
            run_python_async("import time; time.sleep(1); print('a')", limits=limits),
            run_python_async("import time; time.sleep(1); print('b')", limits=limits),
        )

    started = time.monotonic()
    first, second = asyncio.run(both())
    elapsed = time.monotonic() - started
    assert (first.stdout, second.stdout) == ("a\n", "b\n")
    one_after_the_other = first.duration_s + second.duration_s  # at least 2 s
    assert elapsed < 0.8 * one_after_the_other, f"two 1 s snippets took {elapsed:.2f} s: not concurrently"


def test_blocking_run_works_inside_a_running_event_loop() -> None:
    async def call_blocking_form() -> str:
        return run_python("print('inside')", limits=SandboxLimits(isolation="none")).stdout

    assert asyncio.run(call_blocking_form()) == "inside\n"


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="isolation"):
        SandboxLimits(isolation="docker")
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=0)


def test_without_bubblewrap_code_runs_only_when_isolation_none_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "_probe_bwrap", lambda: (False, "`bwrap` is not on PATH"))
    for isolation in ("bwrap", "auto"):
        with pytest.raises(SandboxUnavailableError, match="not on PATH.*sandbox.isolation: none"):
            run_python("print(1)", limits=SandboxLimits(isolation=isolation))
    assert run_python("print(1)", limits=SandboxLimits(isolation="none")).stdout == "1\n"


def test_output_capture_keeps_head_and_tail_across_chunks() -> None:
    capture = OutputCapture(max_chars=10)
    for piece in ["abc", "defgh", "ijklmnop", "qrstuvwxyz"]:
        capture.feed(piece.encode())
    assert capture.text() == "abcde\n[... trimmed 16 chars ...]\nvwxyz"
    split_euro = OutputCapture(max_chars=100)
    euro = "€".encode()
    split_euro.feed(euro[:1])
    split_euro.feed(euro[1:])
    assert split_euro.text() == "€"
    assert OutputCapture(max_chars=5).text() == ""


def test_cancelling_the_async_run_kills_the_program(limits: SandboxLimits, tmp_path: Path) -> None:
    code = "import time\nwhile True:\n    open('tick', 'a').write('x')\n    time.sleep(0.05)\n"

    async def cancel_once_running() -> None:
        # cancelled once the program runs (on a loaded machine its start alone can take seconds)
        run = asyncio.ensure_future(run_python_async(code, workdir=tmp_path, limits=limits))
        deadline = time.monotonic() + 60
        while not (tmp_path / "tick").exists():
            assert not run.done() and time.monotonic() < deadline, "the program never started"
            await asyncio.sleep(0.05)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(cancel_once_running())
    size_after_cancel = (tmp_path / "tick").stat().st_size
    time.sleep(0.4)
    assert (tmp_path / "tick").stat().st_size == size_after_cancel, "the program survived cancellation"


def test_file_listing_is_capped() -> None:
    code = "for i in range(250):\n    open(f'f{i:03d}.txt', 'w').close()"
    result = run_python(code, limits=SandboxLimits(isolation="none"))
    assert len(result.files) == runner.MAX_LISTED_FILES
    assert result.files[:2] == ("f000.txt", "f001.txt")


@NEEDS_BWRAP
def test_hidden_paths_cannot_be_read_under_bwrap(tmp_path: Path) -> None:
    import sklearn

    data = Path(sklearn.__file__).parent / "datasets" / "data"  # sklearn's bundled data sets: labels
    module_file = Path(sklearn.__file__)  # in the environment: visible in the sandbox wherever it lives
    code = (
        "import os\n"
        f"print(sorted(os.listdir({str(data)!r})))\n"
        "try:\n"
        f"    print(len(open({str(module_file)!r}).read()))\n"
        "except PermissionError:\n"
        "    print(0)\n"
    )
    hidden = SandboxLimits(isolation="bwrap", hidden_paths=(str(data), str(module_file)))
    covered = run_python(code, workdir=tmp_path, limits=hidden)
    seen = run_python(code, workdir=tmp_path, limits=SandboxLimits(isolation="bwrap"))
    assert covered.ok and seen.ok, covered.stderr + seen.stderr
    assert covered.stdout.split("\n")[:2] == ["[]", "0"]
    assert "iris.csv" in seen.stdout and not seen.stdout.split("\n")[1] == "0"


@NEEDS_BWRAP
def test_a_path_hidden_through_a_symlink_is_hidden_under_both_names(tmp_path: Path) -> None:
    import shutil
    import sys
    import tempfile

    base = Path(tempfile.mkdtemp(dir=sys.prefix, prefix=".sandbox-test-"))  # in the environment: visible
    try:
        real = base / "store" / "answers"
        real.mkdir(parents=True)
        (real / "labels.csv").write_text("id,label\n1,secret\n")
        (base / "linked").symlink_to(base / "store")  # like a symlinked venv or data folder
        via_link = base / "linked" / "answers"
        code = f"import os\nprint(os.listdir({str(via_link)!r}), os.listdir({str(real)!r}))\n"
        limits = SandboxLimits(isolation="bwrap", hidden_paths=(str(via_link),))
        covered = run_python(code, workdir=tmp_path, limits=limits)
        seen = run_python(code, workdir=tmp_path, limits=SandboxLimits(isolation="bwrap"))
    finally:
        shutil.rmtree(base)
    assert covered.ok and seen.ok, covered.stderr + seen.stderr
    assert covered.stdout.strip() == "[] []"
    assert seen.stdout.strip() == "['labels.csv'] ['labels.csv']"


def test_hidden_paths_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="hidden_paths must be absolute"):
        SandboxLimits(hidden_paths=("labels.csv",))
