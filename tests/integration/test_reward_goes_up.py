"""REINFORCE++ on the tiny model: a coach that favours one kind of answer makes that answer more likely.

The coach here is a scripted rule (any answer but the model's initial favourite scores 10, that one 0):
the test is about the update path (engine sampling, fp32 logprob recompute, core advantages, clipped
loss, AdamW), not a coach.
"""

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from mappa.config import AlgoConfig, TrainerConfig
from mappa.core.advantages import compute_reinforce_pp_advantages, pad_sequences
from mappa.core.types import TrainSample
from mappa.inference.engine import SamplingParams
from mappa.inference.hf import HFEngine
from mappa.trainer.torch_trainer import TorchTrainer

SCALE = 8.0  # the most likely first token (the prompt's last one, through tied embeddings) then holds ~30-50%


def peaky_model(tiny_model: Path, out: Path) -> Path:
    """The tiny model with embeddings scaled up, so that a few answers hold most of the probability (a
    random-init model is otherwise near uniform over 49k tokens, and no answer is ever sampled twice)."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(SCALE)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(out)
    return out


def favoured_token_ids(trainer: TorchTrainer, prompt_ids: list[int]) -> torch.Tensor:
    """The kind of answer the coach favours: any first token but the model's own favourite."""
    with torch.no_grad():
        logits = trainer.policy(input_ids=torch.tensor([prompt_ids])).logits[0, -1]
    return logits.argsort(descending=True)[1:]


def favoured_mass(trainer: TorchTrainer, prompt_ids: list[int], favoured: torch.Tensor) -> float:
    with torch.no_grad():
        logits = trainer.policy(input_ids=torch.tensor([prompt_ids])).logits[0, -1].float()
    return float(logits.softmax(-1)[favoured].sum())


def test_coach_favoured_answers_become_more_likely(tiny_model, tmp_path):
    torch.manual_seed(0)
    model_path = peaky_model(tiny_model, tmp_path / "peaky")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    algo = AlgoConfig(beta=0.0)
    trainer = TorchTrainer(
        str(model_path), TrainerConfig(lr=3e-3, micro_batch_size=16), algo, tokenizer.pad_token_id
    )
    engine = HFEngine(trainer.policy, tokenizer, batch_size=64, bf16_autocast=False)
    chat = [{"role": "user", "content": "Give me a number."}]
    prompt = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    favoured = favoured_token_ids(trainer, prompt_ids)
    before = favoured_mass(trainer, prompt_ids, favoured)
    chosen = set(favoured.tolist())

    for step in range(8):
        generations = engine.generate(
            [prompt] * 64, SamplingParams(temperature=1.0, max_new_tokens=1, seed=step)
        )
        responses = [list(g.token_ids) for g in generations]
        scores = torch.tensor([10.0 if r[0] in chosen else 0.0 for r in responses])
        old = trainer.logprobs([prompt_ids] * len(responses), responses, "policy")
        ref = trainer.logprobs([prompt_ids] * len(responses), responses, "ref")
        old_t, mask = pad_sequences(old)
        ref_t, _ = pad_sequences(ref)
        out = compute_reinforce_pp_advantages(old_t, ref_t, scores, mask, beta=algo.beta)
        samples = [
            TrainSample(prompt_ids, r, o, out["advantages"][i, : len(r)].tolist())
            for i, (r, o) in enumerate(zip(responses, old))
        ]
        trainer.train(samples, seed=step)
        engine.update_weights(trainer.policy.state_dict())

    after = favoured_mass(trainer, prompt_ids, favoured)
    print(f"favoured mass {before:.3f} -> {after:.3f}")
    assert after > before + 0.15, f"probability of favoured answers went from {before:.4f} to {after:.4f}"
