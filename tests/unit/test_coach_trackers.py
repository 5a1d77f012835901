"""The coach's figures in the score manifest, the iteration report and the trackers: verdicts per agent and
parse status, unscored actions per agent, the criteria coach's mean P(Yes) per question, and a small table
of sampled actions (TensorBoard text, W&B table, MLflow table artifact; a failing tracker only warns)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from mappa.coach.diagnostics import verdict_counts
from mappa.config import load_config
from mappa.core.types import ActionScore
from mappa.reporting import trackers as trackers_module
from mappa.reporting.tracker_sinks import MlflowSink, WandbSink, markdown_table
from mappa.reporting.trackers import coach_metrics, criterion_names, log_table, sample_actions
from mappa.stages import output_parts, write_manifest
from mappa.stages.report import _summary_lines
from mappa.storage.frames import scores_to_frame, trajectories_to_frame
from mappa.storage.run import Run

Q1, Q2 = "Does the agent's output end with a number?", "Is the number correct?"


def test_verdicts_are_counted_per_agent_and_criteria_averaged_per_question():
    scores = [
        ActionScore("t/0", "t", "solver", 7.5, "", "m", criteria={Q1: 0.5, Q2: 1.0}),
        ActionScore("t/1", "t", "solver", 2.5, "", "m", criteria={Q1: 0.25, Q2: 0.25}),
        ActionScore("t/2", "t", "verifier", 5.0, "", "m", "fallback"),
        ActionScore("t/3", "t", "verifier", 0.0, "", "m", "rule"),
    ]
    counts = verdict_counts(scores)
    assert counts["parse_status"] == {"ok": 2, "fallback": 1, "rule": 1}
    assert counts["parse_status_by_agent"] == {"solver": {"ok": 2}, "verifier": {"fallback": 1, "rule": 1}}
    assert counts["criteria_means"] == {"solver": {Q1: 0.375, Q2: 0.625}}
    assert verdict_counts(scores[2:])["criteria_means"] is None


def test_criterion_names_are_short_and_distinct():
    names = criterion_names([Q1, Q2, "Is the number correct? (again)"])
    assert names == {
        Q1: "does_the_agents_output_end_with",
        Q2: "is_the_number_correct",
        "Is the number correct? (again)": "is_the_number_correct_again",
    }
    assert criterion_names(["Is it A?", "Is it A!"]) == {"Is it A?": "is_it_a", "Is it A!": "is_it_a_2"}


@pytest.fixture
def scored(synthetic_run):
    """The synthetic run's iteration 1 with a criteria coach's manifest and two unscored solver actions."""
    run = synthetic_run
    by_agent = {"solver": {"ok": 1, "fallback": 1}, "verifier": {"rule": 1}}
    write_manifest(
        run,
        1,
        "score",
        6,
        {"total_s": 2.0},
        coach_model="m:criteria",
        parse_status={"ok": 4, "fallback": 1, "rule": 1},
        parse_status_by_agent=by_agent,
        criteria_means={"solver": {Q1: 0.25, Q2: 0.75}},
    )
    write_manifest(run, 1, "advantages", 6, {"total_s": 3.0}, unscored={"solver": 2, "executor": 0})
    return run


def test_scalars_hold_unscored_actions_and_criteria_means(scored):
    scalars = coach_metrics(scored, 1)
    assert scalars["coach/unscored/solver"] == 2.0 and scalars["coach/unscored/executor"] == 0.0
    assert scalars["coach/criterion/solver/does_the_agents_output_end_with"] == 0.25
    assert scalars["coach/criterion/solver/is_the_number_correct"] == 0.75
    assert scalars["coach/parse/rule"] == 1.0
    assert coach_metrics(scored, 0)["coach/parse/fallback"] == 1.0  # a run from before: no new figures
    assert not any(
        name.startswith(("coach/unscored", "coach/criterion")) for name in coach_metrics(scored, 0)
    )


def test_the_report_names_unscored_and_ruled_actions(scored):
    lines = _summary_lines(scored, 1)
    assert "- unscored actions, no advantage (coach gave no parsable score): executor 0, solver 2" in lines
    assert "- scored by rule, no usable output (blank or only reasoning): verifier 1" in lines
    assert not any("unscored" in line for line in _summary_lines(scored, 0))


@pytest.fixture
def rolled_out(tmp_path, trajectory):
    """A run with one rolled-out, scored iteration (the `trajectory` fixture's 4 actions)."""
    config = load_config(
        "configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}", "trackers.tensorboard=true"]
    )
    run = Run.create(config, "r")
    run.store.write_parquet(trajectories_to_frame([trajectory], 0), *output_parts(run, 0, "rollout"))
    scores = [
        ActionScore(a.id, "t1", a.agent, float(i), "because " * 100, "m", "ok" if i else "fallback")
        for i, a in enumerate(trajectory.actions)
    ]
    run.store.write_parquet(scores_to_frame(scores), *output_parts(run, 0, "score"))
    return run


def test_sampled_actions_are_few_seeded_and_trimmed(rolled_out):
    rows = sample_actions(rolled_out, 0, rows=3, chars=40)
    assert len(rows) == 3 and rows == sample_actions(rolled_out, 0, rows=3, chars=40)
    assert list(rows[0]) == ["action_id", "agent", "score", "parse_status", "rationale", "response"]
    assert all(len(row["rationale"]) == 40 and row["rationale"].endswith("...") for row in rows)
    by_id = {row["action_id"]: row for row in sample_actions(rolled_out, 0)}
    assert len(by_id) == 4 and by_id["t1/1"]["response"] == "```python\nprint(4)\n```"
    assert by_id["t1/0"]["parse_status"] == "fallback"


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.tables: list[tuple] = []
        self.fail = fail

    def log_table(self, step, name, rows):
        if self.fail:
            raise RuntimeError("tracker went away")
        self.tables.append((step, name, rows))


def test_tables_reach_every_tracker_and_a_failing_one_only_warns(rolled_out, monkeypatch, caplog):
    good, bad = Recorder(), Recorder(fail=True)
    monkeypatch.setattr(trackers_module, "open_trackers", lambda run: [bad, good])
    rows = sample_actions(rolled_out, 0)
    with caplog.at_level(logging.WARNING):
        log_table(rolled_out, 0, "coach/samples", rows)
    assert good.tables == [(0, "coach/samples", rows)] and "tracker went away" in caplog.text
    folder = rolled_out.store.path(rolled_out.run_id, "tensorboard")
    events = EventAccumulator(folder, size_guidance={"tensors": 0}).Reload()
    (tag,) = [t for t in events.Tags()["tensors"] if t.startswith("coach/samples")]
    (event,) = events.Tensors(tag)
    text = event.tensor_proto.string_val[0].decode()
    assert event.step == 0 and text.startswith("| action_id | agent | score |") and "print(4)" in text


def test_wandb_and_mlflow_sinks_log_tables():
    import wandb

    logged = []
    sink = WandbSink.__new__(WandbSink)
    sink.run = SimpleNamespace(log=logged.append)
    rows = [{"agent": "solver", "score": 3.0, "response": "a | b"}, {"agent": "verifier", "score": 0.0}]
    sink.log_table(2, "coach/samples", rows)
    (entry,) = logged
    assert entry["iteration"] == 2 and isinstance(entry["coach/samples"], wandb.Table)
    assert entry["coach/samples"].columns == ["agent", "score", "response"]
    assert entry["coach/samples"].data[1] == ["verifier", 0.0, None]

    calls = []
    mlflow = MlflowSink.__new__(MlflowSink)
    mlflow.run_id, mlflow.client = "abc", SimpleNamespace(log_table=lambda *a, **k: calls.append((a, k)))
    mlflow.tables = True
    mlflow.log_table(2, "coach/samples", rows)
    assert calls == [
        (
            ("abc",),
            {
                "data": {"agent": ["solver", "verifier"], "score": [3.0, 0.0], "response": ["a | b", None]},
                "artifact_file": "coach/samples/iter-0002.json",
            },
        )
    ]
    assert markdown_table(rows).splitlines()[2] == "| solver | 3.0 | a \\| b |"
