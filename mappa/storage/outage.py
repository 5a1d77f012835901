"""Riding out an artifact store that stops answering: which errors mean "the endpoint is down", one outage
clock per endpoint, and the error that stops a run once the clock passes `storage.outage_budget_s`.

What an S3 outage looks like from here (s3fs 2026.9, aiobotocore 3.10; a real S3 server, moto's, behind a
proxy that refuses connections: tests/integration/test_s3_outage.py):
- a refused connection raises botocore's `EndpointConnectionError` once botocore's own retries are spent
  (legacy mode: 5 attempts, 5-10 s in all; AWS_MAX_ATTEMPTS and AWS_RETRY_MODE change that); s3fs does not
  retry it, and `exists` raises it rather than answering False. A connection reset inside an upload raised
  it too (the proxy cut 1 MiB into a body); a server restarting behind a load balancer may answer 502/503/504.
- a write cut off leaves nothing a reader sees: a PUT creates its object whole or not at all, and a
  multipart upload (files from 100 MiB: a checkpoint's weights) becomes an object only when completed.
  s3fs aborts an upload that failed; where the abort cannot reach the endpoint either, its parts stay
  invisible and billed until the bucket's lifecycle rule (AbortIncompleteMultipartUpload) removes them.
- so what a resume must not trust is a *set* of objects cut short (a stage's artifacts without its
  manifest, a checkpoint's weights without its `trainer_state.pt`): the manifest-last rule and the order
  a checkpoint's files are written in (`ArtifactStore.put_folder`'s `last`) cover those.

Every remote call of `ArtifactStore` goes through `ride_out`: an outage error (`is_outage`) starts the
endpoint's clock at the start of the call that failed; the call is tried again after 1 s, 2 s, 4 s ... (at
most 30 s apart), with one log line per wait naming the endpoint, until it succeeds (the outage is over: one
line says so) or the clock passes the budget, when `StoreOutageError` names the store, the endpoint, how long
it waited and the fix. The clock belongs to the process, not to the call: once a budget is spent, the next
calls (the stage's `failed` event, the CLI's look at the run, the copy of the command's log) try once each,
whatever their own budget, instead of waiting as long again, until one succeeds. A process that learns of an
outage from another (the driver, from a Ray worker's error) adopts it with `adopt_outage`.

Not covered: Prefect's own writes of task results under a remote root (its `RemoteFileSystem` block does not
go through the store; not measured: a result write during an outage should fail the task after its stage's
artifacts and manifest are complete, so that `mappa resume` skips it); a bare-bucket root's `exists()`, which
s3fs answers False on any error; errors that never heal (bad credentials, a missing bucket, TLS): those stop
at once, as before.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

OUTAGE_STATUS = frozenset({500, 502, 503, 504})
"""HTTP answers that mean the server (or the proxy in front of it) is down or restarting, not that the
request was wrong (S3 asks clients to retry 500 and 503 SlowDown)."""
# outage errors of fsspec backends, by module and class name (the packages are optional: none is imported)
_THIRD_PARTY = {
    "botocore.exceptions": ("ConnectionError", "HTTPClientError"),  # refused, closed, timed out
    "aiohttp.client_exceptions": ("ClientConnectionError", "ServerTimeoutError"),
    "fsspec.exceptions": ("FSTimeoutError",),
}

log = logging.getLogger(__name__)


class StoreOutageError(RuntimeError):
    """The artifact store did not answer within `storage.outage_budget_s`. `waited_out`: a stage retry
    would only wait as long again (`mappa.core.errors.worth_retrying`)."""

    waited_out = True

    def __init__(self, message: str, endpoint: str = "", waited_s: float = 0.0) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.waited_s = waited_s

    def __reduce__(self):  # a Ray worker's error crosses to the driver pickled
        return (type(self), (str(self), self.endpoint, self.waited_s))


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` (or an error in its chain) says the endpoint is unreachable or restarting: a refused,
    reset or timed-out connection, or an HTTP 500/502/503/504. TLS errors are not (they never heal), nor is
    a `StoreOutageError` (already waited out)."""
    for error in _chain(exc):
        if isinstance(error, StoreOutageError):
            return False
        names = {(cls.__module__, cls.__name__) for cls in type(error).__mro__}
        if any("SSL" in name for _, name in names):
            return False
        if isinstance(error, ConnectionError | TimeoutError):
            return True
        if any(name in _THIRD_PARTY.get(module, ()) for module, name in names):
            return True
        response = getattr(error, "response", None)  # botocore's ClientError
        status = (
            response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
        )
        if status in OUTAGE_STATUS:
            return True
    return False


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then its causes (`raise ... from`, and a Ray task error's `cause`), each once; not the errors
    it was raised while handling (one handled on the way is no reason to wait)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__


class StoreOutage:
    """The outage clock of one endpoint in this process, shared by every store and thread that uses it."""

    def __init__(
        self,
        endpoint: str,
        first_wait_s: float = 1.0,
        max_wait_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] = log.warning,
    ) -> None:
        self.endpoint = endpoint
        self.first_wait_s = first_wait_s
        self.max_wait_s = max_wait_s
        self.clock = clock
        self.say = say
        self.since: float | None = None  # when the first call that failed in this outage started
        self.tries = 0  # waits so far in this outage
        self.given_up = False  # a budget ran out in this outage: calls try once each until one succeeds
        self._lock = threading.Lock()

    def down_s(self) -> float:
        """How long the current outage has lasted (0 when the endpoint answers)."""
        return 0.0 if self.since is None else self.clock() - self.since

    def answered(self) -> None:
        """A call succeeded: the outage, if any, is over."""
        with self._lock:
            if self.since is None:
                return
            if self.tries:
                self.say(f"artifact store endpoint {self.endpoint} answers again after {self.down_s():.0f} s")
            self.since, self.tries, self.given_up = None, 0, False

    def wait_s(self, failure: str, budget_s: float, started: float) -> float | None:
        """Record a call that started at `started` and failed with an outage error (`failure`, one line):
        the seconds to wait before trying again, or None once the outage has lasted `budget_s`."""
        with self._lock:
            if self.since is None:
                self.since, self.tries = started, 0
            down = self.clock() - self.since
            left = budget_s - down
            if self.given_up or left <= 0:
                self.given_up = True
                return None
            wait = min(self.first_wait_s * 2**self.tries, self.max_wait_s, left)
            self.tries += 1
            self.say(
                f"artifact store endpoint {self.endpoint} unreachable for {down:.0f} s ({failure}); trying "
                f"again in {wait:.0f} s, for up to {left:.0f} s more (storage.outage_budget_s={budget_s:g})"
            )
            return wait

    def adopt(self, down_s: float) -> None:
        """Another process waited `down_s` on this endpoint in vain: this one gives up too (its clock
        started as long ago)."""
        with self._lock:
            start = self.clock() - down_s
            self.since = start if self.since is None else min(self.since, start)
            self.given_up = True


_OUTAGES: dict[str, StoreOutage] = {}
_OUTAGES_LOCK = threading.Lock()


def outage_of(endpoint: str) -> StoreOutage:
    """This process's outage clock of `endpoint`."""
    with _OUTAGES_LOCK:
        return _OUTAGES.setdefault(endpoint, StoreOutage(endpoint))


def adopt_outage(exc: BaseException) -> None:
    """When `exc` carries a `StoreOutageError` (a Ray worker's, say), start this process's clock of its
    endpoint as long ago as that process waited: its next calls try once instead of a whole budget."""
    for error in _chain(exc):
        if isinstance(error, StoreOutageError) and error.endpoint:
            outage_of(error.endpoint).adopt(error.waited_s)
            return


def ride_out(
    call: Callable[[], T],
    outage: StoreOutage,
    budget_s: float,
    doing: str,
    where: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`call()`, tried again through an outage of `outage.endpoint` for up to `budget_s` (see the module
    docstring). `doing` (`writing s3://.../x.json`) and `where` (the store's root) go into the error."""
    while True:
        started = outage.clock()
        try:
            result = call()
        except Exception as exc:
            if not is_outage(exc):
                raise
            failure = _one_line(exc)
            wait = outage.wait_s(failure, budget_s, started)
            if wait is None:
                raise _outage_error(outage, budget_s, doing, where, type(exc).__name__) from exc
            sleep(wait)
            continue
        outage.answered()
        return result


def _outage_error(
    outage: StoreOutage, budget_s: float, doing: str, where: str, failure: str
) -> StoreOutageError:
    """The run's one line: the store, its endpoint, how long it was waited for, and the fix."""
    waited = outage.down_s()
    return StoreOutageError(
        f"the artifact store {where} (endpoint {outage.endpoint}) did not answer for {waited:.0f} s while "
        f"{doing} ({failure}; storage.outage_budget_s={budget_s:g}). Check that the endpoint is up and "
        "reachable from this machine (AWS_ENDPOINT_URL, the network); --set storage.outage_budget_s=SECONDS "
        "waits longer",
        outage.endpoint,
        waited,
    )


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
