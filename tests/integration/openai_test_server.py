"""A local OpenAI-compatible chat endpoint for tests about everything around the coach (resume, caching,
retries): it answers `POST /v1/chat/completions` at once with a score that is a fixed function of the chat,
and counts, per chat, how many requests it received and answered; `authorizations` keeps the
Authorization headers it was sent (a test checks that a key from the environment reached it).

Hooks: `fail_next` answers that many requests with HTTP 503 (a passing outage); `before_answer(number)` runs
before request `number` (1-based) is answered and may return False to drop it unanswered (a test kills the
run there, mid-stage, or stops the server: `stop()`, and later `restart()` on the same port). A scripted
fake: the tests using it are not about the coach's judgement.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chat_key(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()


def scripted_score(messages: list[dict]) -> int:
    """0-10, fixed per chat, spread over the range so the advantages are not all zero."""
    return int(chat_key(messages)[:8], 16) % 11


@dataclass
class CoachServerState:
    fail_next: int = 0
    before_answer: Callable[[int], bool] | None = None
    received: Counter = field(default_factory=Counter)
    answered: Counter = field(default_factory=Counter)
    authorizations: set[str | None] = field(default_factory=set)
    models: tuple[str, ...] = ()  # what GET /v1/models lists (empty: the list is empty)
    required_key: str | None = None  # if set, a request without `Bearer <key>` gets HTTP 401
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def total_received(self) -> int:
        return sum(self.received.values())


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a killed client closes its socket mid-answer


def _handler(state: CoachServerState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server dispatches to
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            key = chat_key(body["messages"])
            with state.lock:
                state.received[key] += 1
                state.authorizations.add(self.headers.get("Authorization"))
                number = state.total_received
                failing = state.fail_next > 0
                state.fail_next -= int(failing)
            if failing:
                return self._send(503, {"error": {"message": "the test server is down for this request"}})
            if state.before_answer is not None and not state.before_answer(number):
                return self._send(503, {"error": {"message": "dropped"}})
            score = scripted_score(body["messages"])
            content = f"Judged by the scripted test coach.\nPROCESS_SCORE: {score}"
            message = {"role": "assistant", "content": content}
            self._send(200, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
            with state.lock:
                state.answered[key] += 1

        def do_GET(self) -> None:  # GET /v1/models, as `mappa train` asks before any work
            if state.required_key and self.headers.get("Authorization") != f"Bearer {state.required_key}":
                return self._send(401, {"error": {"message": "invalid api key"}})
            if self.path.rstrip("/").endswith("/models"):
                return self._send(200, {"object": "list", "data": [{"id": m} for m in state.models]})
            return self._send(404, {"error": {"message": "not found"}})

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


class CoachServer:
    """`with CoachServer() as server:` serves on 127.0.0.1 at `server.base_url` in a thread. `stop()` closes
    the port as a dead server would (connections refused); `restart()` serves again on the same port, with
    the same state (counts, hooks)."""

    def __init__(self) -> None:
        self.state = CoachServerState()
        self._serve(port=0)
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def _serve(self, port: int) -> None:
        self._httpd = _Server(("127.0.0.1", port), _handler(self.state))
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self.running = False

    def __enter__(self) -> CoachServer:
        self._thread.start()
        self.running = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if not self.running:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self.running = False

    def restart(self) -> None:
        self._serve(self.port)
        self.__enter__()
