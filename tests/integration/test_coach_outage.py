"""A coach endpoint that goes away mid-run, through the CLI: the scripted OpenAI-compatible server is stopped
(its port closed: connections refused) inside a score stage.

One two-iteration run (in this process: the session's Ray and Prefect server, so the test costs one run's
work and no start-ups) with `coach.outage_budget_s: 10`:
- iteration 0: the server stops at the stage's third request and comes back on the same port 3 s later;
  the stage waits (one log line per wait, in the run's log file), finishes without a Prefect retry, and
  the coach was asked nothing twice that it had answered;
- iteration 1: the server stops at the stage's second request and stays down: past the budget `mappa train`
  ends with exit code 1 and one line naming the stage, the endpoint, the wait and `mappa resume` (Prefect's
  score retries do not wait the budget again), and the answers that arrived are in the run's coach cache;
- the server restarts and `mappa resume` finishes the run: every manifest written before it is unchanged
  byte for byte, the coach answered each chat at most once, and no worker of the run is left in Ray.

Not covered: a hosted endpoint's rate limits (`max_retries`, tests/unit/test_coach_openai.py) and the
schedule's arithmetic (tests/unit/test_coach_outage_clock.py).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from openai_test_server import CoachServer
from tiny_run import scripted_coach, write_tiny_config

from mappa.cli import main
from mappa.storage.run import Run, iteration_name

pytestmark = pytest.mark.slow

BUDGET_S = 10
COMES_BACK_AFTER_S = 3
RUN_ID = "outage-run"


def manifests(run_folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(run_folder)): p.read_bytes() for p in sorted(run_folder.rglob("_manifest.json"))
    }


def run_workers(run_id: str) -> list[str]:
    """The run's named Ray actors still alive, after giving `ray.kill` a few seconds."""
    import ray

    deadline = time.monotonic() + 15
    while True:
        left = [name for name in ray.util.list_named_actors() if f"mappa-{run_id}-" in name]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


class Outages:
    """The server's `before_answer` hook: stops the server inside iteration 0's score stage (back after
    COMES_BACK_AFTER_S) and inside iteration 1's (for good), and notes what was answered before each stop."""

    def __init__(self, server: CoachServer, root: Path) -> None:
        self.server, self.root = server, root
        self.requests = Counter()  # score stage's iteration -> requests it sent
        self.answered_before: dict[int, dict[str, int]] = {}  # chat -> its requests, at the stop
        self.stopped_at: dict[int, float] = {}

    def __call__(self, number: int) -> bool:
        kinds = {(e["iteration"], e["stage"], e["kind"]) for e in Run.open(str(self.root), RUN_ID).events()}
        iteration = 1 if (1, "score", "started") in kinds else 0
        self.requests[iteration] += 1
        if self.requests[iteration] != (3 if iteration == 0 else 2) or iteration in self.stopped_at:
            return True
        state = self.server.state
        self.answered_before[iteration] = {chat: state.received[chat] for chat in state.answered}
        self.stopped_at[iteration] = time.monotonic()
        self.server.stop()  # this request gets its answer (HTTP 503); new connections are refused
        if iteration == 0:
            threading.Timer(COMES_BACK_AFTER_S, self.server.restart).start()
        return False


def test_a_coach_outage_is_waited_out_or_stops_the_run_in_one_line_and_resumes(
    tmp_path, tiny_model, prefect_api_url, ray_local, capfd
):
    root = tmp_path / "runs"
    with CoachServer() as server:
        path = write_tiny_config(
            tmp_path / "config.yaml",
            tiny_model,
            root,
            name="outage",
            iterations=2,
            coach=scripted_coach(server.base_url, max_concurrency=1, outage_budget_s=BUDGET_S),
            retries={"score": 2, "delay_s": 0.1},  # not used up by an outage past its budget
            trainer={"lr": 1e-3},
        )
        outages = Outages(server, root)
        server.state.before_answer = outages
        started = time.monotonic()
        assert main(["train", str(path), "--run-id", RUN_ID]) == 1
        stopped_after = time.monotonic() - outages.stopped_at[1]
        printed = capfd.readouterr()
        printed = printed.out + printed.err
        print(
            f"train: {time.monotonic() - started:.1f} s, stopped {stopped_after:.1f} s after the outage began"
        )
        assert "Traceback" not in printed, printed[-3000:]
        error = next(line for line in printed.splitlines() if line.startswith("error:"))
        print(error)
        assert error.startswith(
            f"error: run {RUN_ID} stopped in score (iteration 1): coach endpoint {server.base_url} did not "
            "answer for "
        ), error
        assert f"coach.outage_budget_s={BUDGET_S}" in error and error.endswith(
            f"mappa resume {RUN_ID} --root {root}"
        )
        assert BUDGET_S <= stopped_after < BUDGET_S + 15, stopped_after  # one budget, not one per retry

        run = Run.open(str(root), RUN_ID)
        kinds = Counter((e["iteration"], e["stage"], e["kind"]) for e in run.events())
        assert kinds[(0, "score", "started")] == kinds[(0, "score", "finished")] == 1, kinds  # waited it out
        assert kinds[(1, "score", "started")] == kinds[(1, "score", "failed")] == 1, kinds  # no Prefect retry
        (log,) = (root / RUN_ID / "logs").glob("train-*.log")
        text = log.read_text()
        assert f"coach endpoint {server.base_url} does not answer" in text
        assert f"coach endpoint {server.base_url} answers again after" in text
        cached = list((root / RUN_ID / "coach-cache").rglob("*.json"))
        assert len(cached) == sum(server.state.answered.values()), "an answer that arrived was not kept"
        assert max(server.state.answered.values()) == 1
        for before in outages.answered_before.values():  # answered before a stop: never asked again
            assert all(server.state.received[chat] == count for chat, count in before.items())
        assert run_workers(RUN_ID) == []

        kept = manifests(root / RUN_ID)
        assert (
            f"{iteration_name(0)}/update/_manifest.json" in kept
            and f"{iteration_name(1)}/rollout/_manifest.json" in kept
        )
        server.restart()
        assert main(["resume", RUN_ID, "--root", str(root)]) == 0, capfd.readouterr()
        answered, received = server.state.answered, server.state.received

    after = manifests(root / RUN_ID)
    assert {name: after[name] for name in kept} == kept, "a finished stage was written again"
    assert f"{iteration_name(1)}/update/_manifest.json" in after
    assert max(answered.values()) == 1, "the coach answered a chat twice"
    assert all(
        received[chat] == n for before in outages.answered_before.values() for chat, n in before.items()
    )
    cached = list((root / RUN_ID / "coach-cache").rglob("*.json"))
    assert len(cached) == sum(answered.values())
    manifest = Run.open(str(root), RUN_ID).read_manifest(1, "score")
    assert manifest["coach_cache"]["hits"] == 1  # the stage's first answer, before the server stopped
    assert run_workers(RUN_ID) == []
