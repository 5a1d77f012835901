"""Riding out a coach endpoint's outage (`mappa.coach.outage`, `OpenAICoach`): the shared outage clock's
schedule on a fake clock, and the coach against a real loopback server that is down (refused connections
or HTTP 503) for a fraction of a second, or for longer than a tiny budget. The budgets and waits are
tenths of a second: nothing here sleeps for long."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from mappa.coach.base import CoachOutageError, CoachUnavailableError
from mappa.coach.cache import AnswerCache
from mappa.coach.openai import OpenAICoach
from mappa.coach.outage import EndpointOutage
from mappa.coach.prompt import CoachRequest
from mappa.config import CoachConfig, load_config
from mappa.core.errors import worth_retrying
from mappa.flows.stage_tasks import retry_unless_waited_out
from mappa.storage.store import ArtifactStore


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_schedule_per_outage_doubling_capped_and_one_line_per_wait():
    clock, lines = FakeClock(), []
    outage = EndpointOutage("http://coach/v1", 60.0, 1.0, 8.0, clock=clock, say=lines.append)
    assert outage.wait_s("ConnectError") == 1.0  # the first failure starts the clock: try again in 1 s
    clock.now += 0.25
    assert outage.wait_s("ConnectError") == 0.75  # a second request waits for the same try
    assert (
        len(lines) == 1 and "does not answer (ConnectError); trying again in 1 s, for up to 60 s" in lines[0]
    )
    waits = []
    for _ in range(6):  # each try fails: 2, 4, 8, then capped at 8
        clock.now = outage.next_try
        waits.append(outage.wait_s("HTTP 503"))
    assert waits == [2.0, 4.0, 8.0, 8.0, 8.0, 8.0] and len(lines) == 7
    assert lines[-1] == (
        "coach endpoint http://coach/v1 unreachable for 31 s (HTTP 503); trying again in 8 s, for up to 29 s "
        "more (coach.outage_budget_s=60)"
    )


def test_retry_after_is_honoured_within_the_cap_and_the_last_try_lands_on_the_budget():
    clock, lines = FakeClock(), []
    outage = EndpointOutage("http://coach/v1", 10.0, 1.0, 4.0, clock=clock, say=lines.append)
    assert outage.wait_s("HTTP 503", retry_after=2.5) == 2.5
    clock.now = outage.next_try
    assert outage.wait_s("HTTP 503", retry_after=60.0) == 4.0  # capped at max_wait_s
    clock.now = outage.next_try  # 6.5 s down, 3.5 s left: the next wait (4 s) is cut to the budget's end
    assert outage.wait_s("HTTP 503") == 3.5 and lines[-1].endswith(
        "a last try in 3.5 s (coach.outage_budget_s=10)"
    )
    clock.now = outage.next_try
    assert outage.wait_s("HTTP 503") is None and outage.down_s == 10.0  # spent: give up


def test_an_answer_ends_the_outage_and_the_next_one_starts_a_fresh_clock():
    clock, lines = FakeClock(), []
    outage = EndpointOutage("http://coach/v1", 5.0, 1.0, 8.0, clock=clock, say=lines.append)
    outage.wait_s("ConnectError")
    clock.now += 4.0
    outage.answered()
    assert lines[-1] == "coach endpoint http://coach/v1 answers again after 4 s" and outage.down_s == 0.0
    clock.now += 100.0
    assert outage.wait_s("ReadTimeout") == 1.0  # a new outage: a fresh budget, the first wait again


@dataclass
class Endpoint:
    """What the loopback server answers: `status(number)` for request `number` (1-based)."""

    status: Callable[[int], int] = lambda number: 200
    requests: int = 0
    answered: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass


def serve(endpoint: Endpoint, port: int = 0) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server dispatches to
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with endpoint.lock:
                endpoint.requests += 1
                status = endpoint.status(endpoint.requests)
            content = "PROCESS_SCORE: 6" if status == 200 else "down"
            message = {"role": "assistant", "content": content}
            data = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            if status == 200:
                with endpoint.lock:
                    endpoint.answered.append(body["messages"][-1]["content"])

        def log_message(self, *args: object) -> None:
            pass

    httpd = QuietServer(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return httpd


def stop(httpd: ThreadingHTTPServer) -> None:
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def endpoint() -> Iterator[tuple[str, Endpoint]]:
    state = Endpoint()
    httpd = serve(state)
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    stop(httpd)


def requests(n: int) -> list[CoachRequest]:
    return [
        CoachRequest(f"t/{i}", "t", "solver", [{"role": "user", "content": f"judge {i}"}], False)
        for i in range(n)
    ]


def coach(base_url: str, budget_s: float, backoff_s: float = 0.02, **settings: object) -> OpenAICoach:
    settings = {"max_retries": 0, **settings}
    config = CoachConfig(type="openai", base_url=base_url, model="m", outage_budget_s=budget_s, **settings)
    return OpenAICoach(config, api_key=None, backoff_s=backoff_s)


def test_requests_wait_through_a_restart_on_the_same_port_and_each_chat_is_answered_once(caplog):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    state, restarted = Endpoint(), []
    timer = threading.Timer(0.4, lambda: restarted.append(serve(state, port)))  # down 0.4 s, then back
    timer.start()
    try:
        started = time.monotonic()
        with caplog.at_level("WARNING", logger="mappa.coach.outage"):
            scores = asyncio.run(
                coach(f"http://127.0.0.1:{port}/v1", 5.0, max_concurrency=4).score(requests(6))
            )
        took = time.monotonic() - started
    finally:
        timer.join()
        for httpd in restarted:
            stop(httpd)
    assert [s.score for s in scores] == [6.0] * 6 and sorted(state.answered) == [
        f"judge {i}" for i in range(6)
    ]
    assert 0.4 <= took < 2.0, took
    lines = [r.getMessage() for r in caplog.records]
    assert "does not answer (ConnectError" in lines[0] and "answers again after" in lines[-1], lines
    assert len(lines) < 10, lines  # one line per scheduled try, not one per request


def test_concurrent_requests_try_again_together(endpoint, caplog):
    base_url, state = endpoint
    state.status = lambda number: 503 if number <= 12 else 200  # down for the first 12 requests
    with caplog.at_level("WARNING", logger="mappa.coach.outage"):
        scores = asyncio.run(coach(base_url, 5.0, backoff_s=0.2, max_concurrency=4).score(requests(4)))
    assert [s.score for s in scores] == [6.0] * 4 and state.requests == 16
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and "answers again" in lines[-1], lines  # 3 rounds of 4 requests: 3 waits


def test_past_the_budget_the_error_names_the_endpoint_and_the_answers_that_arrived_are_kept(
    endpoint, tmp_path
):
    base_url, state = endpoint
    state.status = lambda number: 200 if number <= 2 else 503  # answers twice, then goes down
    first = coach(base_url, 0.3, max_concurrency=1)
    first.cache = AnswerCache(ArtifactStore(str(tmp_path)), "run", "m", {})
    started = time.monotonic()
    with pytest.raises(CoachOutageError) as info:
        asyncio.run(first.score(requests(5)))
    assert 0.3 <= time.monotonic() - started < 1.5
    message = str(info.value)
    assert re.match(rf"coach endpoint {base_url} did not answer for \d+ s \(last: HTTP 503\)", message), (
        message
    )
    assert "coach.outage_budget_s=0.3" in message and "coach.base_url" in message, message
    assert first.cache.writes == 2 and not worth_retrying(info.value)

    state.status = lambda number: 200  # back: a new attempt asks only for the other three
    again = coach(base_url, 0.3, max_concurrency=1)
    again.cache = AnswerCache(ArtifactStore(str(tmp_path)), "run", "m", {})
    assert [s.score for s in asyncio.run(again.score(requests(5)))] == [6.0] * 5
    assert again.cache.hits == 2 and sorted(state.answered) == [f"judge {i}" for i in range(5)]


def test_without_a_budget_only_the_count_of_retries_decides(endpoint):
    base_url, state = endpoint
    state.status = lambda number: 503
    with pytest.raises(CoachUnavailableError, match=r"after 2 attempt\(s\) \(last: HTTP 503\)") as info:
        asyncio.run(coach(base_url, 0.0, max_retries=1).score(requests(1)))
    assert not isinstance(info.value, CoachOutageError) and worth_retrying(info.value)


def test_a_stage_is_retried_unless_its_error_waited_out_its_budget():
    waited = SimpleNamespace(data=CoachOutageError("down for 600 s"))
    other = SimpleNamespace(data=CoachUnavailableError("3 attempts"))
    assert not retry_unless_waited_out(None, None, waited)
    assert retry_unless_waited_out(None, None, other)
    assert retry_unless_waited_out(None, None, SimpleNamespace(data=None))


def test_the_budget_is_an_operational_setting_outside_the_config_hash():
    base = load_config("configs/mathchat-cpu.yaml")
    longer = load_config("configs/mathchat-cpu.yaml", ["coach.outage_budget_s=60"])
    assert longer.config_hash() == base.config_hash() and base.coach.outage_budget_s == 600
