"""The plain torch trainer: one agent's policy, its frozen reference, AdamW and the REINFORCE++ update.

Master weights are fp32; the policy forward/backward runs under bf16 autocast on CPU when configured, and so
do the old and reference logprob passes (`logprobs`): the ratio's old side is then the update's own number
(the same up to padding before the first step, where an fp32 old side differed from it by 0.02 per token on
average and up to 0.36), the KL compares two passes of one precision, and those passes cost what a forward of
the update costs (on a 2-core EPYC with avx512_bf16 the advantages stage's two passes took 46-70 s against
80-94 s in fp32). The frozen reference is read from the model's folder for those passes only, and the
gradients are let go after each update: between stages a worker holds one copy of the model and its optimizer
state. One optimizer step per `train_batch_size` actions (default: all of the agent's actions in the
iteration), gradients accumulated over micro-batches and weighted by their token share, so the loss is the
token-mean of `mappa.core.losses.compute_policy_loss` over the whole step.

The step is written once for both backends: `DeepSpeedTrainer` (`mappa.trainer.deepspeed_trainer`)
subclasses this class and replaces only how gradients are made, applied and summed over ranks
(`_backward`, `_apply_gradients`, `_sum_over_ranks`) and how weights are gathered and saved. With several
data-parallel ranks each rank takes every `world_size`-th action of the (identically shuffled) step and
runs as many micro-batches as the busiest rank, so sharded collectives line up.

With `lora` (an agent's `lora:`) only a peft adapter trains; the reference is the base model with the
adapter off (`mappa.trainer.lora`), and weights leave merged.

Not covered: learning-rate schedules beyond linear warmup.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from mappa.config import AlgoConfig, LoraConfig, TrainerConfig
from mappa.core.advantages import pad_sequences
from mappa.core.losses import compute_policy_loss
from mappa.core.types import TrainSample
from mappa.inference.precision import cpu_autocast, resolve_bf16
from mappa.storage.checkpoints import TRAINER_STATE
from mappa.trainer.logprobs import batch_response_logprobs, response_logprobs
from mappa.trainer.lora import adapter_off, attach_lora, load_adapter, merged_state_dict, save_adapter


class TorchTrainer:
    share_prefix = True
    """Whether forwards run a micro-batch's common prompt prefix once (`mappa.inference.prefix`)."""

    def __init__(
        self,
        model_path: str,
        trainer: TrainerConfig,
        algo: AlgoConfig,
        pad_token_id: int,
        trainable: bool = True,
        seed: int = 0,
        lora: LoraConfig | None = None,
    ) -> None:
        torch.manual_seed(seed)
        self.config = trainer
        self.lora = lora if trainable else None
        self.algo = algo
        self.pad_token_id = pad_token_id
        self.trainable = trainable
        self.rank, self.world_size = 0, 1  # data-parallel ranks of this agent (DeepSpeed sets them)
        self.model_path = model_path
        self.policy: PreTrainedModel = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
        self.reference: PreTrainedModel | None = None  # read for a reference pass, then let go
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
        self.steps = 0
        if trainable:
            if self.lora:  # the reference is the base model with the adapter off: no copy
                self.policy = attach_lora(self.policy, self.lora)
            self.optimizer = torch.optim.AdamW(
                [p for p in self.policy.parameters() if p.requires_grad],
                lr=trainer.lr,
                weight_decay=trainer.weight_decay,
            )
            self.scheduler = warmup_schedule(self.optimizer, trainer.warmup_steps)
        else:
            self.policy.requires_grad_(False)

    def logprobs(self, prompts, responses, which: str = "policy") -> list[list[float]]:
        """Logprobs of response tokens under the policy or the frozen reference, in the update's precision
        (bf16 autocast where `trainer.bf16_autocast` resolves true; the results are fp32 numbers)."""
        model, switch = self._scoring_model(which)
        with switch, self._autocast():
            return response_logprobs(
                model, prompts, responses, self.pad_token_id, self.config.micro_batch_size, self.share_prefix
            )

    def _scoring_model(self, which: str) -> tuple[torch.nn.Module, contextlib.AbstractContextManager]:
        """The module for `which` ("policy" or "ref") and the context to run it in (a LoRA agent's
        reference is its policy with the adapter off)."""
        if which == "policy":
            return self.policy, contextlib.nullcontext()
        if self.lora:
            return self.policy, adapter_off(self.policy)
        if not self.trainable:
            raise ValueError(f"no {which} model: this agent is not trainable")
        return self.reference_model(), contextlib.nullcontext()

    def reference_model(self) -> PreTrainedModel:
        """The frozen reference: the initial weights, read again from the model's folder for the reference
        passes of a stage and let go afterwards (`release_reference`), so a worker does not hold a second
        copy of the model through the rollout and the update."""
        if self.reference is None:
            model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32)
            self.reference = self._place_reference(model.eval().requires_grad_(False))
        return self.reference

    def _place_reference(self, model: PreTrainedModel) -> PreTrainedModel:
        """Where the reference runs (a sharded backend moves it to its device and dtype)."""
        return model

    def release_reference(self) -> None:
        self.reference = None

    def train(self, samples: Sequence[TrainSample], seed: int = 0) -> dict[str, float]:
        """REINFORCE++ update over `samples` for `epochs` epochs; returns averaged metrics."""
        if not self.trainable or self.optimizer is None:
            raise ValueError("train() called on a frozen agent (trainable: false)")
        if not samples:
            return {
                "loss": 0.0,
                "clip_fraction": 0.0,
                "grad_norm": 0.0,
                "tokens": 0,
                "tokens_per_s": 0.0,
                "steps": 0,
            }
        rng = random.Random(seed)
        step_size = self.config.train_batch_size or len(samples)
        totals: dict[str, float] = {"loss": 0.0, "clip_fraction": 0.0, "grad_norm": 0.0, "approx_kl": 0.0}
        steps, tokens, started = 0, 0, time.perf_counter()
        self.policy.train()
        for _ in range(self.config.epochs):
            order = list(range(len(samples)))
            rng.shuffle(order)
            for start in range(0, len(order), step_size):
                batch = [samples[i] for i in order[start : start + step_size]]
                metrics = self._optimizer_step(batch)
                for key in totals:
                    totals[key] += metrics[key]
                tokens += int(metrics["tokens"])
                steps += 1
        elapsed = time.perf_counter() - started
        self.optimizer.zero_grad(set_to_none=True)  # the gradients' memory, until the next update
        self.steps += steps
        result = {key: value / steps for key, value in totals.items()}
        result.update(tokens=tokens, tokens_per_s=tokens / max(elapsed, 1e-9), steps=steps, seconds=elapsed)
        return result

    def _optimizer_step(self, batch: Sequence[TrainSample]) -> dict[str, float]:
        total_tokens = sum(len(s.response_token_ids) for s in batch)  # over all ranks
        # One optimizer step per batch, so micro-batch composition does not change the gradient: group
        # similar lengths to cut padding (prompts range from ~100 to ~1000 tokens here).
        batch = sorted(batch, key=lambda s: len(s.prompt_token_ids) + len(s.response_token_ids))
        self._start_step()
        loss_sum = clip_sum = kl_sum = 0.0
        chunks = rank_micro_batches(batch, self.config.micro_batch_size, self.rank, self.world_size)
        for chunk, counts in chunks:
            with self._autocast():
                logprobs, mask = batch_response_logprobs(
                    self._training_module(),
                    [s.prompt_token_ids for s in chunk],
                    [s.response_token_ids for s in chunk],
                    self.pad_token_id,
                    self.share_prefix,
                )
            old = pad_sequences([s.old_logprobs for s in chunk])[0].to(logprobs.device)
            advantages = pad_sequences([s.advantages for s in chunk])[0].to(logprobs.device)
            out = compute_policy_loss(logprobs, old, advantages, mask, self.algo.clip_eps)
            share = out.num_tokens / total_tokens if counts else 0.0  # a padding micro-batch adds nothing
            self._backward(out.loss * share)
            loss_sum += out.loss.item() * share
            clip_sum += out.clip_fraction.item() * share
            kl_sum += out.approx_kl.item() * share
        loss_sum, clip_sum, kl_sum = self._sum_over_ranks([loss_sum, clip_sum, kl_sum])
        return {
            "loss": loss_sum,
            "clip_fraction": clip_sum,
            "approx_kl": kl_sum,
            "grad_norm": self._apply_gradients(),
            "tokens": total_tokens,
        }

    def _training_module(self) -> torch.nn.Module:
        """What the update's forward calls (DeepSpeed: its engine, which tracks micro-batches)."""
        return self.policy

    def _start_step(self) -> None:
        assert self.optimizer is not None
        self.optimizer.zero_grad(set_to_none=True)

    def _backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def _apply_gradients(self) -> float:
        """Clip, step the optimizer and the schedule; returns the gradient norm before clipping."""
        assert self.optimizer is not None
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.config.grad_clip)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        return float(grad_norm)

    def _sum_over_ranks(self, values: list[float]) -> list[float]:
        return values

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """The policy's complete weights (a sharded backend gathers them first; an adapter is merged in)."""
        return merged_state_dict(self.policy) if self.lora else self.policy.state_dict()

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.policy.parameters())

    def _autocast(self) -> contextlib.AbstractContextManager:
        return cpu_autocast(resolve_bf16(self.config.bf16_autocast))

    def save_checkpoint(self, folder: Path, extra: dict[str, Any] | None = None) -> None:
        """Weights as safetensors (loadable by `from_pretrained`; a LoRA agent: its adapter alone, never the
        base model) plus optimizer, LR schedule and RNG state for resume; `extra` carries the caller's
        position (iteration, problems drawn). Layout: `mappa.storage.checkpoints`."""
        folder.mkdir(parents=True, exist_ok=True)
        if self.lora:
            save_adapter(self.policy, folder)
        else:
            self.policy.save_pretrained(folder, safe_serialization=True)
        state = {
            "optimizer": self.optimizer.state_dict() if self.optimizer else None,
            "scheduler": self.scheduler.state_dict() if self.scheduler else None,
            **self._position(extra),
        }
        torch.save(state, folder / TRAINER_STATE)

    def load_checkpoint(self, folder: Path, weights_only: bool = False) -> dict[str, Any]:
        """Restore weights, optimizer and RNG state saved by `save_checkpoint`; returns its `extra`. With
        `weights_only` (a checkpoint retention stripped to its weights) only the weights, and {}."""
        self.load_weights(folder)
        if weights_only:
            return {}
        state = torch.load(folder / TRAINER_STATE, weights_only=False)
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        return self._restore_position(state)

    def load_weights(self, folder: Path) -> None:
        """The policy's weights from a checkpoint folder (a LoRA agent: its adapter; the base weights are
        the model's own, never changed)."""
        if self.lora:
            load_adapter(self.policy, folder)
        else:
            loaded = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
            self.policy.load_state_dict(loaded.state_dict())

    def _position(self, extra: dict[str, Any] | None) -> dict[str, Any]:
        """Where training stands, for a checkpoint: optimizer steps, RNG states, the caller's `extra`."""
        return {
            "steps": self.steps,
            "torch_rng": torch.get_rng_state(),
            "python_rng": random.getstate(),
            "extra": extra or {},
        }

    def _restore_position(self, state: dict[str, Any]) -> dict[str, Any]:
        """Back to a `_position`; returns its `extra`."""
        self.steps = state["steps"]
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        return state["extra"]


def warmup_schedule(optimizer: torch.optim.Optimizer, warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear learning-rate warmup from 0 to the optimizer's lr over `warmup_steps` steps, then constant."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
    )


def rank_micro_batches(
    batch: Sequence[TrainSample], micro_batch_size: int, rank: int, world_size: int
) -> list[tuple[list[TrainSample], bool]]:
    """This rank's micro-batches of one optimizer step: every `world_size`-th action from `rank` on, cut
    into `micro_batch_size` pieces, padded with weightless repeats of the first action (marked False) to as
    many micro-batches as the busiest rank runs, so every rank makes the same forward/backward calls."""
    shard = list(batch[rank::world_size])
    busiest = -(-len(batch) // world_size)  # ceil: rank 0 holds the most
    count = -(-busiest // micro_batch_size)
    chunks = [(shard[i : i + micro_batch_size], True) for i in range(0, len(shard), micro_batch_size)]
    chunks += [([batch[0]], False)] * (count - len(chunks))
    return chunks
