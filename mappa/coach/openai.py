"""The openai coach (`coach.type: openai`): any OpenAI-compatible chat endpoint (a vLLM server, a hosted API).

One POST `{base_url}/chat/completions` per chat, at most `max_concurrency` in flight (a semaphore).
Connection errors, timeouts, 408, 429 and 5xx are retried up to `max_retries` times with exponential
backoff and full jitter (a numeric `Retry-After` is honoured, capped at 30 s); other 4xx fail at once,
naming the status and the endpoint. An endpoint that is down (no connection, a timeout, 502/503/504: a
server restarting) is waited for longer, up to `outage_budget_s` on one outage clock shared by the
coach's requests (`mappa.coach.outage`); past it `CoachOutageError` names the base_url, the wait and the
fix. Each answer is handed to `on_answer` (the run's coach cache) as it arrives, and a failure is raised
only once the requests in flight have ended, so the stage's next attempt asks only for the rest. The API
key is sent only in the Authorization header: never logged, never in errors or `repr`. `usage` counts
what the endpoint reported using (requests answered, prompt and completion tokens, from each answer's
`usage`) and the most requests that were in flight at once; the score manifest records it (`coach_usage`).

`COACH` declares the type: an LLM coach reading a template, behind an endpoint that is reached before a
run starts (`check_ready`). The API key is read here, once per coach, from the environment variable that
`coach.api_key_env` names; a missing key is allowed only for loopback endpoints (a local vLLM server needs
none), otherwise the error names the variable to set.

Not covered here: streaming, tool calling, or counting tokens against the endpoint's context limit.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import random
from urllib.parse import urlparse

import httpx

from mappa.coach.base import Coach, CoachError, CoachOutageError, CoachUnavailableError, LLMCoach, OnAnswer
from mappa.coach.outage import OUTAGE_STATUS, EndpointOutage
from mappa.config import CoachConfig
from mappa.config.coach_registry import CoachInputs, CoachSpec

_RETRY_STATUS = frozenset({408, 429}) | frozenset(range(500, 600))
_MAX_RETRY_AFTER_S = 30.0


class OpenAICoach(LLMCoach):
    """Scores actions through `{config.base_url}/chat/completions` with `config.model`."""

    def __init__(
        self, config: CoachConfig, api_key: str | None, backoff_s: float = 0.5, max_backoff_s: float = 8.0
    ) -> None:
        if not config.base_url:
            raise ValueError("coach.type=openai needs coach.base_url (e.g. http://127.0.0.1:8000/v1)")
        super().__init__(config.model, config.fallback_score)
        self.config = config
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self.usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "max_in_flight": 0}
        self._in_flight = 0
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.outage = EndpointOutage(config.base_url, config.outage_budget_s, first_wait_s=backoff_s)

    def __repr__(self) -> str:
        return f"OpenAICoach(model={self.model_name!r}, url={self.url!r})"

    async def _chat_batch(
        self, chats: list[list[dict[str, str]]], on_answer: OnAnswer | None = None
    ) -> list[str]:
        # A client per batch: httpx clients are bound to the event loop that created them.
        semaphore = asyncio.Semaphore(self.config.max_concurrency)
        limits = httpx.Limits(max_connections=self.config.max_concurrency)
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        async with httpx.AsyncClient(timeout=self.config.timeout_s, limits=limits, headers=headers) as client:
            failures: list[BaseException] = []

            async def one(index: int, messages: list[dict[str, str]]) -> str | None:
                async with semaphore:
                    if failures:  # after a failure no new request starts; those in flight finish
                        return None
                    self._in_flight += 1
                    self.usage["max_in_flight"] = max(self.usage["max_in_flight"], self._in_flight)
                    try:
                        answer = await self._post_with_retries(client, messages)
                    except Exception as exc:  # noqa: BLE001 - raised below, once the others finished
                        failures.append(exc)
                        return None
                    finally:
                        self._in_flight -= 1
                    if on_answer is not None:
                        on_answer(index, answer)  # stored before the next request starts
                    return answer

            answers = await asyncio.gather(*(one(i, chat) for i, chat in enumerate(chats)))
        if failures:  # raised once every answer that arrived is stored: a retry asks only for the rest
            raise failures[0]
        return [answer for answer in answers if answer is not None]

    def _count(self, used: dict[str, int]) -> None:
        self.usage["requests"] += 1
        for key, tokens in used.items():
            self.usage[key] += tokens

    async def _post_with_retries(self, client: httpx.AsyncClient, messages: list[dict[str, str]]) -> str:
        payload = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_new_tokens,
        }
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = await client.post(self.url, json=payload)
            except httpx.TransportError as exc:  # connection refused, DNS, timeouts, a dropped connection
                last, down = f"{type(exc).__name__}: {exc}", True
            else:
                if response.status_code == 200:
                    self.outage.answered()
                    answer, used = _answer(response, self.url)
                    self._count(used)
                    return answer
                down = response.status_code in OUTAGE_STATUS
                if not down:
                    self.outage.answered()  # it answers, if not well: the outage (if any) is over
                if response.status_code not in _RETRY_STATUS:
                    raise CoachError(
                        f"coach endpoint {self.url} answered HTTP {response.status_code}: "
                        f"{response.text[:300]!r}; check coach.model ({self.config.model!r}) and the API key "
                        f"in ${self.config.api_key_env}"
                    )
                last = f"HTTP {response.status_code}"
                retry_after = _retry_after(response)
            wait = self.outage.wait_s(last, retry_after) if down else None
            if wait is None:  # not an outage, or one past its budget: the count of retries decides
                if attempt >= self.config.max_retries:
                    raise self._unavailable(attempt + 1, last, down)
                wait = self._delay(attempt, retry_after)
            attempt += 1
            await asyncio.sleep(wait)

    def _unavailable(self, attempts: int, last: str, down: bool) -> CoachUnavailableError:
        """The error that stops the stage: an outage past its budget, or a request out of retries."""
        if down and self.config.outage_budget_s > 0:
            return CoachOutageError(
                f"coach endpoint {self.config.base_url} did not answer for {self.outage.down_s:.0f} s (last: "
                f"{last}), longer than coach.outage_budget_s={self.config.outage_budget_s:g}; the answers "
                f"that arrived are kept. Fix: bring the server back (e.g. `vllm serve <model> --port 8000`) "
                f"or resume with --set coach.base_url=<another>; raise coach.outage_budget_s to wait longer"
            )
        return CoachUnavailableError(
            f"coach endpoint {self.config.base_url} did not answer after {attempts} attempt(s) "
            f"(last: {last}). "
            f"Fix: start the server (e.g. `vllm serve <model> --port 8000`) or correct coach.base_url; raise "
            f"coach.timeout_s / coach.max_retries / coach.outage_budget_s for a slow endpoint; or use "
            f"coach.type=rubric offline."
        )

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, _MAX_RETRY_AFTER_S)
        cap = min(self.max_backoff_s, self.backoff_s * 2**attempt)
        return random.uniform(0.0, cap)  # full jitter: spreads retries of concurrent calls


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _answer(response: httpx.Response, url: str) -> tuple[str, dict[str, int]]:
    """The answer's text and the tokens the endpoint reports it used (`usage`, where it reports one), from
    one parse of the body."""
    try:
        body = response.json()
        content = body["choices"][0]["message"].get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise CoachError(
            f"coach endpoint {url} did not answer in OpenAI chat format ({type(exc).__name__}): "
            f"{response.text[:300]!r}; point coach.base_url at an OpenAI-compatible /v1 endpoint"
        ) from None
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return content, {}
    try:
        return content, {key: int(usage.get(key) or 0) for key in ("prompt_tokens", "completion_tokens")}
    except (TypeError, ValueError):
        return content, {}


def check_endpoint(config: CoachConfig, api_key: str | None, timeout_s: float = 10.0) -> None:
    """Ask the endpoint once, before any work, whether it answers, takes the key and serves the model
    (`GET {base_url}/models`, which OpenAI, vLLM and SGLang serve); a ValueError names what to fix."""
    if not config.base_url:
        raise ValueError("coach.type=openai needs coach.base_url (e.g. http://127.0.0.1:8000/v1)")
    url = config.base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.TransportError as exc:
        raise ValueError(
            f"coach endpoint {config.base_url} does not answer ({type(exc).__name__}: {exc}); start the "
            f"server or correct coach.base_url, or use coach.type=rubric offline"
        ) from None
    if response.status_code in (401, 403):
        raise ValueError(
            f"coach endpoint {config.base_url} refused the API key (HTTP {response.status_code}); put a "
            f"valid key in ${config.api_key_env}"
        )
    if response.status_code != 200:
        return  # no model list here (some compatible servers lack one): the score stage will tell
    try:
        served = [entry.get("id") for entry in response.json().get("data", [])]
    except (ValueError, AttributeError):
        return
    if served and config.model not in served:
        raise ValueError(
            f"coach endpoint {config.base_url} does not serve coach.model {config.model!r}; it serves: "
            f"{', '.join(map(str, served[:10]))}"
        )


def check_ready(config: CoachConfig) -> None:
    """Before a run or a re-scoring starts: the key is there and the endpoint answers, takes it and serves
    the model (one GET, seconds), so a run does not roll out for minutes and then fail at the score stage."""
    check_endpoint(config, api_key(config))


def api_key(config: CoachConfig) -> str | None:
    """The key in `$coach.api_key_env`; None for a loopback endpoint without one, else a ValueError."""
    key = os.environ.get(config.api_key_env) or None
    if key is None and not is_loopback(config.base_url or ""):
        raise ValueError(
            f"coach.type=openai at {config.base_url} needs an API key in the environment variable "
            f"${config.api_key_env} (set it, or point coach.api_key_env at the variable that holds it); "
            f"only loopback endpoints (127.0.0.1, localhost) may go without a key"
        )
    return key


def is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build(config: CoachConfig, inputs: CoachInputs) -> Coach:
    return OpenAICoach(config, api_key(config))


COACH = CoachSpec(
    name="openai",
    build=build,
    is_llm=True,
    reads_template=True,
    check_endpoint=check_ready,
    summary="an OpenAI-compatible endpoint (`coach.base_url`) serving `coach.model`, via `coach.template`",
)
