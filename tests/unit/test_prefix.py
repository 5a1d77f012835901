"""A batch's common prefix run once (`mappa.inference.prefix`): the same logprobs, gradients and samples as
the plain left-padded batch, with the prefix computed on one row."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from mappa.inference import prefix as prefixes
from mappa.inference.decode import decode
from mappa.trainer.logprobs import batch_response_logprobs

SYSTEM = list(range(100, 130))  # 30 tokens every prompt starts with, as an agent's system prompt
PROMPTS = [SYSTEM + [7, 8, 9], SYSTEM + [11], SYSTEM + list(range(40, 57)), SYSTEM + [60, 61]]
RESPONSES = [[20, 21, 22, 23, 24], [25, 26], list(range(300, 308)), [27, 28, 29, 30]]


@pytest.fixture(scope="module")
def model(tiny_model):
    return AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)


def test_common_prefix_leaves_each_row_a_token_of_its_own_and_obeys_the_limit():
    assert prefixes.common_prefix_length([[1, 2, 3], [1, 2, 3]]) == 2
    assert prefixes.common_prefix_length([[1, 2, 3, 4], [1, 2, 5]]) == 2
    assert prefixes.common_prefix_length([[1, 2, 3, 4], [1, 2, 3, 4, 5]], limit=1) == 1
    assert prefixes.common_prefix_length([[9, 2], [1, 2]]) == 0


def test_shared_prefix_gives_the_plain_batch_logprobs_and_gradients(model):
    results = {}
    for share in (False, True):
        model.zero_grad()
        logprobs, mask = batch_response_logprobs(model, PROMPTS, RESPONSES, 2, share_prefix=share)
        (logprobs * mask).sum().backward()
        results[share] = logprobs.detach(), mask, [p.grad.clone() for p in model.parameters()]
    (shared, shared_mask, shared_grads), (plain, plain_mask, plain_grads) = results[True], results[False]
    assert torch.equal(shared_mask, plain_mask)
    assert torch.allclose(shared, plain, atol=1e-5)
    for a, b in zip(shared_grads, plain_grads, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_the_prefix_runs_once_on_one_row_and_never_holds_a_prompts_last_token(model):
    widths = []
    hook = model.register_forward_pre_hook(
        lambda module, args, kwargs: widths.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    try:
        batch_response_logprobs(model, PROMPTS, RESPONSES, 2)
        prompts = [SYSTEM + [1], SYSTEM + [1]]  # equal prompts: the shared part stops before their end
        batch_response_logprobs(model, prompts, [[5, 6], [5, 7]], 2)
    finally:
        hook.remove()
    assert widths[0] == (1, len(SYSTEM)) and widths[1][0] == len(PROMPTS)
    assert widths[2] == (1, len(SYSTEM)), "the prompt's last token stays with its row"


def test_decoding_with_the_shared_prefix_samples_the_same_tokens(model, monkeypatch):
    rows = [SYSTEM + [5, 6, 7, 8], SYSTEM + [11], SYSTEM + [13, 14, 15]]

    def stopped(row, tokens):  # rows end after 2, 4 and 6 tokens: the batch shrinks twice
        return len(tokens) == (2, 4, 6)[row]

    def run():
        torch.manual_seed(0)
        return decode(model.eval(), rows, 6, 0.8, 1.0, 0, set(), stopped)

    shared = run()
    monkeypatch.setattr(prefixes, "MIN_SHARED", 10**9)
    plain = run()
    assert [r[0] for r in shared] == [r[0] for r in plain]
    assert [len(r[0]) for r in shared] == [2, 4, 6]
    for (_, a, _), (_, b, _) in zip(shared, plain):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-5)


def test_next_token_logprobs_read_past_the_shared_prefix(tiny_model, monkeypatch):
    """The coach's batches (`HFEngine.next_token_logprobs`, several positions per prompt) share the system
    prompt and read the same numbers as without it."""
    from transformers import AutoTokenizer

    from mappa.inference.hf import HFEngine

    engine = HFEngine(
        AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32),
        AutoTokenizer.from_pretrained(tiny_model),
        bf16_autocast=False,  # an equivalence to 1e-5: fp32 (where `auto` turns bf16 on, they differ by 4e-4)
    )
    system = "You answer questions about a short text with Yes or No only. " * 3
    prompts = [system + tail for tail in ("Is 3 odd?", "Is 4 a prime number?", "Yes?")]
    shared = engine.next_token_logprobs(prompts, ["Yes", "No"], positions=3)
    monkeypatch.setattr(prefixes, "MIN_SHARED", 10**9)
    plain = engine.next_token_logprobs(prompts, ["Yes", "No"], positions=3)
    assert torch.allclose(torch.tensor(shared), torch.tensor(plain), atol=1e-5)
