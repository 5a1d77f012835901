"""REINFORCE++ advantages from per-action coach scores (docs/architecture.md, "The algorithm").

For one action with response tokens y_1..y_T and coach score s in [0, 10]:

    R     = clip(reward_scale * s, -reward_clip, reward_clip)
    kl_t  = estimator(log pi_old(y_t), log pi_ref(y_t))     k1, k2 or k3 (Schulman, "Approximating KL")
    r_t   = -beta * kl_t + [t == T] * R                     reward on the last token
    G_t   = sum_{t' >= t} r_t'                              undiscounted return-to-go inside the action
    A_t   = (G_t - mean) / (std + 1e-8)                     mean/std over all valid tokens of the batch

Whitening scope `agent` normalises each agent's experiences separately (the authors' code, one trainer per
agent); `global` normalises all agents together. std is the population standard deviation over valid tokens.
This is REINFORCE++ (Hu, 2025). By default there is no per-prompt group baseline, because the intermediate
states of different samples differ. With a baseline b (`baseline`, one per action, from the estimator
`algo.baseline` names: `mappa.core.baselines`) s is replaced by s - b before the reward is formed; with
the sibling baseline (b = the mean score of the same agent's scored actions at the same turn of the samples
of one problem: REINFORCE++-baseline, as OpenRLHF's `reinforce_baseline`; AT-GRPO's per-(problem, turn,
agent) baseline) a group whose actions all score the same then teaches nothing, and whitening follows as
above.

An action the coach left unscored (its answer never held a parsable score, so a fallback score was recorded)
is no evidence about the action: with `scored` False its advantages are exactly 0 and its tokens stay out of
the whitening statistics, which are then the mean and std over the other actions' valid tokens of the same
scope (NeMo Gym likewise keeps failed judge calls out of training). Its KL, rewards and returns are computed
as for any action (they are recorded; they reach no gradient).

All functions take padded tensors of shape (B, T) with a 0/1 `mask` marking valid response tokens, which
must be left-aligned (valid tokens first, padding after). Pure torch; no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

WHITEN_EPS = 1e-8
DEGENERATE_STD = 1e-6


def compute_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "k1") -> torch.Tensor:
    """Per-token KL estimate between the sampling policy and the reference.  # (B, T) -> (B, T)

    k1 = log p - log q;  k2 = (log p - log q)^2 / 2;  k3 = exp(log q - log p) - 1 - (log q - log p).
    """
    log_ratio = logprobs - ref_logprobs
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio.pow(2)
    if estimator == "k3":
        neg = -log_ratio
        return neg.exp() - 1.0 - neg
    raise ValueError(f"unknown KL estimator {estimator!r}; use k1, k2 or k3")


def compute_token_rewards(
    kl: torch.Tensor,
    scores: torch.Tensor,
    mask: torch.Tensor,
    beta: float,
    reward_scale: float = 0.1,
    reward_clip: float = 10.0,
) -> torch.Tensor:
    """r_t = -beta * kl_t, plus the scaled, clipped coach reward on each row's last valid token.  # (B, T)"""
    _check_shapes(kl=kl, mask=mask)
    if scores.shape != (kl.shape[0],):
        raise ValueError(f"scores must have shape ({kl.shape[0]},), got {tuple(scores.shape)}")
    lengths = mask.sum(dim=1).long()
    if (lengths == 0).any():
        raise ValueError("every action needs at least one response token (found an empty row in mask)")
    rewards = -beta * kl * mask
    final = (reward_scale * scores.to(kl.dtype)).clamp(-reward_clip, reward_clip)
    rows = torch.arange(kl.shape[0])
    rewards[rows, lengths - 1] += final
    return rewards


def compute_returns(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Undiscounted return-to-go inside each action: G_t = sum_{t' >= t} r_t'.  # (B, T)"""
    _check_shapes(rewards=rewards, mask=mask)
    masked = rewards * mask
    return masked.flip(dims=[1]).cumsum(dim=1).flip(dims=[1]) * mask


def whiten(
    values: torch.Tensor,
    mask: torch.Tensor,
    groups: Sequence[str] | None = None,
    row_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """(x - mean) / (std + 1e-8) over valid tokens; per group of rows when `groups` is given.  # (B, T)

    `row_mask` (B,), 1 where a row counts: a row with 0 is left out of the mean and std and gets 0."""
    _check_shapes(values=values, mask=mask)
    if row_mask is not None:
        if row_mask.shape != (values.shape[0],):
            raise ValueError(f"row_mask must have shape ({values.shape[0]},), got {tuple(row_mask.shape)}")
        mask = mask * row_mask.to(mask.dtype).unsqueeze(1)
    if groups is None:
        return _whiten_rows(values, mask)
    if len(groups) != values.shape[0]:
        raise ValueError(f"groups has {len(groups)} entries for {values.shape[0]} rows")
    out = torch.zeros_like(values)
    for rows in group_rows(groups):
        out[rows] = _whiten_rows(values[rows], mask[rows])
    return out


def group_rows(groups: Sequence[Hashable]) -> list[torch.Tensor]:
    """One (B,) bool row mask per distinct group label, in sorted label order."""
    return [torch.tensor([g == group for g in groups]) for group in sorted(set(groups))]


def _whiten_rows(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Whitening in float64; a group whose values are all equal (std below 1e-6) gets zero advantages,
    which is the formula's exact value; in float32 its rounding error divided by 1e-8 would be noise."""
    count = mask.sum()
    if count == 0:
        return torch.zeros_like(values)
    x, m = values.double(), mask.double()
    mean = (x * m).sum() / count
    std = ((((x - mean) * m) ** 2).sum() / count).sqrt()
    if std < DEGENERATE_STD:
        return torch.zeros_like(values)
    return ((x - mean) / (std + WHITEN_EPS) * m).to(values.dtype)


def subtract_baseline(scores: torch.Tensor, baseline: torch.Tensor) -> torch.Tensor:
    """s - b, computed in float64.  # (B,), (B,) -> (B,)"""
    if scores.dim() != 1 or baseline.shape != scores.shape:
        raise ValueError(f"baseline has shape {tuple(baseline.shape)} for scores {tuple(scores.shape)}")
    return (scores.double() - baseline.double()).to(scores.dtype)


def compute_reinforce_pp_advantages(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    scores: torch.Tensor,
    mask: torch.Tensor,
    *,
    beta: float,
    kl_estimator: str = "k1",
    reward_scale: float = 0.1,
    reward_clip: float = 10.0,
    groups: Sequence[str] | None = None,
    scored: torch.Tensor | None = None,
    baseline: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The whole chain: KL, token rewards, returns and whitened advantages (all (B, T), zero on padding).

    `groups` gives each row's whitening group (agent names for scope `agent`, None for `global`); `scored`
    (B,) bool, False for an action the coach left unscored: zero advantages, out of the whitening;
    `baseline` (B,) (None: no baseline) each row's baseline, subtracted from its score first.
    """
    if baseline is not None:
        scores = subtract_baseline(scores, baseline)
    kl = compute_kl(logprobs, ref_logprobs, kl_estimator) * mask
    rewards = compute_token_rewards(kl, scores, mask, beta, reward_scale, reward_clip)
    returns = compute_returns(rewards, mask)
    advantages = whiten(returns, mask, groups, row_mask=scored)
    return {"kl": kl, "rewards": rewards, "returns": returns, "advantages": advantages}


def pad_sequences(
    rows: Sequence[Sequence[float]], dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-aligned padding of ragged rows into (values, mask), both (B, T)."""
    width = max((len(r) for r in rows), default=0)
    values = torch.zeros(len(rows), width, dtype=dtype)
    mask = torch.zeros(len(rows), width, dtype=dtype)
    for i, row in enumerate(rows):
        if len(row):
            values[i, : len(row)] = torch.as_tensor(list(row), dtype=dtype)
            mask[i, : len(row)] = 1.0
    return values, mask


def _check_shapes(**tensors: torch.Tensor) -> None:
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) != 1 or any(len(s) != 2 for s in shapes.values()):
        raise ValueError(f"expected equal (B, T) shapes, got {shapes}")
