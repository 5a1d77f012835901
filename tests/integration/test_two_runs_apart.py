"""Two runs on one machine at once each get a local Ray of their own: the second does not join, reuse or
stop the first's (`ensure_ray` starts with `address="local"`; Ray's default would join a cluster that
`ray start` left running on the machine)."""

import shutil
import subprocess
import sys
import tempfile

import pytest

pytestmark = pytest.mark.slow

HOLD = """
import sys
from mappa.cluster.ray_cluster import ensure_ray
from mappa.config import load_config
import ray
ensure_ray(load_config("configs/mathchat-cpu.yaml", ["cluster.num_cpus=1"]))
print(ray.get_runtime_context().gcs_address, flush=True)
if sys.argv[1] == "hold":
    sys.stdin.readline()  # until the second run has finished
print("alive", ray.is_initialized(), len(ray.nodes()), flush=True)
"""


def test_a_second_run_starts_its_own_ray_and_leaves_the_first_alone():
    ray_tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths stay under 107 bytes
    env = {"MAPPA_RAY_TMP": ray_tmp, "RAY_USAGE_STATS_ENABLED": "0", "PATH": "/usr/bin:/bin"}
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True, "env": env}
    first = subprocess.Popen([sys.executable, "-c", HOLD, "hold"], **pipes)
    try:
        first_address = first.stdout.readline().strip()
        second = subprocess.run([sys.executable, "-c", HOLD, "go"], capture_output=True, text=True, env=env)
        assert second.returncode == 0, second.stderr[-2000:]
        second_address = second.stdout.splitlines()[0]
        assert first_address and second_address and first_address != second_address
        out, _ = first.communicate("done\n", timeout=60)  # the first run's Ray outlived the second run
    finally:
        first.kill()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert first.returncode == 0 and out.strip() == "alive True 1"
