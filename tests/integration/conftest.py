"""Real services for integration tests: Prefect's test harness (a real local server) and a local Ray."""

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
