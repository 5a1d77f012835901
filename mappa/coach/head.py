"""A learning coach's head: P(Yes) read from the coach model's features by a linear map that learns.

The criteria coach reads each yes/no question's answer as P(Yes) / (P(Yes) + P(No)), and that is
sigmoid(d . h + c): h the model's features where it reads its answer's first token (the output layer's
input, `HFEngine.grouped_answer_features`), d and c the output layer's Yes row and bias less its No row
(`HFEngine.answer_direction`). An `AnswerHead` holds such a (w, b). It starts at (d, c), so before it learns
the learning coach scores exactly as the criteria coach does, and then moves by what the run shows
(`train_head`):

    pairs     an action and a counterfactual of it (the same action with one of the env's corruptions,
              replayed: `mappa.stages.coach_update`); the original should score higher. Loss per pair:
              softplus(-(u_original - u_corrupted)), Bradley-Terry on the action's log-odds
              u = mean over its questions of (w . h + b), negated for a `(no)` question
    anchor    anchor / 2 * s * (|w - w0|^2 + (b - b0)^2), w0, b0 the head the update started from and s
              the mean over pairs of |x|^2, x the difference of the two actions' (features, 1): so
              `anchor` does not depend on the model's feature scale, and at anchor 1 pairs that agree
              move their margins by about half a unit of log-odds, not anywhere. (Scaled by |h|^2
              instead, a first try on Qwen's features barely moved: an action and its corruption read
              almost the same features, |x| << |h|.)

The objective is convex; L-BFGS (float64) minimises it, so the same pairs give the same head (a resumed
stage writes the same weights). `version`, a hash of the numbers, names the head in the scores it gives
(`LearnedCriteriaCoach.model_name`) and in the score stage's manifest.

Not covered: heads over several layers' features, a head per seat (one head serves every seat's questions).
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AnswerHead:
    """log-odds of Yes = weight . features + bias."""

    weight: tuple[float, ...]
    bias: float

    @property
    def version(self) -> str:
        """12 hex digits of a SHA-256 over the head's numbers (float64): equal heads, equal versions."""
        blob = struct.pack(f"<{len(self.weight) + 1}d", *self.weight, self.bias)
        return hashlib.sha256(blob).hexdigest()[:12]

    def log_odds(self, features: Sequence[float]) -> float:
        if len(features) != len(self.weight):
            raise ValueError(
                f"the coach's features have {len(features)} numbers, its head {len(self.weight)}: the head "
                "was learned on another coach model"
            )
        return math.fsum(w * x for w, x in zip(self.weight, features)) + self.bias

    def p_yes(self, features: Sequence[float]) -> float:
        z = self.log_odds(features)
        return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))

    def to_record(self) -> dict[str, Any]:
        return {"version": self.version, "bias": self.bias, "weight": list(self.weight)}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> AnswerHead:
        head = cls(tuple(float(x) for x in record["weight"]), float(record["bias"]))
        if record.get("version") not in (None, head.version):
            raise ValueError(
                f"a coach head's numbers do not match its version {record['version']}: rewritten?"
            )
        return head


@dataclass(frozen=True)
class Pair:
    """One action and its corruption, each as the features of its seat's questions (in the same order)."""

    seat: str
    original: tuple[tuple[float, ...], ...]
    corrupted: tuple[tuple[float, ...], ...]
    wants_no: tuple[bool, ...]
    """Per question: its good answer is No (its log-odds count negated)."""
    corruption: str = ""


def action_log_odds(head: AnswerHead, features: Sequence[Sequence[float]], wants_no: Sequence[bool]) -> float:
    """u: the mean over an action's questions of the head's log-odds, negated for a `(no)` question."""
    values = [-head.log_odds(h) if no else head.log_odds(h) for h, no in zip(features, wants_no, strict=True)]
    return sum(values) / len(values)


def pair_accuracy(head: AnswerHead, pairs: Sequence[Pair]) -> float | None:
    """The share of pairs whose original the head scores above its corruption (a tie counts half)."""
    if not pairs:
        return None
    wins = 0.0
    for pair in pairs:
        margin = action_log_odds(head, pair.original, pair.wants_no) - action_log_odds(
            head, pair.corrupted, pair.wants_no
        )
        wins += 1.0 if margin > 0 else 0.5 if margin == 0 else 0.0
    return wins / len(pairs)


def train_head(
    head: AnswerHead, pairs: Sequence[Pair], anchor: float, max_steps: int = 200
) -> tuple[AnswerHead, dict[str, float]]:
    """The head that minimises the pairs' Bradley-Terry loss plus the anchor to `head` (module docstring),
    and the loss before and after. No pairs: `head` itself."""
    import torch

    if not pairs:
        return head, {"loss_before": float("nan"), "loss_after": float("nan")}
    start = torch.tensor([*head.weight, head.bias], dtype=torch.float64)
    # per pair, the mean over its questions of the signed (features, 1): u = theta . x
    originals = torch.stack([_signed_mean(p.original, p.wants_no) for p in pairs])  # (P, D + 1)
    corrupted = torch.stack([_signed_mean(p.corrupted, p.wants_no) for p in pairs])
    difference = originals - corrupted
    scale = max(float(difference.pow(2).sum(-1).mean()), 1e-12)

    def objective(theta: torch.Tensor) -> torch.Tensor:
        fit = torch.nn.functional.softplus(-(difference @ theta)).mean()
        return fit + anchor / 2 * scale * (theta - start).pow(2).sum()

    theta = start.clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=max_steps,
        tolerance_grad=1e-10,
        tolerance_change=1e-12,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = objective(theta)
        loss.backward()
        return loss

    with torch.no_grad():
        before = float(torch.nn.functional.softplus(-(difference @ start)).mean())
    optimizer.step(closure)
    with torch.no_grad():
        after = float(torch.nn.functional.softplus(-(difference @ theta)).mean())
    values = theta.detach().tolist()
    return AnswerHead(tuple(values[:-1]), values[-1]), {"loss_before": before, "loss_after": after}


def _signed_mean(features: Sequence[Sequence[float]], wants_no: Sequence[bool]):
    """The mean over questions of (h, 1), negated for a `(no)` question: the action's u is theta . this."""
    import torch

    rows = torch.tensor([[*h, 1.0] for h in features], dtype=torch.float64)
    signs = torch.tensor([-1.0 if no else 1.0 for no in wants_no], dtype=torch.float64)
    return (rows * signs[:, None]).mean(0)
