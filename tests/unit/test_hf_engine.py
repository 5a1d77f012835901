"""The HF engine on the tiny model: aligned logprobs, greedy determinism, stop strings, weight updates."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from mappa.inference.engine import SamplingParams
from mappa.inference.hf import HFEngine
from mappa.trainer.logprobs import response_logprobs


@pytest.fixture(scope="module")
def engine(tiny_model):
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    return HFEngine(model, AutoTokenizer.from_pretrained(tiny_model), batch_size=2, bf16_autocast=False)


PROMPTS = ["<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "Count: one two", "x"]


def test_generate_returns_one_aligned_generation_per_prompt(engine):
    out = engine.generate(PROMPTS, SamplingParams(temperature=1.0, max_new_tokens=6, seed=1))
    assert len(out) == 3
    for prompt, gen in zip(PROMPTS, out):
        assert list(gen.prompt_token_ids) == engine.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert 1 <= len(gen.token_ids) <= 6
        assert len(gen.logprobs) == len(gen.token_ids)
        assert all(lp <= 0 for lp in gen.logprobs)
        assert gen.finish_reason in {"stop", "length"}


def test_sampling_logprobs_match_a_recompute(engine):
    """The HF engine on the trainer's fp32 weights samples with the trainer's own logprobs: what lets
    `algo.old_logprobs: auto` skip the recompute (`AlgoConfig.resolved_old_logprobs`)."""
    gens = engine.generate(PROMPTS, SamplingParams(temperature=0.7, max_new_tokens=5, seed=3))
    recomputed = response_logprobs(
        engine.model,
        [g.prompt_token_ids for g in gens],
        [g.token_ids for g in gens],
        engine.tokenizer.pad_token_id,
    )
    for gen, again in zip(gens, recomputed):
        assert torch.allclose(torch.tensor(gen.logprobs), torch.tensor(again), atol=1e-5)


def test_greedy_is_deterministic_and_batch_independent(engine):
    params = SamplingParams(temperature=0.0, max_new_tokens=5)
    together = engine.generate(PROMPTS, params)
    alone = [engine.generate([p], params)[0] for p in PROMPTS]
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]


def test_stop_string_cuts_the_generation(engine):
    params = SamplingParams(temperature=0.0, max_new_tokens=8)
    free = engine.generate(["Count: one two"], params)[0]
    assert len(free.token_ids) >= 3
    stop = engine.tokenizer.decode(free.token_ids[1:2])
    cut = engine.generate(
        ["Count: one two"], SamplingParams(temperature=0.0, max_new_tokens=8, stop=(stop,))
    )[0]
    assert cut.finish_reason == "stop"
    assert stop in cut.text
    assert len(cut.token_ids) <= 2


def test_update_weights_changes_the_output(tiny_model):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    engine = HFEngine(model, tokenizer, bf16_autocast=False)
    params = SamplingParams(temperature=0.0, max_new_tokens=4)
    before = engine.generate(["Count: one two"], params)[0].token_ids
    other = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    torch.manual_seed(5)
    new_state = {k: v + 0.5 * torch.randn_like(v) for k, v in other.state_dict().items()}
    engine.update_weights(new_state)
    assert engine.generate(["Count: one two"], params)[0].token_ids != before


def test_cpu_gqa_attention_gives_the_same_logits_and_gradients(tiny_model):
    """`enable_cpu_gqa` hands grouped-query attention to SDPA with a padding mask: same numbers, forward
    and backward, as transformers' own path (which repeats the key and value heads)."""
    from transformers.integrations import sdpa_attention

    from mappa.inference import decode

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    assert model.config.num_attention_heads != model.config.num_key_value_heads  # grouped-query attention
    input_ids = torch.tensor([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]])
    attention = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])

    def logits_and_grads():
        model.zero_grad()
        logits = model(input_ids=input_ids, attention_mask=attention).logits
        (logits[attention.bool()].logsumexp(-1).sum()).backward()
        return logits.detach(), [p.grad.clone() for p in model.parameters()]

    decode.enable_cpu_gqa()
    patched = sdpa_attention.use_gqa_in_sdpa
    fast, fast_grads = logits_and_grads()
    sdpa_attention.use_gqa_in_sdpa = lambda mask, key, value: False  # repeat the heads, as by default
    try:
        slow, slow_grads = logits_and_grads()
    finally:
        sdpa_attention.use_gqa_in_sdpa = patched
    assert torch.allclose(fast[attention.bool()], slow[attention.bool()], atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(fast_grads, slow_grads))


def test_nucleus_sampling_keeps_only_the_top_p_mass():
    from mappa.inference.decode import sample_next

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(400, 1)
    torch.manual_seed(0)
    drawn = sample_next(logits, temperature=1.0, top_p=0.8)
    assert set(drawn.tolist()) == {0, 1}  # 0.5 + 0.3 reach 0.8: the rest is cut
    assert sample_next(logits, temperature=0.0, top_p=1.0).eq(0).all()


def test_with_bf16_only_the_prefill_runs_under_autocast(tiny_model):
    """bf16 on: the prefill forward runs under bf16 autocast, every one-token step in fp32 over a cache
    cast to fp32 (`mappa.inference.decode`), and the samples still come out aligned."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    calls: list[tuple[int, bool]] = []
    model.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(
            (kwargs["input_ids"].shape[1], torch.is_autocast_enabled("cpu"))
        ),
        with_kwargs=True,
    )
    key_dtypes: list[torch.dtype] = []
    model.register_forward_hook(
        lambda module, args, kwargs, out: key_dtypes.append(out.past_key_values.layers[0].keys.dtype),
        with_kwargs=True,
    )
    engine = HFEngine(model, AutoTokenizer.from_pretrained(tiny_model), batch_size=4, bf16_autocast=True)
    params = SamplingParams(temperature=0.0, max_new_tokens=5, seed=0)
    (generation,) = engine.generate(["Count: one two three"], params)
    assert len(generation.token_ids) == len(generation.logprobs) >= 1
    assert calls[0][1] and calls[0][0] > 1, "the prefill (the whole prompt) runs under autocast"
    assert calls[1:] and all(width == 1 and not autocast for width, autocast in calls[1:])
    assert all(dtype == torch.float32 for dtype in key_dtypes[1:]), "steps extend an fp32 cache"


def test_an_engine_on_bf16_weights_keeps_its_cache_in_bf16(tiny_model):
    """The steps run in the weights' dtype: an engine on bf16 weights (a DeepSpeed bf16 policy shared with
    its engine) with bf16 on generates, its cache not cast to fp32 under a bf16 query."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.bfloat16)
    engine = HFEngine(model, AutoTokenizer.from_pretrained(tiny_model), batch_size=4, bf16_autocast=True)
    params = SamplingParams(temperature=0.0, max_new_tokens=5, seed=0)
    generations = engine.generate(["Count: one two three", "x"], params)
    assert all(len(g.token_ids) == len(g.logprobs) >= 1 for g in generations)


def test_reserved_cache_decodes_as_the_growing_one(tiny_model, monkeypatch):
    """`mappa.inference.decode` writes each step into room reserved after the prefill (`ReservedLayer`)
    instead of concatenating: the same tokens and logprobs, also when rows leave the batch early."""
    from mappa.inference import decode as decoding

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    rows = [[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15]]

    def stopped(row, tokens):  # rows end after 2, 4 and 7 tokens: the batch shrinks twice
        return len(tokens) == (2, 4, 7)[row]

    def run():
        torch.manual_seed(0)
        return decoding.decode(model, rows, 7, 0.8, 1.0, 0, set(), stopped)

    layers = []
    original = decoding.reserve_room
    monkeypatch.setattr(
        decoding, "reserve_room", lambda cache, room: layers.append(original(cache, room).layers[0]) or cache
    )
    reserved = run()
    assert isinstance(layers[0], decoding.ReservedLayer)
    monkeypatch.setattr(decoding, "reserve_room", lambda cache, room: cache)
    growing = run()
    assert [r[0] for r in reserved] == [r[0] for r in growing]
    assert [len(r[0]) for r in reserved] == [2, 4, 7]
    for (_, fast, _), (_, slow, _) in zip(reserved, growing):
        assert torch.allclose(torch.tensor(fast), torch.tensor(slow), atol=1e-6)
