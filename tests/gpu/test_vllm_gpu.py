"""On a CUDA machine with the CUDA `vllm` package (`pip install -e .[gpu]`): the vLLM engine on the GPU
generates with the model's own logprobs and takes new weights in place (`reload_weights`, the same path as
on CPU), after which its logprobs are the new weights'."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu


def test_vllm_on_gpu_takes_new_weights_in_place(tmp_path):
    pytest.importorskip("vllm")
    from transformers import AutoModelForCausalLM

    from mappa.inference.engine import SamplingParams
    from mappa.inference.vllm_engine import VLLMEngine
    from mappa.models.tiny_model import build_tiny_model

    path = build_tiny_model(tmp_path / "tiny", hidden_size=256)
    engine = VLLMEngine(str(path), dtype="float32", gpu_memory_utilization=0.2, enforce_eager=True)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).cuda()
    params = SamplingParams(temperature=1.0, max_new_tokens=12, seed=3)

    def model_logprobs(generation) -> list[float]:
        prompt, tokens = list(generation.prompt_token_ids), list(generation.token_ids)
        with torch.no_grad():
            logits = model(torch.tensor([prompt + tokens], device="cuda")).logits[0, len(prompt) - 1 : -1]
        picked = logits.float().log_softmax(-1).gather(-1, torch.tensor(tokens, device="cuda")[:, None])
        return picked.squeeze(-1).tolist()

    before = engine.generate(["Hello there", "What is 2+2?"], params)
    for generation in before:
        assert generation.logprobs == pytest.approx(model_logprobs(generation), abs=2e-3)
    torch.manual_seed(0)
    new = {k: v + 0.05 * torch.randn_like(v) for k, v in model.state_dict().items()}
    engine.update_weights(new)
    model.load_state_dict(new)
    after = engine.generate(["Hello there", "What is 2+2?"], params)
    assert [g.token_ids for g in after] != [g.token_ids for g in before]
    for generation in after:
        assert generation.logprobs == pytest.approx(model_logprobs(generation), abs=2e-3)


def test_vllm_on_gpu_samples_copies_of_a_prompt_differently_and_reproducibly(tmp_path):
    """A problem's samples are copies of one prompt in one call: one seed for all would make them equal."""
    pytest.importorskip("vllm")
    from mappa.inference.engine import SamplingParams
    from mappa.inference.vllm_engine import VLLMEngine
    from mappa.models.tiny_model import build_tiny_model

    path = build_tiny_model(tmp_path / "tiny", hidden_size=256)
    engine = VLLMEngine(str(path), dtype="float32", gpu_memory_utilization=0.2, enforce_eager=True)
    params = SamplingParams(temperature=1.0, max_new_tokens=12, seed=5)
    first = [g.token_ids for g in engine.generate(["What is 2+2?"] * 4, params)]
    assert len(set(first)) > 1
    assert [g.token_ids for g in engine.generate(["What is 2+2?"] * 4, params)] == first
