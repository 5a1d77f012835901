"""Kill a run with SIGKILL inside each stage, resume it, and check that nothing was lost or done twice.

`mappa train` runs in a child process (its own Ray, the session's Prefect server, a scripted
OpenAI-compatible coach on loopback) and its whole process tree is killed inside the score stage; each
`mappa resume` is then killed inside the next stage (update, rollout, advantages), and a last resume
finishes the run. Checked: the run completes; every stage finished exactly once and only the killed
stages started twice (the run's events); every update agent trained once per iteration; the coach
answered each chat at most once (a dropped, unanswered request may be asked again); every artifact reads
back; and the final weights equal those of the same run never interrupted (CPU, fixed seed).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
import torch
from mappa_process import MappaProcess, child_env
from openai_test_server import CoachServer
from safetensors.torch import load_file
from tiny_run import NO_RETRIES, scripted_coach, write_tiny_config

from mappa.storage.run import STAGE_OUTPUTS, Run, iteration_name

pytestmark = pytest.mark.slow

SEATS = ("solver", "executor", "verifier")
RUN_ID = "fault"
TIMEOUT_S = 600


def write_config(folder: Path, tiny_model: Path, coach_url: str) -> Path:
    return write_tiny_config(
        folder / "config.yaml",
        tiny_model,
        folder / "runs",
        name="fault",
        seed=3,
        iterations=2,
        # answers arrive one by one: a kill lands between two of them
        coach=scripted_coach(coach_url, max_concurrency=1),
        trainer={"lr": 1e-3},
        retries=NO_RETRIES,
        cluster={"num_cpus": 2, "torch_threads": 1},
    )


def final_weights(root: Path) -> dict[str, dict[str, torch.Tensor]]:
    run = Run.open(str(root), RUN_ID)
    return {
        seat: load_file(run.store.path(*run.checkpoint_parts(seat, 1), "model.safetensors")) for seat in SEATS
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_model, prefect_api_url):
    """The same run, never killed: its final weights are the reference."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    with CoachServer() as server:
        config = write_config(folder, tiny_model, server.base_url)
        process = MappaProcess(
            ["train", str(config), "--run-id", RUN_ID], child_env(prefect_api_url), folder / "log.txt"
        )
        assert process.wait(TIMEOUT_S) == 0, process.output()
    return final_weights(folder / "runs")


def kill_when(run_dir: Path, process: MappaProcess, iteration: int, stage: str, extra: str | None) -> None:
    """Watch the run's events; SIGKILL the run once `stage` started (and `extra` happened, if given)."""
    prefix = f"-{iteration_name(iteration)}-{stage}-"
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and process.process.poll() is None:
        names = [p.name for p in (run_dir / "events").glob("*.json")] if (run_dir / "events").exists() else []
        if any(prefix + "started" in n for n in names) and (
            extra is None or any(prefix + extra in n for n in names)
        ):
            process.kill()
            return
        time.sleep(0.02)


KILLS = (  # (stage, iteration, event that must have happened inside the stage before the kill), in run order
    ("score", 0, None),  # killed by the coach server itself, at its third request
    ("update", 0, "agent-finished"),  # one agent trained and checkpointed, the others not
    ("rollout", 1, None),  # fresh workers must roll out with iteration 0's checkpoints
    ("advantages", 1, None),
)


def test_killed_in_every_stage_and_resumed(tmp_path, tiny_model, prefect_api_url, uninterrupted):
    """One run, SIGKILLed inside each stage in turn (each `mappa resume` is killed in the next one), then
    resumed to the end."""
    env = child_env(prefect_api_url)
    root = tmp_path / "runs"
    with CoachServer() as server:
        config = write_config(tmp_path, tiny_model, server.base_url)
        args = ["train", str(config), "--run-id", RUN_ID]
        for attempt, (stage, iteration, extra) in enumerate(KILLS):
            process = MappaProcess(args, env, tmp_path / f"attempt-{attempt}.txt")
            if stage == "score":
                server.state.before_answer = lambda number, doomed=process: (
                    number < 3 or doomed.kill() or False
                )
                assert process.wait(TIMEOUT_S) != 0, "the run should have been killed in its score stage"
                server.state.before_answer = None
            else:
                kill_when(root / RUN_ID, process, iteration, stage, extra)
            kinds = Counter(
                (e["iteration"], e["stage"], e["kind"]) for e in Run.open(str(root), RUN_ID).events()
            )
            assert kinds[(iteration, stage, "started")] == 1, f"not killed inside {stage}: {sorted(kinds)}"
            assert kinds[(iteration, stage, "finished")] == 0, f"{stage} finished before the kill"
            args = ["resume", RUN_ID, "--root", str(root)]
        last = MappaProcess(args, env, tmp_path / "last.txt")
        assert last.wait(TIMEOUT_S) == 0, last.output()
        answered = server.state.answered

    run = Run.open(str(root), RUN_ID)
    killed = {(iteration, stage) for stage, iteration, _ in KILLS}
    kinds = Counter((e["iteration"], e["stage"], e["kind"]) for e in run.events())
    for it in (0, 1):
        for name in STAGE_OUTPUTS:
            assert kinds[(it, name, "finished")] == 1, (it, name, kinds)
            assert kinds[(it, name, "started")] == (2 if (it, name) in killed else 1), (it, name, kinds)
    agents_trained = Counter(
        (e["iteration"], e["agent"]) for e in run.events() if e["kind"] == "agent-finished"
    )
    assert agents_trained == Counter({(it, seat): 1 for it in (0, 1) for seat in SEATS})

    actions = sum(len(run.store.read_parquet(*run.output_parts(it, "rollout"))) for it in (0, 1))
    assert max(answered.values()) == 1, "the coach answered the same chat twice"
    assert sum(answered.values()) == actions

    for it in (0, 1):
        for name in STAGE_OUTPUTS:
            assert run.stage_complete(it, name)
        scores = run.store.read_parquet(*run.output_parts(it, "score"))
        assert (scores["parse_status"] == "ok").all()
        assert len(run.store.read_parquet(*run.output_parts(it, "advantages"))) == len(scores)

    resumed = final_weights(root)
    for seat in SEATS:
        for name, tensor in uninterrupted[seat].items():
            assert torch.equal(resumed[seat][name], tensor), (
                f"{seat}.{name} differs from the uninterrupted run"
            )
