"""REINFORCE++ advantages and the clipped loss against values computed by hand."""

import math

import pytest
import torch

from mappa.core.advantages import (
    compute_kl,
    compute_reinforce_pp_advantages,
    compute_returns,
    compute_token_rewards,
    pad_sequences,
    subtract_baseline,
    whiten,
)
from mappa.core.baselines import group_mean_baseline
from mappa.core.losses import compute_policy_loss

OLD = torch.tensor([[-1.0, -2.0, -0.5]])
REF = torch.tensor([[-1.5, -2.0, -1.0]])
MASK = torch.ones(1, 3)


def test_kl_estimators_by_hand():
    assert torch.allclose(compute_kl(OLD, REF, "k1"), torch.tensor([[0.5, 0.0, 0.5]]))
    assert torch.allclose(compute_kl(OLD, REF, "k2"), torch.tensor([[0.125, 0.0, 0.125]]))
    k3 = math.exp(-0.5) - 1 + 0.5
    assert torch.allclose(compute_kl(OLD, REF, "k3"), torch.tensor([[k3, 0.0, k3]]))
    with pytest.raises(ValueError, match="k4"):
        compute_kl(OLD, REF, "k4")


def test_reward_on_last_token_and_return_to_go():
    kl = compute_kl(OLD, REF, "k1")
    rewards = compute_token_rewards(kl, torch.tensor([7.0]), MASK, beta=0.1, reward_scale=0.1)
    assert torch.allclose(rewards, torch.tensor([[-0.05, 0.0, 0.65]]))
    assert torch.allclose(compute_returns(rewards, MASK), torch.tensor([[0.6, 0.65, 0.65]]))


def test_reward_goes_on_last_valid_token_of_padded_rows():
    kl = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    rewards = compute_token_rewards(kl, torch.tensor([10.0, 2.0]), mask, beta=0.01)
    assert torch.allclose(rewards, torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.2]]))
    returns = compute_returns(rewards, mask)
    assert torch.allclose(returns, torch.tensor([[1.0, 1.0, 0.0], [0.2, 0.2, 0.2]]))


def test_reward_clip():
    rewards = compute_token_rewards(torch.zeros(1, 1), torch.tensor([10.0]), torch.ones(1, 1), 0.0, 5.0, 2.0)
    assert rewards.item() == pytest.approx(2.0)


def test_whiten_population_std_over_valid_tokens():
    values = torch.tensor([[0.6, 0.65, 0.65, 99.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    out = whiten(values, mask)
    assert torch.allclose(
        out, torch.tensor([[-math.sqrt(2), 1 / math.sqrt(2), 1 / math.sqrt(2), 0.0]]), atol=1e-4
    )


def test_whiten_scope_agent_vs_global():
    values = torch.tensor([[1.0, 3.0], [10.0, 30.0]])
    mask = torch.ones(2, 2)
    per_agent = whiten(values, mask, groups=["a", "b"])
    assert torch.allclose(per_agent, torch.tensor([[-1.0, 1.0], [-1.0, 1.0]]), atol=1e-6)
    glob = whiten(values, mask)
    mean, std = 11.0, math.sqrt(((1 - 11) ** 2 + (3 - 11) ** 2 + (10 - 11) ** 2 + (30 - 11) ** 2) / 4)
    assert torch.allclose(glob, (values - mean) / std, atol=1e-5)


def test_full_chain_matches_hand_values():
    out = compute_reinforce_pp_advantages(OLD, REF, torch.tensor([7.0]), MASK, beta=0.1)
    assert torch.allclose(out["returns"], torch.tensor([[0.6, 0.65, 0.65]]))
    expected = torch.tensor([[-math.sqrt(2), 1 / math.sqrt(2), 1 / math.sqrt(2)]])
    assert torch.allclose(out["advantages"], expected, atol=1e-4)


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match="shapes"):
        compute_returns(torch.zeros(2, 3), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="empty row"):
        compute_token_rewards(torch.zeros(1, 2), torch.tensor([1.0]), torch.zeros(1, 2), 0.1)


def test_pad_sequences_left_aligned():
    values, mask = pad_sequences([[1.0, 2.0], [3.0]])
    assert values.tolist() == [[1.0, 2.0], [3.0, 0.0]]
    assert mask.tolist() == [[1.0, 1.0], [1.0, 0.0]]


def test_clipped_loss_by_hand():
    logp = torch.tensor([[-1.0, -1.0, -1.0]])
    old = torch.tensor([[-1.0, -1.5, -1.5]])
    adv = torch.tensor([[1.0, -1.0, 1.0]])
    out = compute_policy_loss(logp, old, adv, torch.ones(1, 3), clip_eps=0.2)
    rho = math.exp(0.5)
    # token 1: rho 1 -> -1; token 2: A<0, min(-rho, -1.2) = -rho -> +rho; token 3: A>0, min(rho, 1.2) -> -1.2
    assert out.loss.item() == pytest.approx((-1.0 + rho - 1.2) / 3, rel=1e-5)
    assert out.clip_fraction.item() == pytest.approx(1 / 3)
    assert out.num_tokens == 3


def test_loss_ignores_padding_and_has_gradient():
    logp = torch.tensor([[-1.0, -5.0]], requires_grad=True)
    out = compute_policy_loss(logp, logp.detach(), torch.tensor([[2.0, 100.0]]), torch.tensor([[1.0, 0.0]]))
    out.loss.backward()
    assert out.loss.item() == pytest.approx(-2.0)
    assert logp.grad.tolist() == [[-2.0, 0.0]]


def test_whiten_of_equal_values_is_exactly_zero():
    values = torch.full((3, 4), 0.4)
    assert torch.equal(whiten(values, torch.ones(3, 4)), torch.zeros(3, 4))
    out = compute_reinforce_pp_advantages(
        torch.zeros(2, 3), torch.zeros(2, 3), torch.tensor([4.0, 4.0]), torch.ones(2, 3), beta=0.01
    )
    assert torch.equal(out["advantages"], torch.zeros(2, 3))


# --- unscored actions (the coach gave no parsable score): zero advantage, out of the statistics ----------


def test_a_masked_row_gets_zero_and_stays_out_of_global_statistics():
    values = torch.tensor([[1.0, 3.0], [10.0, 30.0], [1000.0, -1000.0]])
    out = whiten(values, torch.ones(3, 2), row_mask=torch.tensor([1.0, 1.0, 0.0]))
    mean, std = 11.0, math.sqrt((100 + 64 + 1 + 361) / 4)  # over 1, 3, 10, 30 only
    assert torch.allclose(out[:2], (values[:2] - mean) / std, atol=1e-6)
    assert torch.equal(out[2], torch.zeros(2))


def test_a_masked_row_stays_out_of_its_own_agents_statistics_only():
    values = torch.tensor([[1.0, 3.0], [10.0, 30.0], [7.0, 0.0], [5.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    out = whiten(values, mask, groups=["a", "b", "a", "b"], row_mask=torch.tensor([1, 1, 0, 1]))
    assert torch.allclose(out[0], torch.tensor([-1.0, 1.0]), atol=1e-6)  # agent a: row 0 alone, mean 2, std 1
    b_mean = (10 + 30 + 5 + 9) / 4  # 13.5; agent b unchanged by a's masked row
    b_std = math.sqrt(((10 - b_mean) ** 2 + (30 - b_mean) ** 2 + (5 - b_mean) ** 2 + (9 - b_mean) ** 2) / 4)
    assert torch.allclose(out[[1, 3]], (values[[1, 3]] - b_mean) / b_std, atol=1e-6)
    assert torch.equal(out[2], torch.zeros(2))


def test_an_agent_whose_actions_are_all_masked_gets_zero_advantages():
    values = torch.tensor([[1.0, 2.0], [4.0, 8.0], [3.0, 6.0]])
    out = whiten(values, torch.ones(3, 2), groups=["a", "b", "b"], row_mask=torch.tensor([0, 1, 1]))
    assert torch.equal(out[0], torch.zeros(2))
    assert torch.count_nonzero(out[1:]) == 4
    with pytest.raises(ValueError, match="row_mask"):
        whiten(values, torch.ones(3, 2), row_mask=torch.ones(2))


def test_full_chain_masks_unscored_actions_but_keeps_their_returns():
    # two one-token actions, no KL: returns are 0.1 * score; the fallback one (score 5) is masked
    old = torch.zeros(3, 1)
    scores = torch.tensor([2.0, 5.0, 8.0])
    out = compute_reinforce_pp_advantages(
        old, old, scores, torch.ones(3, 1), beta=0.01, scored=torch.tensor([True, False, True])
    )
    assert torch.allclose(out["returns"], torch.tensor([[0.2], [0.5], [0.8]]))
    # mean 0.5 and std 0.3 over the two scored actions: advantages -1 and +1
    assert torch.allclose(out["advantages"], torch.tensor([[-1.0], [0.0], [1.0]]), atol=1e-6)
    assert out["advantages"][1].item() == 0.0


def test_sibling_baseline_subtracts_the_scored_mean_of_each_group():
    scores = torch.tensor([2.0, 6.0, 9.0, 3.0, 5.0])
    groups = ["p1/solver/0", "p1/solver/0", "p1/solver/0", "p2/solver/0", "p2/solver/0"]
    scored = torch.tensor([True, True, False, True, True])
    # p1: the mean of 2 and 6 (9 is unscored) is 4; p2: the mean of 3 and 5 is 4
    out = subtract_baseline(scores, group_mean_baseline(scores, groups, scored))
    assert torch.allclose(out, torch.tensor([-2.0, 2.0, 5.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="baseline groups"):
        group_mean_baseline(scores, groups[:2])
    # a group with no scored action keeps its scores (its baseline is 0)
    none_scored_in_p2 = torch.tensor([True, True, True, False, False])
    assert group_mean_baseline(scores, groups, none_scored_in_p2)[3:].tolist() == [0.0, 0.0]


def test_full_chain_with_siblings_gives_a_group_of_equal_scores_no_advantage():
    # one-token actions, no KL. Problem a: scores 0, 0 (all wrong, as outcome-only would say); problem b:
    # 10 and 0. After the baseline: 0, 0, +5, -5; returns 0.1 times that; whitened over the four rows
    # (mean 0, population std 0.5 / sqrt(2)): 0, 0, +sqrt(2), -sqrt(2)
    old = torch.zeros(4, 1)
    scores = torch.tensor([0.0, 0.0, 10.0, 0.0])
    out = compute_reinforce_pp_advantages(
        old,
        old,
        scores,
        torch.ones(4, 1),
        beta=0.01,
        baseline=group_mean_baseline(scores, ["a/v/0", "a/v/0", "b/v/0", "b/v/0"]),
    )
    assert torch.allclose(out["returns"], torch.tensor([[0.0], [0.0], [0.5], [-0.5]]))
    root2 = math.sqrt(2.0)
    assert torch.allclose(out["advantages"], torch.tensor([[0.0], [0.0], [root2], [-root2]]), atol=1e-6)
