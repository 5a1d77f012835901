"""Real services for integration tests: Prefect's test harness (a real local server) and a local Ray; and
one finished two-iteration run on the tiny model that several modules read (a run costs a minute here)."""

import os
import shutil
import tempfile

import pytest


@pytest.fixture(scope="session")
def prefect_harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray for the session (short temp path: Ray's socket paths must stay under 107 characters)."""
    import ray

    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="mappa", _temp_dir=temp)
    yield
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="session")
def prefect_api_url(prefect_harness) -> str:
    """The harness server's URL, for `mappa` child processes (PREFECT_API_URL)."""
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


@pytest.fixture
def coach_server():
    """A scripted OpenAI-compatible coach endpoint on loopback that counts requests per chat."""
    from openai_test_server import CoachServer

    with CoachServer() as server:
        yield server


@pytest.fixture(scope="session")
def mathchat_run(tmp_path_factory, tiny_model, prefect_harness, ray_local):
    """The real `train` flow for two iterations on the tiny model (rubric coach, sandbox), evaluated after
    iteration 1 only; the verifier trains a LoRA adapter (the flow must not care). Returns the run, the
    flow's summary and the config's path. Tests read it; a test that adds to it works on a copy."""
    from tiny_run import write_tiny_config

    from mappa.flows.train import train
    from mappa.storage.run import Run

    root = tmp_path_factory.mktemp("runs")
    path = write_tiny_config(
        root / "config.yaml",
        tiny_model,
        root,
        name="it",
        iterations=2,
        coach={"type": "rubric", "use_ground_truth": True, "api_key_env": "MAPPA_TEST_TRACKER_KEY"},
        trackers={"wandb": {"enabled": True, "mode": "offline"}, "mlflow": {"enabled": True}},
        rollout={"problems_per_iteration": 3, "max_new_tokens": 24, "eval_every": 2, "eval_problems": 2},
        trainer={"lr": 1e-3},
        checkpoint={"keep_last": 2},  # test_evaluate evaluates iteration 0 too
        agents={
            "solver": {"model": str(tiny_model)},
            "executor": {"model": str(tiny_model)},
            "verifier": {"model": str(tiny_model), "lora": {"rank": 4, "alpha": 8}},
        },
    )
    os.environ["MAPPA_TEST_TRACKER_KEY"] = "sk-tracker-test-secret"  # no tracker may hold it
    try:
        summary = train(config_path=str(path), run_id="it-run")
    finally:
        del os.environ["MAPPA_TEST_TRACKER_KEY"]
    return Run.open(str(root), "it-run"), summary, path
