"""Baseline estimators for REINFORCE++: what `algo.baseline` subtracts from each action's coach score.

A `BaselineEstimator` declares its name and one function, `estimate(scores, scored, actions) -> b`: for the
batch's coach scores s (B,), which of them are scored (B,) bool (an unscored action, a coach fallback,
counts in no estimate) and the actions themselves (their problem, agent, turn, trajectory), the baseline b
(B,) of each row. `mappa.core.advantages` then uses s - b as the action's score before the reward is formed
(REINFORCE with a baseline, Williams 1992; REINFORCE++-baseline, Hu 2025). The built-ins:

    none       b = 0: plain REINFORCE++, the whitening's batch mean is the only baseline
    siblings   b = mean(s) over the scored actions of the same agent at the same turn across the samples
               of one problem (OpenRLHF's `reinforce_baseline`; AT-GRPO's per-(problem, turn, agent)
               baseline); a group with no scored action gets b = 0. Needs 2 or more samples per problem.

A new estimator is one module holding a `BaselineEstimator`, registered under its name in the entry-point
group `mappa.baselines` or named by its import path (`algo.baseline: my_package.loo:BASELINE`);
`mappa.core.baseline_registry` finds it. Pure torch; no I/O, no config.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch

from mappa.core.advantages import group_rows
from mappa.core.types import Action

EstimateFn = Callable[[torch.Tensor, torch.Tensor, Sequence[Action]], torch.Tensor]
"""(scores (B,), scored (B,) bool, the B actions) -> each row's baseline (B,)."""


@dataclass(frozen=True)
class BaselineEstimator:
    """One baseline estimator: the name `algo.baseline` gives it and its function."""

    name: str
    estimate: EstimateFn
    """(scores (B,), scored (B,) bool, actions) -> baseline (B,); see the module docstring."""
    min_samples_per_problem: int = 1
    """The config refuses `rollout.samples_per_problem` below this (siblings: 2, or every advantage is 0)."""
    summary: str = ""
    """What it subtracts, in a few words: for config errors and docs."""


def group_mean_baseline(
    scores: torch.Tensor, groups: Sequence[Hashable], scored: torch.Tensor | None = None
) -> torch.Tensor:
    """mean(s) over the scored rows of each row's group, in float64; 0 for a group with no scored row.

    (B,) -> (B,). An unscored row counts in no mean, but gets its group's mean like the others."""
    if scores.dim() != 1 or len(groups) != scores.shape[0]:
        raise ValueError(f"baseline groups has {len(groups)} entries for scores {tuple(scores.shape)}")
    counted = torch.ones_like(scores, dtype=torch.bool) if scored is None else scored.bool()
    x = scores.double()
    baseline = torch.zeros_like(x)
    for rows in group_rows(groups):
        members = rows & counted
        if members.any():
            baseline[rows] = x[members].mean()
    return baseline


def estimate_no_baseline(
    scores: torch.Tensor, scored: torch.Tensor, actions: Sequence[Action]
) -> torch.Tensor:
    return torch.zeros_like(scores, dtype=torch.float64)


def sibling_group(action: Action) -> tuple[str, str, int]:
    """An action's sibling group: the same agent at the same turn of the samples of one problem."""
    return (action.problem_id, action.agent, action.turn)


def estimate_sibling_baseline(
    scores: torch.Tensor, scored: torch.Tensor, actions: Sequence[Action]
) -> torch.Tensor:
    return group_mean_baseline(scores, [sibling_group(action) for action in actions], scored)


NONE = BaselineEstimator("none", estimate_no_baseline, summary="nothing (plain REINFORCE++)")
SIBLINGS = BaselineEstimator(
    "siblings",
    estimate_sibling_baseline,
    min_samples_per_problem=2,
    summary="the mean score of a problem's other samples",
)
