"""The torch trainer on the tiny model: an update changes weights; a checkpoint restores them exactly."""

import torch

from mappa.config import AlgoConfig, TrainerConfig
from mappa.core.types import TrainSample
from mappa.trainer.torch_trainer import TorchTrainer


def make_samples(trainer: TorchTrainer) -> list[TrainSample]:
    prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    responses = [[20, 21], [22], [23, 24, 25]]
    old = trainer.logprobs(prompts, responses, "policy")
    advantages = [[1.0, 1.0], [-1.0], [0.5, 0.5, 0.5]]
    return [TrainSample(p, r, o, a) for p, r, o, a in zip(prompts, responses, old, advantages)]


def test_update_changes_weights_and_reports_metrics(tiny_model):
    trainer = TorchTrainer(str(tiny_model), TrainerConfig(lr=1e-3, micro_batch_size=2), AlgoConfig(), 2)
    before = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
    metrics = trainer.train(make_samples(trainer))
    assert metrics["tokens"] == 6 and metrics["steps"] == 1
    assert metrics["grad_norm"] > 0
    assert any(not torch.equal(before[k], v) for k, v in trainer.policy.state_dict().items())
    assert trainer.reference is None and all(p.grad is None for p in trainer.policy.parameters())  # let go
    ref = trainer.reference_model().state_dict()
    assert all(torch.equal(before[k], ref[k]) for k in before), "the reference must stay frozen"
    trainer.release_reference()
    assert trainer.reference is None


def test_micro_batching_does_not_change_the_gradient(tiny_model):
    grads = []
    for micro in (1, 3):
        trainer = TorchTrainer(
            str(tiny_model),
            TrainerConfig(lr=1e-3, micro_batch_size=micro, bf16_autocast=False),
            AlgoConfig(),
            2,
        )
        samples = make_samples(trainer)
        weight = trainer.policy.model.embed_tokens.weight
        # keep the weights; compare the gradient accumulated when the step is taken (then it is let go)
        trainer.optimizer.step = lambda weight=weight: grads.append(weight.grad.clone())
        trainer.train(samples)
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_checkpoint_round_trip_restores_weights_and_optimizer(tiny_model, tmp_path):
    trainer = TorchTrainer(str(tiny_model), TrainerConfig(lr=1e-3), AlgoConfig(), 2)
    trainer.train(make_samples(trainer))
    trainer.save_checkpoint(tmp_path / "ckpt", extra={"iteration": 0})
    fresh = TorchTrainer(str(tiny_model), TrainerConfig(lr=1e-3), AlgoConfig(), 2)
    assert fresh.load_checkpoint(tmp_path / "ckpt") == {"iteration": 0}
    for (k, a), b in zip(trainer.policy.state_dict().items(), fresh.policy.state_dict().values()):
        assert torch.equal(a, b), k
    assert fresh.steps == trainer.steps == 1
    state_a = trainer.optimizer.state_dict()["state"]
    state_b = fresh.optimizer.state_dict()["state"]
    assert all(torch.equal(state_a[i]["exp_avg"], state_b[i]["exp_avg"]) for i in state_a)


def test_a_lora_agent_trains_only_its_adapter_and_its_reference_is_the_base(tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    from mappa.config import LoraConfig

    lora = LoraConfig(rank=4, alpha=8)
    plain = TorchTrainer(str(tiny_model), TrainerConfig(lr=1e-2), AlgoConfig(), 2)
    trainer = TorchTrainer(str(tiny_model), TrainerConfig(lr=1e-2), AlgoConfig(), 2, lora=lora)
    assert trainer.reference is None  # no frozen copy: the adapter switched off is the reference
    base = plain.policy.state_dict()
    assert trainer.full_state_dict().keys() == base.keys()
    samples = make_samples(trainer)
    trainer.train(samples)
    prompts, responses = [s.prompt_token_ids for s in samples], [s.response_token_ids for s in samples]
    assert trainer.logprobs(prompts, responses, "ref") == plain.logprobs(prompts, responses, "policy")
    assert trainer.logprobs(prompts, responses, "policy") != plain.logprobs(prompts, responses, "policy")
    trained = trainer.full_state_dict()
    adapted = [k for k in base if not torch.equal(base[k], trained[k])]
    assert adapted and all("proj" in k for k in adapted)  # linear layers moved, embeddings and norms not
    trainer.save_checkpoint(tmp_path / "ckpt", extra={"iteration": 0})
    # the checkpoint is the adapter and its optimizer state, never a copy of the base model
    assert not (tmp_path / "ckpt" / "model.safetensors").exists()
    assert (tmp_path / "ckpt" / "adapter" / "adapter_model.safetensors").exists()
    from peft import PeftModel

    served = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model), tmp_path / "ckpt/adapter"
    )
    merged = served.merge_and_unload().state_dict()  # what a reader gets with peft, from the base model
    assert all(torch.allclose(merged[k], trained[k], atol=1e-6) for k in base)
    fresh = TorchTrainer(str(tiny_model), TrainerConfig(lr=1e-2), AlgoConfig(), 2, lora=lora)
    assert fresh.load_checkpoint(tmp_path / "ckpt") == {"iteration": 0}
    assert all(torch.allclose(fresh.full_state_dict()[k], trained[k], atol=1e-6) for k in base)
    weights_only = TorchTrainer(str(tiny_model), TrainerConfig(lr=1e-2), AlgoConfig(), 2, lora=lora)
    assert weights_only.load_checkpoint(tmp_path / "ckpt", weights_only=True) == {}
    assert all(torch.allclose(weights_only.full_state_dict()[k], trained[k], atol=1e-6) for k in base)


def test_a_missing_peft_is_named_with_the_fix(monkeypatch):
    import sys

    import pytest

    from mappa.trainer.lora import import_peft

    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(ImportError, match="pip install peft"):
        import_peft()


def test_before_any_update_the_policy_pass_is_the_reference_pass(tiny_model):
    """Why the advantages stage of iteration 0 runs one logprob pass, not two (`reference_pass`): the
    initial weights are the reference, for a full-weight and a LoRA agent alike, to the last bit."""
    from mappa.config import LoraConfig
    from mappa.stages.advantages import reference_pass

    prompts, responses = [[5, 6, 7], [8, 9]], [[20, 21], [22]]
    for lora in (None, LoraConfig(rank=4, alpha=8)):
        trainer = TorchTrainer(str(tiny_model), TrainerConfig(), AlgoConfig(), 2, lora=lora)
        policy = trainer.logprobs(prompts, responses, "policy")
        assert trainer.logprobs(prompts, responses, "ref") == policy
    assert reference_pass(0, recompute_old=True, rollout_exact=False) == "policy"
    assert reference_pass(0, recompute_old=False, rollout_exact=True) == "rollout"
    assert reference_pass(0, recompute_old=False, rollout_exact=False) == "run"  # vLLM's bf16 numbers
    assert all(reference_pass(1, r, e) == "run" for r in (True, False) for e in (True, False))


def test_under_bf16_the_old_logprobs_are_the_updates_own_numbers(tiny_model):
    """With bf16 autocast the old-logprob pass runs in the update's precision: before the first step the
    ratio is 1 for every token (nothing clipped, no KL), where fp32 old logprobs would differ from it."""
    config = TrainerConfig(lr=1e-3, micro_batch_size=4, bf16_autocast=True)
    trainer = TorchTrainer(str(tiny_model), config, AlgoConfig(clip_eps=0.2), 2)
    samples = make_samples(trainer)
    prompts, responses = [s.prompt_token_ids for s in samples], [s.response_token_ids for s in samples]
    trainer.config = config.model_copy(update={"bf16_autocast": False})
    fp32 = trainer.logprobs(prompts, responses, "policy")
    trainer.config = config
    gap = max(abs(a - b) for s, row in zip(samples, fp32) for a, b in zip(s.old_logprobs, row))
    assert gap > 1e-4, "bf16 and fp32 passes should differ on this model, or the test shows nothing"
    metrics = trainer.train(samples)
    assert metrics["steps"] == 1
    assert metrics["approx_kl"] == 0.0 and metrics["clip_fraction"] == 0.0
