"""Scored actions -> `Experience`s: REINFORCE++ (`mappa.core.advantages`) on typed records.

The advantages stage hands over the trainable agents' `Action`s, each with its coach's `ActionScore`
(`align_scores` pairs them once, by action id) and its old and reference logprobs; `compute_experiences`
pads them, runs the math and returns one `Experience` per action, in order. An action whose score's parse
status is `fallback` (`UNSCORED`) is unscored: zero advantages, out of the whitening statistics. Which
whitening scope and which baseline apply is the caller's choice (`whiten_groups`, and `baseline`: an
estimator of `mappa.core.baselines`), as in `compute_reinforce_pp_advantages`. Pure: no I/O, no config.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch

from mappa.core.advantages import compute_reinforce_pp_advantages, pad_sequences
from mappa.core.baselines import BaselineEstimator
from mappa.core.types import UNSCORED, Action, ActionScore, Experience


def align_scores(actions: Sequence[Action], scores: Sequence[ActionScore]) -> list[ActionScore]:
    """The score of each action, in the actions' order; a score of no listed action is ignored. A
    ValueError if an action has no score or more than one."""
    counts = Counter(score.action_id for score in scores)
    doubled = sum(1 for action in actions if counts[action.id] > 1)
    if doubled:
        raise ValueError(f"{doubled} actions have more than one coach score; re-run the score stage")
    by_id = {score.action_id: score for score in scores}
    missing = sum(1 for action in actions if action.id not in by_id)
    if missing:
        raise ValueError(f"{missing} actions have no coach score; re-run the score stage of this iteration")
    return [by_id[action.id] for action in actions]


def compute_experiences(
    actions: Sequence[Action],
    scores: Sequence[ActionScore],
    old: Sequence[Sequence[float]],
    ref: Sequence[Sequence[float]],
    *,
    beta: float,
    kl_estimator: str = "k1",
    reward_scale: float = 0.1,
    reward_clip: float = 10.0,
    whiten_groups: Sequence[str] | None = None,
    baseline: BaselineEstimator | None = None,
) -> list[Experience]:
    """One `Experience` per action (`scores[i]` the score of `actions[i]`; `old[i]` and `ref[i]` its
    old and reference logprobs, one per response token). `whiten_groups` are each row's whitening group
    (None: all together); `baseline` estimates what is subtracted from each score (None: nothing)."""
    if not len(actions) == len(scores) == len(old) == len(ref):
        raise ValueError(
            f"{len(actions)} actions but {len(scores)} scores, {len(old)} old and {len(ref)} reference rows"
        )
    old_t, mask = pad_sequences(old)  # (B, T)
    ref_t, _ = pad_sequences(ref)  # (B, T)
    scores_t = torch.tensor([float(score.score) for score in scores])  # (B,)
    scored = torch.tensor([score.parse_status != UNSCORED for score in scores], dtype=torch.bool)  # (B,)
    out = compute_reinforce_pp_advantages(
        old_t,
        ref_t,
        scores_t,
        mask,
        beta=beta,
        kl_estimator=kl_estimator,
        reward_scale=reward_scale,
        reward_clip=reward_clip,
        groups=whiten_groups,
        scored=scored,
        baseline=None if baseline is None else baseline.estimate(scores_t, scored, actions),
    )
    lengths = mask.sum(dim=1).long().tolist()

    def row(name: str, i: int) -> tuple[float, ...]:
        return tuple(out[name][i, : lengths[i]].tolist())

    return [
        Experience(
            action_id=action.id,
            agent=action.agent,
            prompt_token_ids=action.prompt_token_ids,
            response_token_ids=action.response_token_ids,
            old_logprobs=tuple(float(x) for x in old[i]),
            ref_logprobs=tuple(float(x) for x in ref[i]),
            kl=row("kl", i),
            rewards=row("rewards", i),
            returns=row("returns", i),
            advantages=row("advantages", i),
            score=float(score.score),
        )
        for i, (action, score) in enumerate(zip(actions, scores, strict=True))
    ]
