"""A seven-iteration run under checkpoint retention, and what pruning means for the commands that read a run.

The run (tiny model, rubric coach, local disk, in this process) keeps 2 full states per agent and the
weights of every 3rd iteration. Checked: the checkpoints' bytes after iteration 2 and after iteration 7
differ by less than one state of the run (the kept weights of iteration 2); each retention pass recorded
what it deleted in its manifest, the run's ledger and the events; `mappa evaluate` takes a kept weights-only
iteration and refuses a deleted one in one line; `mappa inspect` and `mappa rescore` on a pruned iteration
say what became of its checkpoints and still work; a resume that would recompute a pruned iteration stops
in one line; the report's history file holds every iteration once; a full disk stops an update before it
writes.
The SIGKILL between writing a new state and deleting the old one is in test_fault_injection.py.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from tiny_run import MATHCHAT_SEATS, write_tiny_config

from mappa.stages import output_parts, stage_complete
from mappa.storage.checkpoints import checkpoint_holds, read_ledger
from mappa.storage.history import run_history
from mappa.storage.run import Run, iteration_name

pytestmark = pytest.mark.slow
ITERATIONS = 7


@pytest.fixture(scope="module")
def long_run(tmp_path_factory, tiny_model, prefect_harness, ray_local):
    from mappa.flows.train import train

    root = tmp_path_factory.mktemp("long")
    path = write_tiny_config(
        root / "config.yaml",
        tiny_model,
        root,
        name="long",
        iterations=ITERATIONS,
        env={"type": "mathchat", "max_executor_turns": 1},
        rollout={"problems_per_iteration": 1, "max_new_tokens": 8, "eval_problems": 1},
        trainer={"lr": 1e-3},
        checkpoint={"keep_last": 2, "keep_weights_every": 3},
    )
    train(config_path=str(path), run_id="long")
    return Run.open(str(root), "long")


def test_checkpoint_bytes_stay_bounded_and_every_deletion_is_recorded(long_run):
    run = long_run
    passes = [run.read_manifest(i, "retention") for i in range(ITERATIONS)]
    state = sum(run.store.size(*run.checkpoint_parts(seat, ITERATIONS - 1)) for seat in MATHCHAT_SEATS)
    after_2, after_7 = passes[1]["checkpoint_bytes"], passes[-1]["checkpoint_bytes"]  # 2 full states each
    assert 0 <= after_7 - after_2 < state, (after_2, after_7, state)  # the kept weights of iteration 2
    for seat in MATHCHAT_SEATS:
        holds = {i: checkpoint_holds(run, seat, i) for i in range(ITERATIONS)}
        assert holds == {i: {2: "weights", 5: "full", 6: "full"}.get(i) for i in range(ITERATIONS)}, holds
        assert passes[-1]["kept"][seat] == {"full": [5, 6], "weights": [2]}
        ledger = read_ledger(run)[seat]
        assert sorted(ledger) == [f"iter-{i:04d}" for i in range(5)]
        assert (
            ledger["iter-0002"]["holds"] == "weights" and ledger["iter-0002"]["by"] == "iter-0004/retention"
        )
        assert ledger["iter-0001"]["holds"] is None and ledger["iter-0001"]["bytes_freed"] > 0
    events = [e for e in run.events() if e["stage"] == "retention" and e["kind"].startswith("checkpoint-")]
    assert len(events) == 3 * 5 and sum(e["kind"] == "checkpoint-stripped" for e in events) == 3
    assert sum(p["freed_bytes"] for p in passes) == sum(e["bytes_freed"] for e in events)
    history = run_history(run)  # one file, one row per iteration and agent
    assert history.groupby("iteration").size().tolist() == [3] * ITERATIONS


def test_pruned_iterations_are_named_by_every_reader(long_run, capsys, monkeypatch):
    from mappa import cli

    run, root = long_run, long_run.config.storage.root
    monkeypatch.setattr(cli.console, "width", 400)
    assert cli.main(["evaluate", "long", "--root", root, "--iteration", "2"]) == 0  # weights alone suffice
    assert run.read_manifest(2, "evaluate")["problems"] == 1
    capsys.readouterr()
    assert cli.main(["evaluate", "long", "--root", root, "--iteration", "1"]) == 2
    refused = capsys.readouterr().out.strip()
    assert refused.count("\n") == 0, refused
    wanted = r"evaluating iteration 1 needs the weights of agent \w+ at iteration 1, but checkpoint "
    wanted += r"retention deleted it at \S+ \(iter-0003/retention; checkpoint.keep_last=2"
    assert re.search(wanted, refused), refused
    assert "The run keeps full states of iterations [5, 6]; weights of [2]" in refused
    assert cli.main(["inspect", "long", "--root", root, "--iteration", "1"]) == 0
    inspected = capsys.readouterr().out
    assert "checkpoints of iteration 1: checkpoint retention deleted it at" in inspected
    assert "rollout, scores and experiences are kept" in inspected and "iteration 1: agents" in inspected
    rescore = ["rescore", "long", "--root", root, "--as", "outcome", "--iteration", "1"]
    assert cli.main([*rescore, "--set", "coach.type=outcome"]) == 0
    assert "re-scoring reads the rollout only" in capsys.readouterr().out
    assert run.store.exists(*run.parts(1, "rescore/outcome", "scores.parquet"))


def test_a_resume_that_needs_a_pruned_state_stops_in_one_line(long_run, capsys):
    from mappa import cli

    run, root = long_run, long_run.config.storage.root
    folder = Path(run.store.path(run.run_id, "iter-0003", "advantages"))
    folder.rename(folder.with_name("advantages.kept"))  # as if iteration 3's advantages had to be redone
    try:
        assert cli.main(["resume", "long", "--root", root]) == 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        folder.with_name("advantages.kept").rename(folder)
    printed = capsys.readouterr().out
    line = [text for text in printed.splitlines() if text.startswith("error:")]
    assert len(line) == 1 and "stopped in advantages (iteration 3)" in line[0], printed[-2000:]
    assert "needs the full state (weights and optimizer) of agent" in line[0]
    assert "stripped it to its weights" in line[0] and "cannot be recomputed" in line[0]
    assert run.store.exists(*output_parts(run, ITERATIONS - 1, "update"))  # nothing of the run was lost


def test_a_disk_that_fills_up_fails_the_update_before_it_writes(long_run, monkeypatch):
    """Iteration 6's update done again (its output and checkpoints moved aside; no flow, no rollout: its
    inputs are kept): the disk is full, so the stage stops before any worker loads a model, nothing of a
    checkpoint is written, the finished stages stay (the CLI's one line for a failed stage:
    test_stage_retry.py)."""
    import ray

    from mappa import resources
    from mappa.stages import execute

    run, last = long_run, ITERATIONS - 1
    kept = [Path(run.store.path(*run.checkpoint_parts(seat, last))) for seat in MATHCHAT_SEATS]
    kept.append(Path(run.store.path(run.run_id, iteration_name(last), "update")))
    for folder in kept:
        folder.rename(folder.with_name(folder.name + ".kept"))
    monkeypatch.setattr(resources, "free_disk_bytes", lambda root: 0.01e9)
    try:
        with pytest.raises(resources.ResourceError, match="has 0.01 GB free, too little to write agent"):
            execute(run, last, "update")
        assert not [name for name in ray.util.list_named_actors() if name.startswith("mappa-long-")]
        assert not any(run.store.exists(*run.checkpoint_parts(seat, last)) for seat in MATHCHAT_SEATS)
        assert all(stage_complete(run, last, stage) for stage in ("rollout", "score", "advantages"))
    finally:
        for folder in kept:
            shutil.rmtree(folder, ignore_errors=True)
            folder.with_name(folder.name + ".kept").rename(folder)
    updates = [e["kind"] for e in run.events() if e["stage"] == "update" and e["iteration"] == last]
    assert updates[-2:] == ["started", "failed"], updates
    assert stage_complete(run, last, "update")  # moved back: nothing of the run was lost
