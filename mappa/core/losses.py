"""The clipped policy-gradient loss of REINFORCE++ (PPO-style ratio clipping, Schulman et al. 2017).

    rho_t = exp(log pi(y_t) - log pi_old(y_t))
    loss  = token-mean over valid tokens of  -min(rho_t * A_t, clip(rho_t, 1 - eps, 1 + eps) * A_t)

The mean runs over all valid tokens of the (micro-)batch given; a trainer that accumulates gradients over
micro-batches weights each by its share of the batch's tokens (see `mappa.trainer`). No value function,
no entropy bonus; the KL to the reference is already in the rewards (`mappa.core.advantages`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PolicyLossOutput:
    loss: torch.Tensor  # scalar, differentiable
    clip_fraction: torch.Tensor  # scalar: share of valid tokens where the clipped term was the smaller
    approx_kl: torch.Tensor  # scalar: mean of (log pi_old - log pi) over valid tokens
    num_tokens: int


def compute_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float = 0.2,
) -> PolicyLossOutput:
    """Clipped surrogate loss, token-mean over valid tokens. All inputs (B, T)."""
    shapes = {tuple(t.shape) for t in (logprobs, old_logprobs, advantages, mask)}
    if len(shapes) != 1:
        raise ValueError(f"logprobs, old_logprobs, advantages and mask must share a shape, got {shapes}")
    mask = mask.to(logprobs.dtype)
    count = mask.sum().clamp(min=1.0)
    log_ratio = (logprobs - old_logprobs) * mask
    ratio = log_ratio.exp()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    loss = (per_token * mask).sum() / count
    with torch.no_grad():
        clip_fraction = ((clipped < unclipped).to(mask.dtype) * mask).sum() / count
        approx_kl = (-log_ratio * mask).sum() / count
    return PolicyLossOutput(loss, clip_fraction, approx_kl, int(mask.sum().item()))
