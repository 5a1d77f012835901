"""Shared test setup: offline hubs, quiet Prefect, and a tiny random-init llama with the real tokenizer."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import secrets  # noqa: E402 - the environment above must be set before any hub import
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from mappa.stages import output_parts, write_manifest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random-init LlamaForCausalLM (hidden 64, 2 layers) with SmolLM2's tokenizer and chat template."""
    from mappa.models.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@dataclass(frozen=True)
class MotoS3:
    """A bucket on a real S3 endpoint (moto's server on loopback) and the environment that reaches it."""

    bucket: str
    env: dict[str, str]
    """AWS_ENDPOINT_URL, fresh random credentials and the region: what a child process needs."""

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}/runs"


def start_moto_server() -> tuple[subprocess.Popen, int]:
    """moto's S3 server in a process of its own on a free loopback port. Not in this process: its Flask
    proxies in `sys.modules` would break vLLM's engine start-up, which scans every module's globals."""
    for _ in range(3):  # a free port can be taken before the server binds it
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while server.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return server, port
            except OSError:
                time.sleep(0.1)
        server.kill()
        server.wait()
    raise RuntimeError("moto's S3 server did not start (python -m moto.server)")


@pytest.fixture
def moto_server():
    """`start_moto_server`, for a test that stops its server itself (a test module cannot import this
    conftest by name: under the whole suite `conftest` is another folder's)."""
    return start_moto_server


@pytest.fixture
def moto_s3(monkeypatch) -> Iterator[MotoS3]:
    """moto's S3 server on 127.0.0.1 (a free port) with one bucket. This process's environment gets the
    endpoint and credentials (random per test, so a leak check can look for them); s3fs and botocore
    read them from there, so nothing in a config names them."""
    import boto3
    import s3fs

    server, port = start_moto_server()
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "AKIA" + secrets.token_hex(8).upper(),
        "AWS_SECRET_ACCESS_KEY": secrets.token_urlsafe(30),
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    s3fs.S3FileSystem.clear_instance_cache()  # a cached client would still talk to an earlier endpoint
    boto3.client("s3").create_bucket(Bucket="mappa")
    yield MotoS3("mappa", env)
    s3fs.S3FileSystem.clear_instance_cache()
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture(autouse=True)
def _plenty_of_memory(monkeypatch):
    """The resource pre-flight reads the machine's available memory, which a busy test machine lacks at
    times: tests of something else see plenty (tests/unit/test_preflight.py sets its own readings)."""
    from mappa import resources

    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 1e12)


# The test files that read the session's finished run (`mathchat_run`, about two minutes to build): one
# pytest-xdist worker takes them all (FinishedRunTogether), so the run is built once, not on both workers.
FINISHED_RUN_FILES = (
    "test_train_flow.py",
    "test_evaluate.py",
    "test_rescore.py",
    "test_team_export.py",
    "test_coach_check.py",
)
# The longest files (seconds on a 2-core machine, two workers), collected first so that the two pytest-xdist
# workers of scripts/test.sh start them early and end together (longest first; pytest-xdist would otherwise
# start the files with the most tests first); the rest keep their order.
LONGEST_FILES = (
    "test_fault_injection.py",  # ~250-280 s
    *FINISHED_RUN_FILES,  # ~240 s together
    "test_deepspeed_trainer.py",  # ~200-225 s
    "test_vllm_engine.py",  # ~170-190 s
    "test_checkpoint_retention.py",  # ~140-150 s
    "test_prefect_server.py",  # ~75-140 s
    "test_prefect_outage.py",  # ~110-140 s (three child runs, three server starts)
    "test_vllm_coach_server.py",  # ~65-110 s
    "test_s3_outage.py",  # ~75-95 s (two child runs)
    "test_ray_cluster.py",  # ~85-95 s
    "test_plugin_env.py",  # ~75-85 s
    "test_learning_coach.py",  # ~60-90 s (two iterations, a local coach, replays)
    "test_ray_head_outage.py",  # ~55-70 s (two child runs, two head starts)
    "test_coach_outage.py",  # ~50-70 s
    "test_stage_retry.py",  # ~45-60 s
    "test_dsbench_flow.py",  # ~35-60 s
)


def pytest_collection_modifyitems(config, items):
    """The longest files first; tests marked `gpu` run only where CUDA is available. A test file outside
    FINISHED_RUN_FILES that reads the finished run is refused (it would build the run a second time)."""
    import torch

    strays = {item.path.name for item in items if "mathchat_run" in getattr(item, "fixturenames", ())}
    if strays - set(FINISHED_RUN_FILES):
        raise pytest.UsageError(f"add {sorted(strays - set(FINISHED_RUN_FILES))} to FINISHED_RUN_FILES")
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files keep their order
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_xdist_make_scheduler(config, log):
    """With `--dist loadfile` (scripts/test.sh): whole files per worker, FINISHED_RUN_FILES as one."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FinishedRunTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "finished-run" if path.rsplit("/", 1)[-1] in FINISHED_RUN_FILES else path

    return FinishedRunTogether(config, log)


def pytest_sessionstart(session):
    """In CI (MAPPA_REQUIRE_BWRAP=1) the sandbox's isolation tests must run, not skip."""
    if os.environ.get("MAPPA_REQUIRE_BWRAP") == "1":
        from mappa.sandbox.runner import _probe_bwrap

        ok, reason = _probe_bwrap()
        if not ok:
            raise pytest.UsageError(f"MAPPA_REQUIRE_BWRAP=1 but bubblewrap cannot sandbox here: {reason}")


@pytest.fixture
def trajectory():
    """One MathChat trajectory with a successful and a crashed tool run, and an action without a tool."""
    from mappa.core.types import Action, Problem, ToolResult, Trajectory

    problem = Problem("p1", "What is 2+2?", "4", {"kind": "arithmetic"})
    tool = ToolResult("4\n", "", 0, False, 0.05, ("out.txt",))
    actions = (
        Action("t1", "p1", "solver", 0, 0, "obs", "prompt", "2+2=4", (1, 2), (3, 4), (-0.5, -0.25)),
        Action(
            "t1",
            "p1",
            "executor",
            1,
            0,
            "obs2",
            "prompt2",
            "```python\nprint(4)\n```",
            (1,),
            (5,),
            (-1.0,),
            tool_call="print(4)",
            tool_result=tool,
        ),
    )
    crashed = ToolResult("", "SyntaxError", 1, False, 0.2, ())
    actions += (
        Action(
            "t1",
            "p1",
            "executor",
            2,
            1,
            "o3",
            "p3",
            "```python\nx(\n```",
            (1,),
            (6,),
            (-2.0,),
            tool_call="x(",
            tool_result=crashed,
        ),
        Action("t1", "p1", "verifier", 3, 0, "o4", "p4", "no box", (1,), (7,), (-0.1,)),
    )
    return Trajectory("t1", problem, actions, "4", True)


# Coach scores per iteration and agent of `synthetic_run` (the verifier is frozen: scored, never trained).
SYNTHETIC_RUN_SCORES = {
    0: {"solver": [2.0, 4.0], "executor": [6.0, 8.0, 10.0], "verifier": [5.0]},
    1: {"solver": [4.0, 6.0], "executor": [8.0, 8.0, 8.0], "verifier": [7.0]},
}


def _synthetic_run_metrics(iteration: int) -> dict[str, dict[str, float]]:
    """The trainer metrics `synthetic_run` records for the solver (k=0) and the executor (k=1)."""
    return {
        agent: {
            "loss": 0.5 - 0.1 * iteration + k,
            "kl": 0.001 * (iteration + 1),
            "clip_fraction": 0.1,
            "approx_kl": 0.002,
            "grad_norm": 1.5,
            "tokens_per_s": 100.0 * (k + 1),
            "mean_score": 0.0,
        }
        for k, agent in enumerate(("solver", "executor"))
    }


@pytest.fixture
def synthetic_run(tmp_path):
    """A run folder written by hand (no model): iterations 0 and 1 finished, every stage with its manifest
    (success rate 0.25 and 0.5), iteration 2 rolled out only. Run id `synthetic_run.1`."""
    import pandas as pd

    from mappa.config import load_config
    from mappa.storage.run import Run

    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path / 'runs'}"])
    run = Run.create(config, "synthetic_run.1")
    for iteration, by_agent in SYNTHETIC_RUN_SCORES.items():
        frame = pd.DataFrame(
            {"action_id": f"t{iteration}/{agent}/{i}", "agent": agent, "score": score, "rationale": "r"}
            for agent, scores in by_agent.items()
            for i, score in enumerate(scores)
        ).assign(trajectory_id=f"t{iteration}", parse_status="ok")
        for stage in ("rollout", "score", "advantages"):
            run.store.write_parquet(frame, *output_parts(run, iteration, stage))
        times = {"total_s": 10.0 + iteration}
        write_manifest(
            run, iteration, "rollout", 6, times, trajectories=4, success_rate=0.25 * (iteration + 1)
        )
        score = {"coach_model": "rubric", "parse_status": {"ok": 5, "fallback": 1}, "bias": {"gap": 1.5}}
        write_manifest(
            run, iteration, "score", 6, {"total_s": 2.0}, **score, rubric_agreement={"solver": 0.5}
        )
        write_manifest(run, iteration, "advantages", 6, {"total_s": 3.0})
        run.store.write_json(_synthetic_run_metrics(iteration), *output_parts(run, iteration, "update"))
        write_manifest(
            run, iteration, "update", 2, {"total_s": 4.0}, agents=_synthetic_run_metrics(iteration)
        )
    run.store.write_parquet(frame, *output_parts(run, 2, "rollout"))
    write_manifest(run, 2, "rollout", 6, {"total_s": 1.0}, success_rate=1.0)
    return run


@pytest.fixture
def register_entry_point(monkeypatch):
    """Register a plug-in for the test as an installed package would: `register_entry_point(group, name,
    "module:ATTR")` adds it to what `mappa.core.plugins` reads (the installed entry points stay)."""
    from importlib.metadata import EntryPoint

    from mappa.core import plugins

    added: list[EntryPoint] = []
    installed = plugins.entry_points

    def entry_points(group, name=None):
        ours = [ep for ep in added if ep.group == group and name in (None, ep.name)]
        return [*ours, *(installed(group=group) if name is None else installed(group=group, name=name))]

    monkeypatch.setattr(plugins, "entry_points", entry_points)
    return lambda group, name, value: added.append(EntryPoint(name=name, value=value, group=group))
