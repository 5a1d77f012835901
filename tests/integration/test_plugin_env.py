"""A user's own team as a plug-in: the example package `examples/mappa-codepair` (installed by the set-up)
registers `codepair` in the entry-point group `mappa.envs`, and `mappa train` trains it end to end, once with
the outcome coach and once with an LLM coach (a local model asked the package template's yes/no questions),
with nothing about it under `mappa/`. The runs show up in `mappa inspect` as the built-ins do."""

import subprocess
from pathlib import Path

import pytest
from tiny_run import write_tiny_config

from mappa.cli import main
from mappa.stages import output_parts, stage_complete
from mappa.storage.run import Run

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SEATS = ("coder", "reviewer")


def train_codepair(root: Path, tiny_model: Path, run_id: str, coach: dict, eval_every: int) -> Run:
    path = write_tiny_config(
        root / f"{run_id}.yaml",
        tiny_model,
        root,
        SEATS,
        name=run_id,
        env={"type": "codepair", "coder_turns": 1},
        coach=coach,
        rollout={
            "problems_per_iteration": 2,
            "max_new_tokens": 16,
            "eval_every": eval_every,
            "eval_problems": 2,
        },
        sandbox={"timeout_s": 10, "memory_mb": 1024},
    )
    assert main(["train", str(path), "--run-id", run_id]) == 0
    return Run.open(str(root), run_id)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model, prefect_harness, ray_local):
    root = tmp_path_factory.mktemp("runs")
    outcome = train_codepair(root, tiny_model, "cp-outcome", {"type": "outcome"}, eval_every=0)
    llm = {"type": "local", "model": str(tiny_model), "scoring": "criteria", "use_ground_truth": True}
    return root, outcome, train_codepair(root, tiny_model, "cp-llm", llm, eval_every=1)


def test_the_plugin_team_trains_end_to_end_with_the_outcome_coach_and_an_llm_coach(runs):
    _, outcome, llm = runs
    for run in (outcome, llm):
        assert all(stage_complete(run, 0, stage) for stage in ("rollout", "score", "advantages", "update"))
        actions = run.store.read_parquet(*output_parts(run, 0, "rollout"))
        assert set(actions["agent"]) == set(SEATS)
    results = llm.store.read_parquet(*output_parts(llm, 0, "evaluate"))
    # the env's own evaluation columns and seat checks; no math columns
    assert {"tests_passed_share", "seat_coder", "seat_reviewer"} <= set(results.columns)
    assert "correct_boxed" not in results.columns
    outcome_scores = outcome.store.read_parquet(*output_parts(outcome, 0, "score"))
    assert set(outcome_scores["score"]) <= {0.0, 10.0}
    llm_scores = llm.store.read_parquet(*output_parts(llm, 0, "score"))
    assert set(llm_scores["coach_model"]) == {f"{llm.config.coach.model}:criteria"}
    # the package's template asked its questions, the hidden tests' result in the context
    assert llm_scores["rationale"].str.contains("hidden unit tests").all()
    assert llm.read_manifest(0, "score").get("rubric_agreement") is None  # the env has no rubric


def test_inspect_shows_the_plugin_run_like_a_builtin(runs, capsys, monkeypatch):
    from mappa import cli

    monkeypatch.setattr(cli.console, "width", 200)  # the evaluation table's headers whole, not folded
    root, _, llm = runs
    assert main(["inspect", llm.run_id, "--root", str(root), "--iteration", "0"]) == 0
    printed = capsys.readouterr().out
    assert "coder" in printed and "reviewer" in printed and "hidden unit" in printed  # the coach's questions
    assert main(["inspect", llm.run_id, "--root", str(root), "--evaluations"]) == 0
    printed = capsys.readouterr().out
    assert "coder did its part" in printed and "flexible" not in printed


def test_the_plugin_runs_are_tracked_and_in_prefect_like_a_builtin(runs):
    """TensorBoard (the default tracker) holds the plug-in's seats by name; the run is a Prefect flow run
    named by its run id, tagged with its env."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    _, _, llm = runs
    events = EventMultiplexer().AddRunsFromDirectory(llm.store.path(llm.run_id, "tensorboard")).Reload()
    tags = {tag for name in events.Runs() for tag in events.GetAccumulator(name).Tags()["scalars"]}
    assert {"critic/score/mean/coder", "critic/score/mean/reviewer", "val/success_rate"} <= tags, sorted(tags)
    with get_client(sync_client=True) as client:
        flow_runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=["cp-llm"]))
        )
    assert [f.state.type.value for f in flow_runs] == ["COMPLETED"]
    assert "env:codepair" in flow_runs[0].tags


def test_nothing_under_mappa_names_the_plugin():
    found = subprocess.run(["git", "grep", "-il", "codepair", "--", "mappa/"], cwd=REPO, capture_output=True)
    assert found.stdout.decode() == ""
