"""The OpenAI-compatible coach against a real HTTP server on 127.0.0.1 (a thread in this test process).

The server answers OpenAI-style JSON, fails its first request with 500 (to exercise the retry), counts
requests and in-flight concurrency, and records what it received. Unreachable and too-slow endpoints
must fail quickly with an error that names the base_url and the fix, never the key.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mappa.coach.base import CoachError, CoachUnavailableError
from mappa.coach.openai import OpenAICoach
from mappa.coach.prompt import CoachRequest
from mappa.config import CoachConfig


@dataclass
class ServerState:
    fail_first: int = 1
    fail_status: int = 500
    delay_s: float = 0.05
    answer: str = "Runs and prints the result.\nPROCESS_SCORE: 7"
    status: int = 200
    requests: list[dict] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(state: ServerState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server dispatches to
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.requests.append(body)
                state.auth.append(self.headers.get("Authorization"))
                state.paths.append(self.path)
                number = len(state.requests)
                state.in_flight += 1
                state.max_in_flight = max(state.max_in_flight, state.in_flight)
            try:
                time.sleep(state.delay_s)
                if number <= state.fail_first:
                    self._send(state.fail_status, {"error": "warming up"}, {"Retry-After": "0"})
                elif state.status != 200:
                    self._send(state.status, {"error": {"message": "model not found"}})
                else:
                    message = {"role": "assistant", "content": state.answer}
                    self._send(200, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
            finally:
                with state.lock:
                    state.in_flight -= 1

        def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:  # keep test output quiet
            pass

    return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up (the timeout test) closes its socket before the slow answer is written


@pytest.fixture
def server() -> Iterator[tuple[str, ServerState]]:
    state = ServerState()
    httpd = QuietServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    finally:
        deadline = time.monotonic() + 3.0
        while state.in_flight and time.monotonic() < deadline:  # let slow handlers finish before closing
            time.sleep(0.02)
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _requests(n: int) -> list[CoachRequest]:
    return [
        CoachRequest(
            action_id=f"t1/{i}",
            trajectory_id="t1",
            agent="executor",
            messages=[{"role": "user", "content": f"judge {i}"}],
            used_ground_truth=False,
        )
        for i in range(n)
    ]


def _config(base_url: str, **kw: object) -> CoachConfig:
    defaults: dict[str, object] = {
        "type": "openai",
        "base_url": base_url,
        "model": "coach-7b",
        "max_retries": 2,
        "outage_budget_s": 0,  # only the count of retries (test_coach_outage waits through outages)
        "timeout_s": 2.0,
        "max_concurrency": 2,
        "max_new_tokens": 64,
    }
    return CoachConfig(**{**defaults, **kw})


def test_scores_over_http_with_retry_and_concurrency_limit(server):
    base_url, state = server
    coach = OpenAICoach(_config(base_url), api_key="sk-test-key", backoff_s=0.01)
    scores = asyncio.run(coach.score(_requests(5)))
    assert [s.score for s in scores] == [7.0] * 5 and {s.parse_status for s in scores} == {"ok"}
    assert [s.action_id for s in scores] == [f"t1/{i}" for i in range(5)]
    assert all(s.coach_model == "coach-7b" and "prints the result" in s.rationale for s in scores)
    assert len(state.requests) == 6  # one 500, retried, plus five answers
    assert state.max_in_flight <= 2
    assert set(state.paths) == {"/v1/chat/completions"}
    assert set(state.auth) == {"Bearer sk-test-key"}
    body = state.requests[-1]
    assert body["model"] == "coach-7b" and body["max_tokens"] == 64 and body["temperature"] == 0.0
    assert body["messages"][0]["role"] == "user"


def test_unparsable_answer_is_reasked_over_http(server):
    base_url, state = server
    state.fail_first, state.answer = 0, "no score here"
    coach = OpenAICoach(_config(base_url, fallback_score=3.0), api_key=None, backoff_s=0.01)
    (score,) = asyncio.run(coach.score(_requests(1)))
    assert (score.score, score.parse_status) == (3.0, "fallback")
    assert len(state.requests) == 2 and state.requests[1]["messages"][-1]["content"].startswith("Your answer")
    assert state.auth == [None, None]  # a loopback server without a key gets no Authorization header


def test_rate_limit_is_retried(server):
    base_url, state = server
    state.fail_status = 429
    coach = OpenAICoach(_config(base_url, max_retries=1), api_key="sk-test-key", backoff_s=5.0)
    started = time.monotonic()
    (score,) = asyncio.run(coach.score(_requests(1)))
    assert score.score == 7.0 and len(state.requests) == 2
    assert time.monotonic() - started < 2.0  # Retry-After: 0 is honoured instead of the 5 s backoff


def test_client_errors_are_not_retried(server):
    base_url, state = server
    state.fail_first, state.status = 0, 404
    coach = OpenAICoach(_config(base_url), api_key="sk-test-key", backoff_s=0.01)
    with pytest.raises(CoachError, match=r"HTTP 404.*coach.model \('coach-7b'\)") as info:
        asyncio.run(coach.score(_requests(1)))
    assert len(state.requests) == 1 and "sk-test-key" not in str(info.value)


def test_slow_endpoint_times_out_with_a_clear_error(server):
    base_url, state = server
    state.fail_first, state.delay_s = 0, 0.6
    coach = OpenAICoach(
        _config(base_url, timeout_s=0.1, max_retries=1), api_key="sk-test-key", backoff_s=0.01
    )
    started = time.monotonic()
    with pytest.raises(CoachUnavailableError, match=r"did not answer after 2 attempt\(s\).*ReadTimeout"):
        asyncio.run(coach.score(_requests(1)))
    assert time.monotonic() - started < 2.0  # did not wait for the 0.6 s answers


def test_unreachable_endpoint_fails_fast_naming_url_and_fix():
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    coach = OpenAICoach(
        _config(base_url, max_retries=2, timeout_s=0.5), api_key="sk-test-key", backoff_s=0.01
    )
    started = time.monotonic()
    with pytest.raises(CoachUnavailableError) as info:
        asyncio.run(coach.score(_requests(2)))
    message = str(info.value)
    assert time.monotonic() - started < 2.0
    assert base_url in message and "3 attempt(s)" in message and "ConnectError" in message
    assert "coach.base_url" in message and "vllm serve" in message and "sk-test-key" not in message
