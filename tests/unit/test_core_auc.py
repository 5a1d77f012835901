"""`mappa.core.auc`: the Mann-Whitney AUC on scores small enough to count the pairs by hand."""

import numpy as np
import pytest

from mappa.core.auc import auc, average_ranks


def test_tied_values_share_their_mean_rank():
    assert average_ranks(np.array([3.0, 1.0, 3.0, 2.0, 3.0])).tolist() == [4.0, 1.0, 4.0, 2.0, 4.0]
    assert average_ranks(np.array([5.0])).tolist() == [1.0]


def test_auc_counts_the_pairs_a_positive_wins_and_ties_half():
    # positives 7, 5; negatives 5, 2, 1: pairs (7,5) (7,2) (7,1) (5,2) (5,1) won, (5,5) tied -> 5.5 / 6
    assert auc([7, 5, 5, 2, 1], [True, True, False, False, False]) == pytest.approx(5.5 / 6)
    assert auc([1, 2, 9], [False, False, True]) == 1.0
    assert auc([9, 2, 1], [False, False, True]) == 0.0
    assert auc([4, 4, 4, 4], [True, False, True, False]) == 0.5


def test_auc_needs_both_groups_and_aligned_labels():
    assert auc([1.0, 2.0], [True, True]) is None
    assert auc([], []) is None
    with pytest.raises(ValueError, match="one label per score"):
        auc([1.0, 2.0], [True])
    with pytest.raises(ValueError, match="leave unscored actions out"):
        auc([1.0, float("nan")], [True, False])
