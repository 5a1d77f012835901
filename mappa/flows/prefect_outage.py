"""A run that outlives its Prefect server: the train flow waits through an outage of the Prefect API instead
of dying at the next stage boundary.

What needs the API while a run goes on (Prefect 3.7, measured with a real server stopped mid-run:
tests/integration/test_prefect_outage.py):
- each stage task's start: the task engine asks for the concurrency slots of the task's tags with a fresh
  client, which does not retry a refused connection (`ConcurrencySlotAcquisitionError` at once);
- each iteration's subflow run and every flow-run state change: the flow's client retries a refused
  connection 5 times with doubling waits (about a minute), then raises;
- the Prefect artifacts of the report stage and of the evaluation table; a remote root's result-storage block.
Task-run states and logs travel through Prefect's event and log workers, which print errors and drop what
they cannot send: they never stop a run.

So the flow asks the API before each of those steps and, while it does not answer, waits (doubling polls,
at most 15 s apart), up to `retries.prefect_outage_s` per outage; a step that fails while the API is down,
or with a connection error of Prefect's own client, is done again once it is back (a finished stage skips
itself). A stage that ended while the API was away has its final state set again once it is back (its
event was dropped: the UI would show it running for ever), and an iteration subflow run whose own final
report met the outage is marked Crashed before the iteration runs again (`crash_abandoned_subflows`).
Past the budget `PrefectUnreachable` names the API's URL, the step and the wait; the CLI prints it as the
run's one line, with the resume command.

Not covered: an outage while the flow run starts (the command fails at once, before any work) or while it
reports its final state (the run's work is done; `mappa resume` finds every stage finished).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

T = TypeVar("T")

UNAVAILABLE = frozenset({502, 503, 504})
MAX_POLL_S = 15.0
SLOT_ERRORS = frozenset({"ConcurrencySlotAcquisitionError", "AcquireConcurrencySlotTimeoutError"})
MAX_RESUBMITS = 20  # a server that keeps flapping still ends the run, not the budget times this


class PrefectUnreachable(RuntimeError):
    """The Prefect API did not answer within the outage budget."""

    def __init__(self, url: str, where: str, waited_s: float) -> None:
        super().__init__(
            f"the Prefect API at {url} did not answer for {waited_s:.0f} s while the run waited to start "
            f"{where} (retries.prefect_outage_s; raise it for longer outages, or check the server and "
            f"PREFECT_API_URL)"
        )
        self.url, self.where, self.waited_s = url, where, waited_s


def api_url() -> str | None:
    """The API the flow reports to: PREFECT_API_URL, else Prefect's temporary server when one runs."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if url:
        return str(url).rstrip("/")
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    return server.api_url.rstrip("/") if server.running else None


def api_answers(url: str, timeout_s: float = 5.0) -> bool:
    """True when `url/health` answers at all (an authentication error counts: the server is there)."""
    try:
        return httpx.get(f"{url}/health", timeout=timeout_s).status_code not in UNAVAILABLE
    except httpx.HTTPError:
        return False


def from_prefect_client(exc: BaseException, url: str) -> bool:
    """True when `exc` or an exception in its chain is a connection failure of Prefect's client: a request
    to the API that failed, or a concurrency-slot request (which Prefect wraps in its own error)."""
    for current in _chain(exc):
        if type(current).__name__ in SLOT_ERRORS:
            return True
        if isinstance(current, httpx.HTTPError) and _request_url(current).startswith(url):
            return isinstance(current, httpx.TransportError) or _unavailable(current)
    return False


class Outage:
    """Waits for the API, up to `budget_s` per outage; `say` gets one line when a wait starts and one when
    it ends. `probe`, `clock` and `sleep` are the real ones outside tests."""

    def __init__(
        self,
        budget_s: float,
        say: Callable[[str], None],
        url: str | None = None,
        probe: Callable[[str], bool] = api_answers,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.budget_s, self.say, self.probe, self.clock, self.sleep = budget_s, say, probe, clock, sleep
        self.url = url if url is not None else api_url()
        self.unreported: list[Any] = []
        """Final task states that ended while the API was away (their events were dropped)."""

    def settle(self, state: Any) -> None:
        """Note a task's final state: when the API does not answer now, the event that carried it was
        dropped, and the state is set again through the API once it is back (else the UI shows the task
        running for ever)."""
        if self.url is not None and not self.probe(self.url):
            self.unreported.append(state)

    def wait(self, where: str) -> float:
        """Return at once when the API answers; else poll until it does (the seconds waited) or raise
        `PrefectUnreachable` once the budget is spent."""
        if self.url is None or self.probe(self.url):
            return 0.0
        started = self.clock()
        self.say(
            f"the Prefect API at {self.url} does not answer; the run waits before {where} "
            f"(up to {self.budget_s:.0f} s, retries.prefect_outage_s)"
        )
        poll = 1.0
        while True:
            waited = self.clock() - started
            if waited >= self.budget_s:
                raise PrefectUnreachable(self.url, where, waited)
            self.sleep(min(poll, self.budget_s - waited))
            poll = min(poll * 2, MAX_POLL_S)
            if self.probe(self.url):
                waited = self.clock() - started
                self.say(f"the Prefect API at {self.url} is back after {waited:.0f} s; {where} goes on")
                self.report_unreported()
                return waited

    def report_unreported(self) -> None:
        """Set the noted task states through the API (forced: the server last heard them running)."""
        from prefect.client.orchestration import get_client

        states, self.unreported = self.unreported, []
        if not states:
            return
        try:
            with get_client(sync_client=True) as client:
                for state in states:
                    client.set_task_run_state(state.state_details.task_run_id, state, force=True)
        except Exception as exc:  # noqa: BLE001 - the UI's view, not the run's work
            self.say(f"could not report {len(states)} task state(s) to the Prefect API ({_short(exc)})")

    def outlast(self, step: Callable[[], T], where: str, abandoned: Callable[[], object] | None = None) -> T:
        """`step()`, done again after the API is back whenever it fails during an outage (the API does not
        answer, or Prefect's client lost its connection); any other failure, and a spent budget, is raised
        as it is. `abandoned`, if given, runs once the API is back after such a failure, before the step
        is done again (to close what the failed attempt left open on the server)."""
        failed = False
        for attempt in range(MAX_RESUBMITS + 1):
            self.wait(where)
            if failed and abandoned is not None:
                try:
                    abandoned()
                except Exception as exc:  # noqa: BLE001 - the UI's view, not the run's work
                    self.say(f"could not close the abandoned attempt at {where} ({_short(exc)})")
            try:
                return step()
            except Exception as exc:
                if attempt == MAX_RESUBMITS or not self.is_outage(exc):
                    raise
                failed = True
                self.say(f"{where} stopped while the Prefect API was unreachable ({_short(exc)}); again")
        raise AssertionError("unreachable")  # the loop returns or raises

    def is_outage(self, exc: BaseException) -> bool:
        """A failure to wait out: Prefect's client lost the API, or the API does not answer now. A spent
        budget (`PrefectUnreachable`, from a step that waited itself) is not waited for twice."""
        if self.url is None or any(isinstance(e, PrefectUnreachable) for e in _chain(exc)):
            return False
        return from_prefect_client(exc, self.url) or not self.probe(self.url)


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and its causes and contexts, each once."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _request_url(exc: httpx.HTTPError) -> str:
    try:
        return str(exc.request.url)
    except RuntimeError:  # an error raised without its request
        return ""


def _unavailable(exc: httpx.HTTPError) -> bool:
    response = getattr(exc, "response", None)
    return response is not None and response.status_code in UNAVAILABLE


def _short(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:160]}" if lines else type(exc).__name__


def outage_message(exc: BaseException) -> str | None:
    """What stopped a run that a Prefect outage stopped, in the user's words: the spent budget's message, or
    the API that stopped answering (rather than the name of the internal error that met it); None for any
    other failure."""
    chain = _chain(exc)
    for error in chain:
        if isinstance(error, PrefectUnreachable):
            return str(error)
    try:
        url = api_url()
    except Exception:  # noqa: BLE001 - the run's own error is printed then
        return None
    if url is None:
        return None
    from_prefect = from_prefect_client(exc, url) or any(
        type(e).__module__.startswith("prefect") for e in chain
    )
    if from_prefect and not api_answers(url):
        return f"the Prefect API at {url} stopped answering ({_short(exc)})"
    return None


def crash_abandoned_subflows(parent_flow_run_id: str, name: str) -> int:
    """Mark Crashed the subflow runs called `name` of flow run `parent_flow_run_id` that the server still
    shows running: an attempt whose final state could not reach the API during an outage, run again in a
    new subflow run (else the UI shows it running for ever). Returns how many."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        FlowRunFilterParentFlowRunId,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    wanted = FlowRunFilter(
        parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[parent_flow_run_id]),
        name=FlowRunFilterName(any_=[name]),
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING])),
    )
    message = "its final state could not reach the Prefect API during an outage; the run did it again"
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=wanted)
        for run in runs:
            client.set_flow_run_state(run.id, Crashed(message=message), force=True)
    return len(runs)
