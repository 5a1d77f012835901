"""Without PREFECT_API_URL, `mappa` starts Prefect's temporary server in a session of its own: a terminal's
Ctrl-C (SIGINT to the foreground process group) stops the run but not the server the run reports its
state to (else the command hangs on a dead server instead of printing its one line)."""

import os
import subprocess
import sys

SCRIPT = """
import os
from mappa.flows.temporary_server import start_temporary_server
from prefect.server.api.server import SubprocessASGIServer
start_temporary_server()
server = SubprocessASGIServer()
pid = server.server_process.pid
print(os.getsid(pid) != os.getsid(0), os.getpgid(pid) != os.getpgid(0), flush=True)
from prefect.client.orchestration import get_client
with get_client(sync_client=True) as client:
    same = str(client.api_url).rstrip("/") == server.api_url.rstrip("/")
    print(same, client.api_healthcheck() is None, flush=True)
"""


def test_the_temporary_server_is_out_of_the_terminals_process_group(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"  # as mappa's CLI sets it (a busy CI)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "True", "True", "True"], done.stdout + done.stderr[-2000:]
