"""Prefect's temporary API server for a `mappa` command without PREFECT_API_URL, started in a session of
its own so that Ctrl-C in the terminal stops the run but not the server the run reports to.

Prefect starts this server (uvicorn on a free loopback port, the local database, no UI) on first use and
stops it at exit; started as a child in the terminal's process group, it gets the terminal's SIGINT too and
dies while the interrupted flow still reports its state to it (the command then hangs for about a minute
and ends with a connection error instead of its one line). Starting Prefect's same server object first,
with `start_new_session`, keeps everything else Prefect's. A no-op when an API URL is configured.

Not covered: a `mappa` killed with SIGKILL leaves the server running (as Prefect's own start does).
"""

from __future__ import annotations

import functools
import subprocess


def start_temporary_server() -> None:
    from prefect.settings import get_current_settings

    if get_current_settings().api.url:
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the instance Prefect's clients use when no API URL is set
    if server.running:
        return
    popen = subprocess.Popen
    subprocess.Popen = functools.partial(popen, start_new_session=True)  # Prefect 3.7 spawns it with Popen
    try:
        server.start()
    finally:
        subprocess.Popen = popen
