"""The coach-bias watch: score drift against flat success (per agent and per task kind, read from a run's
manifests as the score stage does) and answer collapse (repeated or copied-from-prompt final answers)."""

import pytest

from mappa.coach.drift import answer_shares, collapse_warnings, drift_warnings
from mappa.config import load_config
from mappa.core.types import Action, Problem, Trajectory
from mappa.stages import write_manifest
from mappa.stages.coach_diagnostics import watch_warnings
from mappa.storage.run import Run


def test_drift_fires_on_rising_scores_with_flat_success_only():
    flat = [(0, 4.0, 0.30), (1, 5.0, 0.31), (2, 6.5, 0.30)]
    together = [(0, 4.0, 0.30), (1, 5.0, 0.40), (2, 6.5, 0.50)]
    short = [(1, 4.0, 0.3), (2, 7.0, 0.3)]
    gap = [(0, 4.0, 0.3), (2, 5.0, 0.3), (3, 7.0, 0.3)]  # not consecutive iterations
    warnings = drift_warnings(
        {"kind regression": flat, "kind classification": together, "a": short, "b": gap}
    )
    assert [w["category"] for w in warnings] == ["kind regression"]
    assert warnings[0]["iterations"] == [0, 2] and warnings[0]["score_change"] == 2.5
    assert "4.00 -> 6.50" in warnings[0]["message"] and "30% -> 30%" in warnings[0]["message"]


def run_with_history(tmp_path, regression_scores, regression_success) -> Run:
    """Iterations 0 and 1 of a DSBench-like run: rollout and score manifests with per-kind figures."""
    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}"])
    run = Run.create(config, "drift")
    for k in (0, 1):
        by_kind = {
            "regression": {"success_rate": regression_success[k]},
            "classification": {"success_rate": 0.5},
        }
        write_manifest(run, k, "rollout", 4, {}, success_rate=0.4, by_kind=by_kind)
        kinds = {"regression": {"all": regression_scores[k]}, "classification": {"all": 5.0}}
        write_manifest(
            run, k, "score", 4, {}, bias={"mean_by_agent": {"modeler": 5.0}}, mean_score_by_kind=kinds
        )
    return run


@pytest.mark.parametrize(
    ("success", "fires"), [((0.3, 0.3, 0.3), True), ((0.3, 0.45, 0.6), False)], ids=["flat", "together"]
)
def test_the_score_stage_flags_a_kind_whose_scores_drift_while_success_stays(tmp_path, success, fires):
    run = run_with_history(tmp_path, (4.0, 5.0), success[:2])
    write_manifest(
        run, 2, "rollout", 4, {}, success_rate=0.4, by_kind={"regression": {"success_rate": success[2]}}
    )
    bias = {"mean_by_agent": {"modeler": 5.1}}
    by_kind = {"regression": {"all": 6.5}, "classification": {"all": 5.0}}
    warnings = watch_warnings(run, 2, "score", bias, by_kind, {})
    assert [w["category"] for w in warnings] == (["kind regression"] if fires else [])


def trajectory(number: int, answers: dict[str, str]) -> Trajectory:
    problem = Problem(f"p{number}", f"What is {number} + {number}?", str(2 * number))
    actions = tuple(
        Action(
            f"t{number}", problem.id, agent, i, 0, "o", "Answer as \\boxed{answer}.", text, (1,), (2,), (0.0,)
        )
        for i, (agent, text) in enumerate(answers.items())
    )
    return Trajectory(f"t{number}", problem, actions, None, False)


def test_answer_collapse_onto_one_answer_or_the_prompts_placeholder_warns():
    before = [
        trajectory(n, {"solver": f"\\boxed{{{2 * n}}}", "verifier": f"\\boxed{{{2 * n}}}"}) for n in range(6)
    ]
    after = [trajectory(n, {"solver": "\\boxed{7}", "verifier": "\\boxed{answer}"}) for n in range(6)]
    old, new = answer_shares(before), answer_shares(after)
    assert old["solver"]["repeated_share"] == pytest.approx(1 / 6, abs=1e-3)
    assert new["solver"] == {
        "answers": 6,
        "most_common": "7",
        "repeated_share": 1.0,
        "copied_from_prompt_share": 0.0,
    }
    assert new["verifier"]["copied_from_prompt_share"] == 1.0
    warnings = {(w["category"], w["field"]) for w in collapse_warnings(old, new)}
    assert warnings == {
        ("solver", "repeated_share"),
        ("verifier", "repeated_share"),
        ("verifier", "copied_from_prompt_share"),
    }
    assert collapse_warnings(None, new) == [] and collapse_warnings(old, old) == []
