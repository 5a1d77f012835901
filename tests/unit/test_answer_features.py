"""The learning coach's view of a local model: the features its head reads and the Yes/No readout."""

import math

import pytest


def test_the_readout_of_the_features_is_the_models_yes_no_log_odds(tiny_model):
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
    features = engine.grouped_answer_features(groups)
    logprobs = engine.grouped_next_token_logprobs(groups, ["Yes", "No"])
    direction, bias = engine.answer_direction(["Yes", "No"])
    assert len(direction) == model.config.hidden_size
    for group_features, group_logprobs in zip(features, logprobs, strict=True):
        for h, (yes, no) in zip(group_features, group_logprobs, strict=True):
            log_odds = sum(d * x for d, x in zip(direction, h, strict=True)) + bias
            assert log_odds == pytest.approx(yes - no, abs=1e-4)
            assert 1 / (1 + math.exp(-log_odds)) == pytest.approx(
                math.exp(yes) / (math.exp(yes) + math.exp(no))
            )
