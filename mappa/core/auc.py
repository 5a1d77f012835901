"""How well scores separate two groups: the area under the ROC curve, as the Mann-Whitney statistic.

    AUC = P(score of a positive > score of a negative) + 0.5 * P(equal)
        = (sum of the positives' ranks - n_pos (n_pos + 1) / 2) / (n_pos * n_neg)

with average ranks over all scores, so a tie counts half (Mann and Whitney, 1947; Hanley and McNeil, 1982,
"The meaning and use of the area under a ROC curve"). 1: every positive scores above every negative; 0.5:
no better than chance; 0: every positive below. None where one group is empty (no pair to compare).

Not covered: confidence intervals (report n of each group beside the AUC), weights per score.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of `values`, tied values sharing the mean of their ranks.  # (N,) -> (N,)"""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # first position of each value
    ends = np.r_[starts[1:], len(values)]
    mean_rank = (starts + ends + 1) / 2.0  # ranks starts+1 .. ends, averaged
    ranks = np.empty(len(values), dtype=float)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def auc(scores: Sequence[float] | np.ndarray, positive: Sequence[bool] | np.ndarray) -> float | None:
    """P(a positive's score > a negative's), ties counting half; None when either group is empty."""
    values = np.asarray(scores, dtype=float)
    labels = np.asarray(positive, dtype=bool)
    if values.shape != labels.shape or values.ndim != 1:
        raise ValueError(f"auc: {values.shape} scores, {labels.shape} labels; give one label per score")
    if np.isnan(values).any():
        raise ValueError("auc: a score is NaN; leave unscored actions out before computing the AUC")
    n_pos = int(labels.sum())
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = average_ranks(values)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
