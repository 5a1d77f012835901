"""The evaluate stage's pieces that need no model: folders, results rows, and the CLI's early errors."""

import pytest

from mappa.cli import main
from mappa.config import load_config
from mappa.envs.mathchat import SPEC as MATHCHAT
from mappa.stages.evaluate import evaluation_complete, evaluation_label, results_frame
from mappa.storage.run import Run


def test_labels_name_the_checkpoint_or_the_base_model():
    assert evaluation_label(-1) == "base"
    assert evaluation_label(3) == "iter-0003"
    with pytest.raises(ValueError, match="-1"):
        evaluation_label(-2)


def test_one_results_row_per_problem(trajectory):
    frame = results_frame([trajectory], MATHCHAT)
    assert frame.to_dict("records") == [
        {
            "problem_id": "p1",
            "question": "What is 2+2?",
            "gold_answer": "4",
            "final_answer": "4",
            "correct": True,
            "correct_boxed": False,  # the fixture's last reply holds no \boxed{} (its final answer is set)
            "flexible_answer": "4",
            "correct_flexible": True,
            "kind": "add/expression",  # the problem's operation and form (mappa.envs.mathchat.kinds)
            "trajectory_id": "t1",
            "actions": 4,
            "seconds": pytest.approx(0.25),  # generation 0 s + two sandbox runs (0.05 s, 0.2 s)
            "seat_solver": True,
            "seat_executor": False,  # its program crashed
            "seat_verifier": True,
        }
    ]


@pytest.fixture
def fresh_run(tmp_path):
    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}"])
    return Run.create(config, "fresh")


def test_a_run_without_finished_iterations_points_to_the_base_model(fresh_run, tmp_path, capsys):
    assert main(["evaluate", "fresh", "--root", str(tmp_path)]) == 2
    assert "--iteration -1" in capsys.readouterr().out
    assert not evaluation_complete(fresh_run, -1)


def test_an_unfinished_iteration_is_refused_before_any_work(fresh_run, tmp_path, capsys):
    assert main(["evaluate", "fresh", "--root", str(tmp_path), "--iteration", "0"]) == 2
    assert "no complete update" in capsys.readouterr().out


def test_a_missing_run_is_named(tmp_path, capsys):
    assert main(["evaluate", "nope", "--root", str(tmp_path)]) == 2
    assert "no run nope" in capsys.readouterr().out


def test_each_seat_is_checked_for_its_part_and_summed_over_evaluations(trajectory, tmp_path, capsys):
    """MathChat's seat checks (the solver states the reference, the last program printed it, the final
    answer is right) become `seat_*` columns, the manifest's `by_seat` and `mappa inspect --evaluations`."""
    from mappa.envs.mathchat.team import seat_checks
    from mappa.stages.evaluate import write_evaluation_manifest

    assert seat_checks(trajectory) == {
        "solver": True,
        "executor": False,
        "verifier": True,
    }  # its program crashed
    frame = results_frame([trajectory], MATHCHAT)
    assert frame[["seat_solver", "seat_executor", "seat_verifier"]].values.tolist() == [[True, False, True]]
    config = load_config("configs/mathchat-cpu-learn.yaml", [f"storage.root={tmp_path}"])
    run = Run.create(config, "seats")
    for iteration, results in ((-1, frame), (2, frame.assign(seat_executor=True))):
        run.store.write_parquet(results, *run.parts(iteration, "evaluate", "results.parquet"))
        assert (
            write_evaluation_manifest(run, iteration, results, {"total_s": 1.0})["by_seat"]["solver"] == 1.0
        )
    assert main(["inspect", "seats", "--root", str(tmp_path), "--evaluations"]) == 0
    printed = capsys.readouterr().out
    assert "held-out success (env's grading) base -> iter-0002: 100.0% -> 100.0% (+0.0 points)" in printed
    assert "solver 100% -> 100%, executor 0% -> 100%, verifier 100% -> 100%" in printed


def test_inspect_shows_the_change_per_kind_of_problem_with_its_interval(tmp_path, capsys):
    """Additions gained, every multiplication lost: the overall change hides it, the per-kind rows show
    it, and a kind whose interval lies below 0 is marked WORSE."""
    import pandas as pd

    from mappa.stages.evaluate import evaluation_change, write_evaluation_manifest

    config = load_config("configs/mathchat-cpu-learn.yaml", [f"storage.root={tmp_path}"])
    run = Run.create(config, "kinds")
    kinds = ["add/word"] * 6 + ["multiply/word"] * 6
    before = [0, 0, 0, 0, 1, 1] + [1] * 6
    after = [1, 1, 1, 1, 1, 1] + [0] * 6
    for iteration, right in ((-1, before), (2, after)):
        ids = [f"p{i}" for i in range(12)]
        results = pd.DataFrame({"problem_id": ids, "correct": [bool(r) for r in right], "kind": kinds})
        run.store.write_parquet(results, *run.parts(iteration, "evaluate", "results.parquet"))
        write_evaluation_manifest(run, iteration, results, {"total_s": 1.0})
    overall, add, multiply = evaluation_change(run, -1, 2)
    assert (overall["before"], overall["after"], overall["gained"], overall["lost"]) == (8, 6, 4, 6)
    assert (add["kind"], add["change"], add["worse"]) == ("add/word", 4 / 6, False)
    assert (multiply["kind"], multiply["change"], multiply["worse"]) == ("multiply/word", -1.0, True)
    assert main(["inspect", "kinds", "--root", str(tmp_path), "--evaluations"]) == 0
    printed = capsys.readouterr().out
    assert "base -> iter-0002, per kind of problem" in printed
    assert "multiply/word     6 -> 0    of 6    -100.0 [-100.0, -100.0]  gained 0, lost 6  WORSE" in printed
    assert "add/word          2 -> 6    of 6     +66.7 [" in printed
