"""`mappa inspect` says what each number is: the sampled training success, the evaluations' gradings, the
run's own coach against outcomes (hand-computed AUCs), a trajectory reached by the action id `--iteration`
prints, with what trained each action, and clear errors for an iteration the run does not have. A run
written by hand, no model."""

import dataclasses

import pytest

from mappa.cli import main
from mappa.config import load_config
from mappa.core.types import ActionScore, Experience
from mappa.envs.mathchat import SPEC as MATHCHAT
from mappa.reporting.coach_separation import coach_separation
from mappa.stages import output_parts, write_manifest
from mappa.stages.evaluate import evaluation_summaries, results_frame, write_evaluation_manifest
from mappa.storage.frames import experiences_to_frame, scores_to_frame, trajectories_to_frame
from mappa.storage.run import Run

# Coach scores per iteration, trajectory (t1 succeeded, t2 failed) and action index (solver 0, executor 1
# and 2, verifier 3); t2's action 2 is unscored (fallback) in both iterations.
SCORES = {
    0: {"t1": [8.0, 6.0, 2.0, 9.0], "t2": [3.0, 6.0, 1.0, 9.0]},
    1: {"t1": [4.0, 6.0, 2.0, 9.0], "t2": [5.0, 6.0, 1.0, 9.0]},
}


def failed_copy(trajectory, tid: str = "t2"):
    """The fixture's trajectory as a failed one without a final answer, under id `tid`."""
    actions = tuple(dataclasses.replace(a, trajectory_id=tid) for a in trajectory.actions)
    return dataclasses.replace(trajectory, id=tid, actions=actions, final_answer=None, correct=False)


@pytest.fixture
def run(tmp_path, trajectory) -> Run:
    """Two rolled-out, scored iterations of two trajectories (one right, one wrong); the verifier frozen;
    iteration 0 has advantages for its solver's and executors' actions."""
    overrides = [f"storage.root={tmp_path / 'runs'}", "agents.verifier.trainable=false", "iterations=3"]
    run = Run.create(load_config("configs/mathchat-cpu.yaml", overrides), "r1")
    pair = [trajectory, failed_copy(trajectory)]
    for iteration, by_trajectory in SCORES.items():
        run.store.write_parquet(
            trajectories_to_frame(pair, iteration), *output_parts(run, iteration, "rollout")
        )
        write_manifest(run, iteration, "rollout", 8, {"total_s": 1.0}, success_rate=0.5)
        scores = [
            ActionScore(a.id, t.id, a.agent, by_trajectory[t.id][a.index], f"why {a.id}", "coach",
                        parse_status="fallback" if a.id == "t2/2" else "ok")
            for t in pair
            for a in t.actions
        ]  # fmt: skip
        run.store.write_parquet(scores_to_frame(scores), *output_parts(run, iteration, "score"))
    solver = Experience("t1/0", "solver", (1, 2), (3, 4), (-0.5, -0.25), (-0.5, -0.3), (0.0, 0.05),
                        (0.0, 0.7995), (0.7995, 0.7995), (0.5, 1.5), 8.0)  # fmt: skip
    run.store.write_parquet(experiences_to_frame([solver]), *output_parts(run, 0, "advantages"))
    return run


@pytest.fixture
def inspect(capsys, monkeypatch):
    """`mappa inspect RUN --root ROOT ARGV...` -> (exit code, what it printed), on a console wide enough
    that no table folds a cell."""
    from mappa.cli.render import console

    monkeypatch.setattr(console, "width", 400)

    def run_inspect(run, *argv) -> tuple[int, str]:
        code = main(["inspect", run.run_id, "--root", run.store.url(), *argv])
        return code, capsys.readouterr().out

    return run_inspect


def test_the_coach_is_judged_by_its_own_scores_against_outcomes_per_seat_and_pooled(run):
    rows = {(r["agent"], r["iteration"]): r for r in coach_separation(run)}
    # iteration 0: solver 8 (right team) above 3 (wrong team): 1.0
    assert rows[("solver", 0)] == {
        "agent": "solver", "iteration": 0, "auc": 1.0, "n_success": 1, "n_failed": 1, "n_unscored": 0
    }  # fmt: skip
    # executor: right 6 and 2 against wrong 6 (the wrong team's 1 is unscored, left out): tie 0.5 + 0 = 0.25
    assert rows[("executor", 0)]["auc"] == 0.25
    assert (rows[("executor", 0)]["n_success"], rows[("executor", 0)]["n_failed"]) == (2, 1)
    assert rows[("executor", 0)]["n_unscored"] == 1
    assert rows[("verifier", 0)]["auc"] == 0.5  # 9 and 9: a tie
    assert rows[("solver", 1)]["auc"] == 0.0  # 4 below 5
    # pooled: right 8, 4 against wrong 3, 5: 8>3, 8>5, 4>3 won, 4<5 lost: 3 of 4 pairs
    assert rows[("solver", "all")]["auc"] == 0.75
    assert rows[("executor", "all")]["auc"] == 0.25  # 4 ties of 6 with 6 (2.0) of 8 pairs


def test_inspect_coaches_shows_the_runs_coach_and_what_its_auc_means(inspect, run):
    code, out = inspect(run, "--coaches")
    assert code == 0
    assert "its coach's scores against the team's outcome, per seat" in out
    assert "does the run's coach rank the actions of successful teams above those of failed ones?" in out
    assert "not blame accuracy" in out and "no re-scoring yet" not in out
    assert "no re-scoring to compare with" in out


def test_the_default_table_names_the_sampled_training_success_and_the_held_out_one(inspect, run, trajectory):
    code, out = inspect(run)
    assert code == 0 and "training success (sampled)" in out
    assert "8 problems x 1 samples, temperature 1.0" in out and "not a held-out measure" in out
    assert "held-out success" not in out  # no evaluation yet: no column
    results = results_frame([trajectory, failed_copy(trajectory)], MATHCHAT)
    run.store.write_parquet(results, *run.parts(0, "evaluate", "results.parquet"))
    write_evaluation_manifest(run, 0, results, {"total_s": 1.0})
    code, out = inspect(run)
    assert "held-out success" in out and "the greedy evaluation of the iteration's checkpoint" in out


def test_evaluations_show_the_envs_grading_strict_and_flexible_labelled(inspect, run, trajectory):
    results = results_frame([trajectory, failed_copy(trajectory)], MATHCHAT)
    for iteration in (-1, 0):
        run.store.write_parquet(results, *run.parts(iteration, "evaluate", "results.parquet"))
        write_evaluation_manifest(run, iteration, results, {"total_s": 1.0})
    # the fixture's right team boxed nothing: the env's grading (and the flexible one) 1 of 2, strict 0
    assert evaluation_summaries(run)[0] == {
        "evaluation": "base", "problems": 2, "success": 0.5, "success_strict": 0.0, "success_flexible": 0.5,
        "solver did its part": 1.0, "executor did its part": 0.0, "verifier did its part": 0.5,
    }  # fmt: skip
    code, out = inspect(run, "--evaluations")
    assert code == 0
    assert (
        "success (env's grading)" in out and "strict (\\boxed{})" in out and "flexible (last number)" in out
    )
    assert "strict: only an answer in the last reply's \\boxed{} counts" in out
    assert "held-out success (env's grading) base -> iter-0000: 50.0% -> 50.0%" in out


def test_an_evaluation_without_the_strict_rate_in_its_manifest_reads_it_from_the_results(run, trajectory):
    results = results_frame([trajectory], MATHCHAT).assign(correct_boxed=True)
    run.store.write_parquet(results, *run.parts(-1, "evaluate", "results.parquet"))
    manifest = write_evaluation_manifest(run, -1, results, {"total_s": 1.0})
    del manifest["success_rate_boxed"]  # as an evaluation of an older mappa wrote it
    run.store.write_json(manifest, *run.parts(-1, "evaluate", "_manifest.json"))
    assert evaluation_summaries(run)[0]["success_strict"] == 1.0


def test_the_action_id_iteration_prints_opens_its_trajectory_with_what_trained_each_action(inspect, run):
    code, out = inspect(run, "--iteration", "0")
    assert code == 0 and "t1/3" in out and "--trajectory ACTION_ID" in out
    code, out = inspect(run, "--trajectory", "t1/0")
    assert code == 0
    assert "reference 4; final answer 4 (graded right by the env)" in out
    assert ">> solver turn 0 (action t1/0): coach score 8.000 (ok)" in out
    # R = r_T + beta kl_T = 0.7995 + 0.01 * 0.05 = 0.8; G_0 = 0.7995; mean advantage (0.5 + 1.5) / 2
    assert "reward +0.800, return +0.799, advantage +1.000 (mean over 2 tokens)" in out
    assert "verifier turn 0 (action t1/3): coach score 9.000 (ok); frozen seat: not trained" in out
    assert "executor turn 0 (action t1/1): coach score 6.000 (ok); no advantage (an empty response)" in out
    code, out = inspect(run, "--trajectory", "t2")
    assert "no final answer (graded wrong by the env)" in out and "nan" not in out
    code, out = inspect(run, "--trajectory", "t2/1")
    assert "no advantage yet" not in out  # iteration 0 has its advantages
    code, out = inspect(run, "--trajectory", "t1/9")
    assert code == 2 and "trajectory t1 of run r1 has actions 0-3, not 9" in out


def test_a_trajectory_of_an_iteration_without_advantages_says_so(inspect, run, trajectory):
    frame = trajectories_to_frame([dataclasses.replace(trajectory, id="iter-0001-p1-s0")], 1)
    frame["trajectory_id"] = "iter-0001-p1-s0"
    run.store.write_parquet(frame, *output_parts(run, 1, "rollout"))
    code, out = inspect(run, "--trajectory", "iter-0001-p1-s0/2")
    assert code == 0 and ">> executor turn 1" in out
    assert "no advantage yet (the iteration's advantages stage has not finished)" in out


def test_an_iteration_the_run_does_not_have_is_named_with_those_it_has(inspect, run):
    code, out = inspect(run, "--iteration", "7")
    assert code == 2
    assert "run r1 has no iteration 7: iterations 0-1 are rolled out (its config asks for 3)" in out
    assert "Traceback" not in out and "parquet" not in out
    code, out = inspect(run, "--iteration", "-1")
    assert code == 2 and "-1 is the base model" in out
    code, out = inspect(run, "--trajectory", "iter-0005-p1-s0")
    assert code == 2 and "no trajectory or action iter-0005-p1-s0" in out
