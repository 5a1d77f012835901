"""The TRL side of `benchmarks/update.py`: TRL's own `GRPOTrainer` doing optimizer steps on the same batch.

Needs `trl` (the optional `bench` extra: `pip install -e ".[bench]"`). Generation is taken out of the
comparison through TRL's `rollout_func` hook, which returns the batch's fixed prompt and response token
ids instead of sampling; everything after that is TRL's code path, unchanged: the reward function (here
a seeded random score per completion), group-normalized advantages (2 completions per prompt, as the
paper's 2 samples per problem), the reference model's forward for the KL term (`beta` 0.01, mappa's KL
coefficient), and per micro-batch of `--micro-batch-size` a policy forward and backward with the clipped
loss (`epsilon` 0.2, `loss_type` "dapo": a token mean over the whole step, as mappa's), then gradient
clipping at 1.0 and one AdamW step (lr 1e-5, no weight decay, constant schedule) per batch
(`gradient_accumulation_steps` = actions / micro-batch size).

Settings made equal to the other two sides on purpose: fp32 weights with bf16 autocast only where the CPU
has native bf16 (TRL defaults to bf16), and no gradient checkpointing (TRL's default is on; mappa and the
minimal loop do not checkpoint, and checkpointing trades speed for memory).

Differences that are TRL's design, kept as they are: its advantages are one number per completion
(group-normalized outcome), not per token; with one optimizer step per batch it skips the old-logprob
forward (the ratio is exactly 1, so it uses the detached current logprobs), while mappa needs the policy's
logprobs before the update anyway because its KL penalty goes into the per-token reward.

Time per step: from `on_step_begin` to `on_step_end` of the HF Trainer (the reference forward happens
inside it, in `_prepare_inputs`); "forwards" is the time in `_generate_and_score_completions`.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from typing import Any

import torch

from mappa.inference.precision import resolve_bf16

SAMPLES_PER_PROBLEM = 2  # num_generations: the paper's samples per problem
KL_COEF = 0.01  # mappa's AlgoConfig default


class TrlSide:
    """TRL's `GRPOTrainer` on a fixed batch, built (models loaded) at construction; `run(steps)` trains
    1 warm-up + `steps` timed optimizer steps in one `trainer.train()` call."""

    def __init__(self, model_path: str, batch: dict[str, Any], micro_batch_size: int, steps: int) -> None:
        actions = len(batch["prompts"])
        if actions % micro_batch_size or micro_batch_size % SAMPLES_PER_PROBLEM:
            raise ValueError(
                f"the TRL side needs --actions ({actions}) divisible by --micro-batch-size "
                f"({micro_batch_size}), itself divisible by {SAMPLES_PER_PROBLEM}"
            )
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        self.model_path = model_path
        self.batch = batch
        self.micro_batch_size = micro_batch_size
        self.scratch = tempfile.TemporaryDirectory(prefix="mappa-bench-trl-")
        self.trainer, self.records = self.build(self.scratch.name, max_steps=1 + steps)

    def run(self, steps: int) -> tuple[dict[str, float], list[dict[str, float]]]:
        """The warm-up step and the timed steps, each with its seconds, loss and gradient norm."""
        try:
            self.trainer.train()
        finally:
            self.scratch.cleanup()
        for record in self.records:
            record["update_s"] = record["step_s"] - record["forwards_s"]
            record.setdefault("loss", float("nan"))
            record.setdefault("grad_norm", float("nan"))
        if len(self.records) != 1 + steps:
            raise RuntimeError(f"TRL ran {len(self.records)} steps, expected {1 + steps}")
        return self.records[0], self.records[1:]

    def build(self, scratch: str, max_steps: int):
        from datasets import Dataset
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer

        actions = len(self.batch["prompts"])
        config = GRPOConfig(
            output_dir=scratch,
            use_cpu=True,
            bf16=resolve_bf16("auto"),
            gradient_checkpointing=False,
            model_init_kwargs={"dtype": torch.float32},
            per_device_train_batch_size=self.micro_batch_size,
            gradient_accumulation_steps=actions // self.micro_batch_size,
            num_generations=SAMPLES_PER_PROBLEM,
            max_completion_length=max(len(r) for r in self.batch["responses"]),
            beta=KL_COEF,
            epsilon=0.2,
            loss_type="dapo",
            learning_rate=1e-5,
            weight_decay=0.0,
            max_grad_norm=1.0,
            lr_scheduler_type="constant",
            max_steps=max_steps,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            seed=0,
            shuffle_dataset=False,
            dataloader_num_workers=0,
        )
        records: list[dict[str, float]] = []
        rewards = random.Random(0)

        def reward(completions, **_: Any) -> list[float]:
            return [rewards.gauss(0.0, 1.0) for _ in completions]

        def rollout(prompts: list, trainer) -> dict[str, Any]:
            if len(prompts) != actions:
                raise RuntimeError(f"TRL asked for {len(prompts)} completions, the batch has {actions}")
            fixed = self.batch
            return {"prompt_ids": fixed["prompts"], "completion_ids": fixed["responses"], "logprobs": None}

        class Timed(GRPOTrainer):
            def _generate_and_score_completions(self, inputs):
                began = time.perf_counter()
                output = super()._generate_and_score_completions(inputs)
                records[-1]["forwards_s"] += time.perf_counter() - began
                return output

        class Clock(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                records.append({"forwards_s": 0.0, "began": time.perf_counter()})

            def on_step_end(self, args, state, control, **kwargs):
                records[-1]["step_s"] = time.perf_counter() - records[-1].pop("began")

            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and "loss" in logs and records:
                    grad_norm = float(logs.get("grad_norm", "nan"))
                    records[-1].update(loss=float(logs["loss"]), grad_norm=grad_norm)

        dataset = Dataset.from_dict({"prompt": [f"problem {i}" for i in range(actions)]})
        trainer = Timed(
            model=self.model_path,
            reward_funcs=reward,
            args=config,
            train_dataset=dataset,
            rollout_func=rollout,
            callbacks=[Clock()],
        )
        return trainer, records
