"""Response logprobs in padded micro-batches equal those of each sequence scored alone."""

import torch
from transformers import AutoModelForCausalLM

from mappa.trainer.logprobs import batch_response_logprobs, response_logprobs


def single(model, prompt, response):
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float().log_softmax(-1)
    return [logits[len(prompt) - 1 + j, t].item() for j, t in enumerate(response)]


def test_batched_logprobs_match_one_by_one(tiny_model):
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    prompts = [[5, 6, 7, 8, 9], [11], [12, 13, 14]]
    responses = [[20, 21], [22, 23, 24, 25], [26]]
    batched = response_logprobs(model, prompts, responses, pad_token_id=2, micro_batch_size=3)
    for prompt, response, got in zip(prompts, responses, batched):
        assert len(got) == len(response)
        assert torch.allclose(torch.tensor(got), torch.tensor(single(model, prompt, response)), atol=1e-4)


def test_mask_is_left_aligned_and_gradients_flow(tiny_model):
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    logprobs, mask = batch_response_logprobs(model, [[5, 6], [7]], [[8], [9, 10, 11]], pad_token_id=2)
    assert mask.tolist() == [[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    assert logprobs[0, 1:].abs().sum() == 0
    logprobs.sum().backward()
    assert model.model.embed_tokens.weight.grad is not None
