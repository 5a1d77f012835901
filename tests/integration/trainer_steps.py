"""Run by `test_deepspeed_trainer.py` in fresh processes (one per rank): a plan of trainings, one after
another, each a few REINFORCE++ updates of the tiny model on a fixed batch through `make_trainer`, with the
losses, gradient norms, final logprobs and a weight fingerprint written as JSON by rank 0. A process of its
own keeps DeepSpeed's process group and environment out of the test process; one process for the whole
plan pays DeepSpeed's import once.

    python trainer_steps.py MODEL OUT '{"name": {"backend": "deepspeed", "zero_stage": 3, "steps": 3,
        "checkpoint": DIR, "checkpoint_after": K, "resume": DIR, "lora": false}, ...}'
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

import torch

from mappa.config import AlgoConfig, LoraConfig, TrainerConfig
from mappa.core.types import TrainSample
from mappa.trainer.backend import make_trainer

ACTIONS = 7  # odd: with two ranks one holds more actions, and padding micro-batches run


def fixed_batch() -> tuple[list[list[int]], list[list[int]], list[list[float]]]:
    rng = random.Random(0)
    prompts = [[rng.randrange(3, 400) for _ in range(rng.randint(3, 9))] for _ in range(ACTIONS)]
    responses = [[rng.randrange(3, 400) for _ in range(rng.randint(1, 6))] for _ in range(ACTIONS)]
    advantages = [[rng.gauss(0.0, 1.0) for _ in r] for r in responses]
    return prompts, responses, advantages


def train_steps(model: str, spec: dict) -> dict:
    """One training of `spec` (backend, zero_stage, steps, checkpoint, checkpoint_after, resume, lora)."""
    config = TrainerConfig(
        type=spec.get("backend", "deepspeed"),
        zero_stage=spec.get("zero_stage", 3),
        lr=1e-3,
        micro_batch_size=2,
        bf16_autocast=False,
    )
    lora = LoraConfig(rank=4, alpha=8) if spec.get("lora") else None
    trainer = make_trainer(model, config, AlgoConfig(), pad_token_id=2, seed=0, lora=lora)
    extra = trainer.load_checkpoint(Path(spec["resume"])) if spec.get("resume") else {}
    prompts, responses, advantages = fixed_batch()
    losses, grad_norms = [], []
    old = trainer.logprobs(prompts, responses, "policy")  # kept over the steps: ratios move off 1
    for step in range(spec.get("steps", 3)):
        if spec.get("checkpoint") and step == spec.get("checkpoint_after", 0):
            trainer.save_checkpoint(Path(spec["checkpoint"]), extra={"iteration": 0})
            old = trainer.logprobs(prompts, responses, "policy")  # as a resumed run starts
        samples = [TrainSample(*row) for row in zip(prompts, responses, old, advantages)]
        metrics = trainer.train(samples, seed=step)
        losses.append(metrics["loss"])
        grad_norms.append(metrics["grad_norm"])
    return {
        "losses": losses,
        "grad_norms": grad_norms,
        "logprobs": trainer.logprobs(prompts, responses, "policy"),
        "reference": trainer.logprobs(prompts, responses, "ref"),
        "checksum": sum(float(v.double().abs().sum()) for v in trainer.full_state_dict().values()),
        "steps": trainer.steps,
        "extra": extra,
        "world_size": trainer.world_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("plan", help="JSON: {name: spec}, trained one after another in this process")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {name: train_steps(args.model, spec) for name, spec in json.loads(args.plan).items()}
    if int(os.environ.get("RANK", "0")) == 0:
        Path(args.out).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
