"""The Prefect-outage guard on a fake clock and a scripted API: waits while the API does not answer, up to the
budget per outage; steps that fail during an outage are done again; other failures pass through."""

from __future__ import annotations

import httpx
import pytest

from mappa.flows.prefect_outage import Outage, PrefectUnreachable, from_prefect_client

URL = "http://127.0.0.1:4200/api"


class FakeApi:
    """An API that answers except during [down_from, back_at) on the fake clock."""

    def __init__(self, down_from: float = 0.0, back_at: float = 0.0) -> None:
        self.now, self.down_from, self.back_at, self.slept = 0.0, down_from, back_at, []

    def answers(self, url: str) -> bool:
        assert url == URL
        return not (self.down_from <= self.now < self.back_at)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def outage(self, budget_s: float, said: list[str]) -> Outage:
        return Outage(
            budget_s, said.append, URL, probe=self.answers, clock=lambda: self.now, sleep=self.sleep
        )


def test_an_answering_api_costs_no_wait_and_no_line():
    api, said = FakeApi(), []
    assert api.outage(60, said).wait("rollout of iteration 0") == 0.0
    assert said == [] and api.slept == []


def test_an_outage_shorter_than_the_budget_is_waited_through_with_capped_polls():
    api, said = FakeApi(down_from=0, back_at=150), []
    waited = api.outage(900, said).wait("score of iteration 1")
    assert 150 <= waited <= 165  # found back within one poll
    assert max(api.slept) == 15 and api.slept[:4] == [1, 2, 4, 8]
    assert said[0].startswith(
        f"the Prefect API at {URL} does not answer; the run waits before score of iteration 1"
    )
    assert said[1].startswith(f"the Prefect API at {URL} is back after 15")
    assert len(said) == 2  # one line when the wait starts, one when it ends


def test_past_the_budget_the_error_names_the_url_the_step_and_the_setting():
    api, said = FakeApi(down_from=0, back_at=10_000), []
    with pytest.raises(PrefectUnreachable) as raised:
        api.outage(120, said).wait("update of iteration 2")
    message = str(raised.value)
    assert URL in message and "update of iteration 2" in message and "retries.prefect_outage_s" in message
    assert "120 s" in message and api.now == 120  # the budget, not a poll beyond it


def test_a_step_that_fails_during_an_outage_is_done_again_once_the_api_is_back():
    api, said = FakeApi(), []
    calls = []

    def step():
        calls.append(api.now)
        if len(calls) == 1:  # the API goes away while the step runs
            api.down_from, api.back_at = api.now, api.now + 40
            raise RuntimeError("Unable to acquire concurrency slots")
        return "manifest"

    assert api.outage(300, said).outlast(step, "rollout of iteration 0") == "manifest"
    assert len(calls) == 2 and calls[1] >= 40
    assert any(
        "rollout of iteration 0 stopped while the Prefect API was unreachable" in line for line in said
    )


def test_a_stage_error_while_the_api_answers_is_raised_as_it_is():
    api, said = FakeApi(), []

    def step():
        raise ValueError("the coach answered nonsense")

    with pytest.raises(ValueError, match="nonsense"):
        api.outage(300, said).outlast(step, "score of iteration 0")
    assert said == []


def test_a_spent_budget_inside_a_step_is_not_waited_for_twice():
    api, said = FakeApi(down_from=0, back_at=10_000), []
    outage = api.outage(60, said)
    outage.wait = lambda where: 0.0  # the API was there when the step began

    def step():
        raise RuntimeError("iteration failed") from PrefectUnreachable(URL, "update of iteration 0", 60)

    with pytest.raises(RuntimeError):
        outage.outlast(step, "iteration 0")


def test_connection_errors_of_prefects_client_are_told_from_other_endpoints():
    def failed(url: str) -> Exception:
        try:
            raise httpx.ConnectError("All connection attempts failed", request=httpx.Request("POST", url))
        except httpx.ConnectError as cause:
            try:
                raise RuntimeError("a stage failed") from cause
            except RuntimeError as wrapped:
                return wrapped

    assert from_prefect_client(failed(f"{URL}/flow_runs/"), URL)
    assert not from_prefect_client(failed("http://127.0.0.1:8000/v1/chat/completions"), URL)  # the coach's
    unavailable = httpx.HTTPStatusError(
        "503", request=httpx.Request("GET", f"{URL}/x"), response=httpx.Response(503)
    )
    assert from_prefect_client(unavailable, URL)
    not_found = httpx.HTTPStatusError(
        "404", request=httpx.Request("GET", f"{URL}/x"), response=httpx.Response(404)
    )
    assert not from_prefect_client(not_found, URL)


def test_what_a_failed_attempt_left_open_is_closed_once_the_api_is_back_before_the_step_runs_again():
    api, said, events = FakeApi(), [], []

    def step():
        events.append(("step", api.answers(URL)))
        if len(events) == 1:  # the attempt's final report meets the outage
            api.down_from, api.back_at = api.now, api.now + 30
            raise RuntimeError("All connection attempts failed")
        return "done"

    outcome = api.outage(300, said).outlast(
        step, "iteration 0", lambda: events.append(("closed", api.answers(URL)))
    )
    assert outcome == "done"
    assert events == [("step", True), ("closed", True), ("step", True)]
