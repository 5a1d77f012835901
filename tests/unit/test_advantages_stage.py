"""The advantages stage on a small run folder written by hand: trajectories and scores in, experiences.parquet
and the manifest out, checked against values computed by hand. The agents' workers are scripted (a fixed
logprob per token and pass): the test is about what the stage reads, aligns and writes, not a model.

Two problems, two samples each; per trajectory the solver (turn 0), the executor (turn 0) and the frozen
verifier act once; the last trajectory's executor also leaves an empty response (no experience). With
`algo.beta=0` an action's return on every token is 0.1 x its score after the sibling baseline.
"""

from __future__ import annotations

import math

import pytest
import ray

from mappa.config import load_config
from mappa.core.experiences import align_scores
from mappa.core.types import Action, ActionScore, Problem, Trajectory
from mappa.stages import advantages as stage
from mappa.stages import output_parts
from mappa.storage.frames import scores_to_frame, trajectories_to_frame
from mappa.storage.run import Run

LOGPROB = {"ref": -0.5, "policy": -0.25}  # what the scripted workers answer, per token and pass
SAMPLED = -0.3  # the rollout's own logprob of every token

# (trajectory, agent, turn, response tokens, score, parse status)
ACTIONS = [
    ("p0#0", "solver", 0, 2, 8.0, "ok"),
    ("p0#0", "executor", 0, 1, 3.0, "ok"),
    ("p0#0", "verifier", 0, 1, 7.0, "ok"),
    ("p0#1", "solver", 0, 2, 4.0, "retried"),
    ("p0#1", "executor", 0, 1, 9.0, "fallback"),
    ("p0#1", "verifier", 0, 1, 7.0, "ok"),
    ("p1#0", "solver", 0, 2, 5.0, "ok"),
    ("p1#0", "executor", 0, 1, 6.0, "ok"),
    ("p1#0", "verifier", 0, 1, 7.0, "ok"),
    ("p1#1", "solver", 0, 2, 5.0, "rule"),
    ("p1#1", "executor", 0, 1, 2.0, "ok"),
    ("p1#1", "verifier", 0, 1, 7.0, "ok"),
    ("p1#1", "executor", 1, 0, 0.0, "rule"),  # an empty response: scored, but no experience
]


def _action(trajectory_id: str, index: int, agent: str, turn: int, length: int) -> Action:
    tokens, logprobs = tuple(range(10, 10 + length)), (SAMPLED,) * length
    problem_id = trajectory_id.split("#")[0]
    return Action(
        trajectory_id, problem_id, agent, index, turn, "obs", "prompt", "answer", (1, 2), tokens, logprobs
    )


def _trajectories() -> list[Trajectory]:
    out = []
    for trajectory_id in dict.fromkeys(row[0] for row in ACTIONS):
        rows = [row for row in ACTIONS if row[0] == trajectory_id]
        actions = tuple(_action(trajectory_id, i, row[1], row[2], row[3]) for i, row in enumerate(rows))
        problem = Problem(actions[0].problem_id, "1 + 1?", "2")
        out.append(Trajectory(trajectory_id, problem, actions, "2", True))
    return out


def _scores() -> list[ActionScore]:
    out = []
    for trajectory in _trajectories():
        rows = [row for row in ACTIONS if row[0] == trajectory.id]
        for action, (_, agent, _, _, score, status) in zip(trajectory.actions, rows, strict=True):
            out.append(ActionScore(action.id, trajectory.id, agent, score, "why", "coach", status))
    return out


class _Remote:
    def __init__(self, fn):
        self.remote = fn


class _Worker:
    """An agent's worker as the stage calls it, answering at once (`ray.get` is the identity here)."""

    def __init__(self, calls: list[tuple[str, str]], agent: str):
        def logprobs(prompts, responses, which):
            calls.append((agent, which))
            return [[LOGPROB[which]] * len(r) for r in responses]

        self.logprobs = _Remote(logprobs)
        self.release_memory = _Remote(lambda: None)


@pytest.fixture
def fixture_run(tmp_path, monkeypatch):
    """A run whose iteration 1 is rolled out and scored, with scripted workers; returns (run, calls)."""
    overrides = [
        f"storage.root={tmp_path / 'runs'}",
        "agents.verifier.trainable=false",
        "rollout.samples_per_problem=2",
        "algo.beta=0",
        "algo.baseline=siblings",
        "algo.old_logprobs=recompute",
    ]
    run = Run.create(load_config("configs/mathchat-cpu.yaml", overrides), "advantages.1")
    run.store.write_parquet(trajectories_to_frame(_trajectories(), 1), *output_parts(run, 1, "rollout"))
    run.store.write_parquet(scores_to_frame(_scores()), *output_parts(run, 1, "score"))
    calls: list[tuple[str, str]] = []
    workers = {agent: _Worker(calls, agent) for agent in ("solver", "executor", "verifier")}
    monkeypatch.setattr(stage, "agent_workers", lambda run, iteration, purpose=None: workers)
    monkeypatch.setattr(ray, "get", lambda refs: refs)
    return run, calls


ROOT2, ROOT15 = math.sqrt(2.0), math.sqrt(1.5)


def test_the_stage_writes_the_experiences_computed_by_hand(fixture_run):
    run, calls = fixture_run
    manifest = stage.compute_iteration_advantages(run, 1)
    frame = run.store.read_parquet(*output_parts(run, 1, "advantages"))
    assert list(frame.columns) == [
        "action_id", "agent", "prompt_token_ids", "response_token_ids", "old_logprobs", "ref_logprobs",
        "kl", "rewards", "returns", "advantages", "score",
    ]  # fmt: skip
    # frozen verifier's actions and the empty response are left out; rollout order kept
    ids = ["p0#0/0", "p0#0/1", "p0#1/0", "p0#1/1", "p1#0/0", "p1#0/1", "p1#1/0", "p1#1/1"]
    assert frame["action_id"].tolist() == ids
    assert frame["agent"].tolist() == ["solver", "executor"] * 4
    assert frame["score"].tolist() == [8.0, 3.0, 4.0, 9.0, 5.0, 6.0, 5.0, 2.0]  # the coach's, before baseline
    lengths = [2, 1] * 4
    assert [list(r) for r in frame["response_token_ids"]] == [list(range(10, 10 + n)) for n in lengths]
    assert [list(r) for r in frame["old_logprobs"]] == [[-0.25] * n for n in lengths]
    assert [list(r) for r in frame["ref_logprobs"]] == [[-0.5] * n for n in lengths]
    assert [list(r) for r in frame["kl"]] == [[0.25] * n for n in lengths]
    # sibling means: solver p0 (8, 4) -> 6, p1 (5, 5) -> 5; executor p0 3 (its fallback counts in no mean),
    # p1 (6, 2) -> 4. Returns are 0.1 x (score - mean) on every token of the action.
    returns = [[0.2, 0.2], [0.0], [-0.2, -0.2], [0.6], [0.0, 0.0], [0.2], [0.0, 0.0], [-0.2]]
    for got, want in zip(frame["returns"], returns, strict=True):
        assert list(got) == pytest.approx(want, abs=1e-6)
    assert [list(r)[-1] for r in frame["rewards"]] == pytest.approx([r[-1] for r in returns], abs=1e-6)
    # whitened per agent: solver tokens 0.2 x2, -0.2 x2, 0 x4 (mean 0, std sqrt(0.02)); executor over its
    # scored actions 0, 0.2, -0.2 (mean 0, std sqrt(0.08 / 3)); the fallback gets exactly 0
    advantages = [[ROOT2] * 2, [0.0], [-ROOT2] * 2, [0.0], [0.0] * 2, [ROOT15], [0.0] * 2, [-ROOT15]]
    for got, want in zip(frame["advantages"], advantages, strict=True):
        assert list(got) == pytest.approx(want, abs=1e-5)
    assert list(frame["advantages"][3]) == [0.0]
    # both passes for each trainable agent, in agent order; none for the frozen verifier
    assert calls == [("executor", "ref"), ("executor", "policy"), ("solver", "ref"), ("solver", "policy")]
    assert manifest["rows"] == 8 and manifest["baseline"] == "siblings"
    assert manifest["old_logprobs"] == "recompute" and manifest["reference_pass"] == "run"
    assert manifest["mean_kl"] == pytest.approx({"executor": 0.25, "solver": 0.25})
    assert manifest["unscored"] == {"solver": 0, "executor": 1}
    mismatch = manifest["logprob_mismatch"]
    assert mismatch.keys() == {"executor", "solver"}
    assert all(m == pytest.approx({"mean_abs": 0.05, "max_abs": 0.05}) for m in mismatch.values())


def test_an_action_without_a_score_stops_the_stage(fixture_run):
    run, calls = fixture_run
    scores = scores_to_frame(_scores()[1:])
    run.store.write_parquet(scores, *output_parts(run, 1, "score"))
    with pytest.raises(ValueError, match="1 actions have no coach score"):
        stage.compute_iteration_advantages(run, 1)
    assert calls == []  # before any worker is asked


def test_a_scores_file_without_parse_statuses_counts_every_score(fixture_run):
    run, _ = fixture_run
    scores = scores_to_frame(_scores()).drop(columns=["parse_status"])
    run.store.write_parquet(scores, *output_parts(run, 1, "score"))
    manifest = stage.compute_iteration_advantages(run, 1)
    assert manifest["unscored"] == {"solver": 0, "executor": 0}
    frame = run.store.read_parquet(*output_parts(run, 1, "advantages"))
    assert list(frame["advantages"][3]) != [0.0]  # the executor's 9 now counts


def test_scores_are_paired_with_their_actions_by_id_once():
    actions = [action for trajectory in _trajectories() for action in trajectory.actions]
    scores = _scores()
    shuffled = scores[::-1] + [ActionScore("elsewhere/0", "elsewhere", "solver", 1.0, "", "c")]
    assert align_scores(actions, shuffled) == scores  # in the actions' order; a stray score is ignored
    with pytest.raises(ValueError, match="2 actions have no coach score"):
        align_scores(actions, scores[2:])
    with pytest.raises(ValueError, match="1 actions have more than one coach score"):
        align_scores(actions, [*scores, scores[4]])
