"""A baseline estimator is one `BaselineEstimator`: one defined here (leave-one-out), named by its import
path or registered under a name in the entry-point group `mappa.baselines`, is what the advantages
computation subtracts; the config checks its samples. Unknown or broken names: test_plugin_lookup.py."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from mappa.config import ConfigError, load_config
from mappa.core import baseline_registry
from mappa.core.baseline_registry import get_baseline
from mappa.core.baselines import SIBLINGS, BaselineEstimator, sibling_group
from mappa.core.plugins import registered_plugins
from mappa.core.types import Action, ActionScore
from mappa.stages.advantages import compute_experiences

HERE = "test_baseline_registry"  # pytest puts tests/unit on sys.path: this module's import name


def estimate_leave_one_out(
    scores: torch.Tensor, scored: torch.Tensor, actions: Sequence[Action]
) -> torch.Tensor:
    """b_i = the mean score of the other scored actions of i's sibling group (RLOO; 0 when it has none)."""
    baseline = torch.zeros_like(scores, dtype=torch.float64)
    for i, action in enumerate(actions):
        others = [
            float(scores[j])
            for j, other in enumerate(actions)
            if j != i and scored[j] and sibling_group(other) == sibling_group(action)
        ]
        baseline[i] = sum(others) / len(others) if others else 0.0
    return baseline


BASELINE = BaselineEstimator(
    "leave-one-out", estimate_leave_one_out, min_samples_per_problem=2, summary="the mean of the others"
)


def _solver_actions(scores: list[float]) -> tuple[list[Action], list[ActionScore]]:
    """One one-token solver action per sample of problem p1, with its coach score."""
    actions = [
        Action(f"t{i}", "p1", "solver", 0, 0, "obs", "prompt", "answer", (1,), (2,), (-1.0,))
        for i in range(len(scores))
    ]
    verdicts = [
        ActionScore(a.id, a.trajectory_id, "solver", s, "why", "coach") for a, s in zip(actions, scores)
    ]
    return actions, verdicts


@pytest.mark.parametrize(
    ("baseline", "returns"),
    [
        # no KL (beta 0): the return is 0.1 x (score - baseline). Scores 2, 6, 10: their mean is 6
        ("siblings", [-0.4, 0.0, 0.4]),
        # leave one out: the others' means are 8, 6 and 4
        (f"{HERE}:BASELINE", [-0.6, 0.0, 0.6]),
        ("none", [0.2, 0.6, 1.0]),
    ],
)
def test_the_advantages_subtract_the_estimator_the_config_names(baseline, returns):
    config = load_config(
        "configs/mathchat-cpu.yaml",
        ["algo.beta=0", f"algo.baseline={baseline}", "rollout.samples_per_problem=3"],
    )
    actions, scores = _solver_actions([2.0, 6.0, 10.0])
    logprobs = [[-1.0]] * 3
    experiences = compute_experiences(actions, scores, logprobs, logprobs, config.algo)
    assert [e.returns[0] for e in experiences] == pytest.approx(returns)
    # whitened over the three, each is -1, 0, +1 over std sqrt(2/3): -sqrt(1.5), 0, +sqrt(1.5)
    assert [e.advantages[0] for e in experiences] == pytest.approx([-(1.5**0.5), 0.0, 1.5**0.5], abs=1e-6)


def test_an_estimator_registered_under_a_name_is_found_by_it(register_entry_point):
    register_entry_point(baseline_registry.ENTRY_POINT_GROUP, "loo", f"{HERE}:BASELINE")
    get_baseline.cache_clear()
    try:
        assert "loo" in registered_plugins(baseline_registry.BASELINES)
        config = load_config(
            "configs/mathchat-cpu.yaml", ["algo.baseline=loo", "rollout.samples_per_problem=2"]
        )
        assert get_baseline(config.algo.baseline) is BASELINE
    finally:
        get_baseline.cache_clear()


def test_the_config_refuses_too_few_samples_for_the_estimator():
    with pytest.raises(ConfigError, match=r"rollout.samples_per_problem to 2 or more, or algo.baseline=none"):
        load_config("configs/mathchat-cpu.yaml", [f"algo.baseline={HERE}:BASELINE"])
    assert SIBLINGS.min_samples_per_problem == 2
