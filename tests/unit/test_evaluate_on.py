"""`mappa evaluate RUN --eval-data FILE`: another problem file as its own evaluation set, checked before any
model loads, kept apart from the run's held-out evaluations (no model here: tests/integration runs one)."""

import json

import pytest

from mappa.cli import main
from mappa.config import load_config
from mappa.envs.mathchat import SPEC as MATHCHAT
from mappa.stages.evaluate import evaluation_summaries, results_frame, write_evaluation_manifest
from mappa.stages.evaluate_on import (
    check_evaluation_set,
    create_evaluation_set,
    set_config,
    set_name,
)
from mappa.storage.run import Run


@pytest.fixture
def run(tmp_path):
    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}/runs"])
    return Run.create(config, "r")


def problems_file(path, count):
    rows = [{"id": f"q{i}", "problem": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(count)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_a_set_is_named_by_its_file_and_keeps_its_problems(run, tmp_path):
    data = problems_file(tmp_path / "my-bench.jsonl", 5)
    assert set_name(data) == "my-bench" and set_name("builtin:heldout-level1") == "heldout-level1"
    stage = create_evaluation_set(run, data, problems=3)
    assert stage == "evaluate-on/my-bench"
    config = set_config(run, "my-bench")
    assert (config.env.eval_data, config.rollout.eval_problems) == (data, 3)
    assert config.agents == run.config.agents  # the run's agents, env and sampling: only the problems differ
    assert create_evaluation_set(run, data, problems=3) == stage  # the same again: accepted
    assert create_evaluation_set(run, data, problems=99, name="all") == "evaluate-on/all"
    assert set_config(run, "all").rollout.eval_problems == 5  # no more than the file holds


def test_a_name_used_for_other_problems_is_refused(run, tmp_path):
    create_evaluation_set(run, problems_file(tmp_path / "bench.jsonl", 4))
    (tmp_path / "other").mkdir()
    other = problems_file(tmp_path / "other" / "bench.jsonl", 4)
    with pytest.raises(
        ValueError, match=r"evaluation set bench of run r was made on .*bench.jsonl.*--as NAME"
    ):
        check_evaluation_set(run, other)
    assert check_evaluation_set(run, other, name="bench-2") == "bench-2"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--eval-data", "nowhere.jsonl"], "nowhere.jsonl: file not found"),
        (["--eval-data", "bench.jsonl", "--as", "a b"], "'a b' is not a usable evaluation name"),
        (["--eval-data", "bench.jsonl", "--eval-problems", "0"], "evaluate at least one problem"),
        (["--as", "x"], "--as and --eval-problems go with --eval-data FILE"),
    ],
)
def test_bad_evaluation_sets_are_refused_before_any_work(run, tmp_path, monkeypatch, capsys, extra, message):
    monkeypatch.chdir(tmp_path)
    problems_file(tmp_path / "bench.jsonl", 2)
    root = str(tmp_path / "runs")
    assert main(["evaluate", "r", "--root", root, "--iteration", "-1", *extra]) == 2
    assert message in capsys.readouterr().out
    assert not (tmp_path / "runs" / "r" / "evaluate-on").exists()  # nothing stored


def test_inspect_shows_each_problem_set_apart(run, tmp_path, trajectory, capsys):
    stage = create_evaluation_set(run, problems_file(tmp_path / "bench.jsonl", 1))
    right = results_frame([trajectory], MATHCHAT)
    for iteration, results, where in ((-1, right, "evaluate"), (2, right.assign(correct=False), stage)):
        run.store.write_parquet(results, *run.parts(iteration, where, "results.parquet"))
        config = set_config(run, "bench") if where == stage else None
        write_evaluation_manifest(run, iteration, results, {"total_s": 1.0}, stage=where, config=config)
    assert [row["evaluation"] for row in evaluation_summaries(run)] == ["base"]
    assert [row["evaluation"] for row in evaluation_summaries(run, stage)] == ["iter-0002"]
    assert main(["inspect", "r", "--root", str(tmp_path / "runs"), "--evaluations"]) == 0
    printed = capsys.readouterr().out
    assert "run r: held-out evaluations" in printed and "run r: bench evaluations" in printed
    assert "success base ->" not in printed  # one evaluation in each set: no change across sets
