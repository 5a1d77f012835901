"""The expected-score coach: p(0..10) from score-token logprobs, and its request/score alignment."""

import asyncio
import math

import pytest

from mappa.coach.expected import SCORE_PREFIX, ExpectedScoreCoach, score_distribution
from mappa.coach.prompt import CoachRequest


def test_distribution_splits_one_into_one_and_ten():
    digits = [math.log(p) if p else -1e9 for p in [0.1, 0.4, 0.0001, 0.1, 0.1, 0.1, 0.0999, 0.0, 0.1, 0.0]]
    dist = score_distribution(digits, math.log(0.25))  # "0" follows "1" a quarter of the time
    assert len(dist) == 11
    assert sum(dist) == pytest.approx(1.0)
    assert dist[10] == pytest.approx(0.1)
    assert dist[1] == pytest.approx(0.3)


def test_scores_are_expected_values_in_order():
    seen = []

    async def logprob_fn(chats, prefix, candidates, positions):
        seen.append((prefix, candidates, positions))
        rows = []
        for chat in chats:
            favourite = int(chat[-1]["content"])
            digits = [0.0 if d == favourite else -50.0 for d in range(10)]
            rows.append([digits, [-50.0]])
        return rows

    requests = [
        CoachRequest(f"t/{i}", "t", "solver", [{"role": "user", "content": str(i)}], False) for i in (7, 2)
    ]
    scores = asyncio.run(ExpectedScoreCoach(logprob_fn, "m").score(requests))
    assert [s.action_id for s in scores] == ["t/7", "t/2"]
    assert [s.score for s in scores] == [pytest.approx(7.0), pytest.approx(2.0)]
    assert scores[0].coach_model == "m:expected" and scores[0].parse_status == "ok"
    assert seen == [(SCORE_PREFIX + "1", [str(d) for d in range(10)], 2)]


def test_engine_next_token_logprobs_on_tiny_model(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mappa.inference.hf import HFEngine

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    engine = HFEngine(model, tokenizer, bf16_autocast=False)
    prompts = ["Score: 1", "A much longer prompt, with padding needed. Score: 1"]
    out = engine.next_token_logprobs(prompts, ["0", "5"], positions=2)
    assert len(out) == 2 and len(out[0]) == 2 and len(out[0][0]) == 2
    ids = tokenizer(prompts[1], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        alone = model(input_ids=torch.tensor([ids])).logits[0, -1].log_softmax(-1)
    zero = tokenizer.convert_tokens_to_ids("0")
    assert out[1][1][0] == pytest.approx(alone[zero].item(), abs=1e-4)
    with pytest.raises(ValueError, match="single tokens"):
        engine.next_token_logprobs(prompts, ["hello world"])


def test_grouped_logprobs_reuse_the_shared_prefix_and_equal_the_whole_prompts(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mappa.inference.hf import HFEngine

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    engine = HFEngine(model, tokenizer, bf16_autocast=False)
    context = "A long shared context about an action and its tool output. " * 6
    groups = [
        [context + "QUESTION: Did it run?", context + "QUESTION: Is the printed number the right answer?"],
        ["Short alone"],
        ["x", "y z"],  # no shared token: one padded batch
    ]
    grouped = engine.grouped_next_token_logprobs(groups, ["Yes", "No"])
    for group, answers in zip(groups, grouped):
        whole = engine.next_token_logprobs(group, ["Yes", "No"], positions=1)
        assert [a for a in answers] == [pytest.approx(w[0], abs=1e-4) for w in whole]
