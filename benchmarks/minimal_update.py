"""The baseline of `benchmarks/update.py`: a minimal hand-written REINFORCE++ step, and nothing else.

One step over a fixed batch: a no-grad forward of the frozen reference (its logprobs would feed the KL
rewards), a no-grad forward of the policy (old logprobs), then per micro-batch (sorted by length, left
padded) a policy forward, the clipped policy-gradient loss of REINFORCE++ / PPO (Schulman et al. 2017:
ratio = exp(logp - old), -min(r A, clip(r, 0.8, 1.2) A), token mean over the whole step) and backward;
then clip_grad_norm_ 1.0 and one AdamW step (lr 1e-5, no weight decay, as mappa's TrainerConfig). fp32
master weights; bf16 autocast for the policy forward only where the CPU has native bf16.

It shares no code with mappa's trainer on purpose (its own padding and logprob gathering), so the
benchmark compares mappa with an independent implementation of the same update; it uses the one standard
saving a careful hand-written loop would (`logits_to_keep`: the vocabulary projection for response
positions only). Not covered: anything beyond one step (schedules, checkpoints, several epochs).
"""

from __future__ import annotations

import contextlib
import copy
import time
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from mappa.inference.precision import resolve_bf16


class MinimalSide:
    """A hand-written REINFORCE step: reference and old-logprob forwards, clipped PG loss, AdamW."""

    def __init__(self, model_path: str, batch: dict[str, Any], micro_batch_size: int) -> None:
        self.batch = batch
        self.policy = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
        self.reference = copy.deepcopy(self.policy).eval().requires_grad_(False)
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=1e-5, weight_decay=0.0)
        prompts, responses = batch["prompts"], batch["responses"]
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]) + len(responses[i]))
        size = micro_batch_size
        self.chunks = [order[start : start + size] for start in range(0, len(order), size)]
        self.total_tokens = sum(len(r) for r in responses)
        self.bf16 = resolve_bf16("auto")

    def step(self) -> dict[str, float]:
        started = time.perf_counter()
        with torch.no_grad():
            for chunk in self.chunks:
                self.logprobs(self.reference, chunk)  # feeds the KL rewards in a real update
            self.policy.eval()
            old = [self.logprobs(self.policy, chunk)[0] for chunk in self.chunks]
        forwards = time.perf_counter()
        self.policy.train()
        self.optimizer.zero_grad(set_to_none=True)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext()
        loss_total = 0.0
        for chunk, old_logprobs in zip(self.chunks, old):
            with autocast:
                logprobs, mask = self.logprobs(self.policy, chunk)  # (B, K) each
            advantages = self.right_aligned([self.batch["advantages"][i] for i in chunk], mask.shape[1])
            ratio = (logprobs - old_logprobs).exp()
            surrogate = torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages)
            loss = -(surrogate * mask).sum() / self.total_tokens  # token mean over the whole step
            loss.backward()
            loss_total += loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)
        self.optimizer.step()
        done = time.perf_counter()
        return {
            "forwards_s": forwards - started,
            "update_s": done - forwards,
            "loss": loss_total,
            "grad_norm": float(grad_norm),
        }

    def logprobs(self, model, chunk: list[int]):
        """Response-token logprobs and mask, (B, K) with responses right-aligned (left padding)."""
        prompts, responses = self.batch["prompts"], self.batch["responses"]
        rows = [prompts[i] + responses[i] for i in chunk]
        width, keep = max(len(r) for r in rows), max(len(responses[i]) for i in chunk)
        pad = self.batch["pad_token_id"]
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])  # (B, L)
        attention = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])  # (B, L)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        out = model(
            input_ids=input_ids, attention_mask=attention, position_ids=positions, logits_to_keep=keep + 1
        )
        logits = out.logits[:, :-1]  # (B, K, V): the position before each of the last K tokens
        targets = input_ids[:, -keep:]  # (B, K)
        logprobs = logits.float().log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        lengths = torch.tensor([len(responses[i]) for i in chunk]).unsqueeze(1)  # (B, 1)
        mask = (torch.arange(keep).unsqueeze(0) >= keep - lengths).float()  # (B, K)
        return logprobs * mask, mask

    @staticmethod
    def right_aligned(rows: list[list[float]], width: int):
        return torch.tensor([[0.0] * (width - len(r)) + r for r in rows])  # (B, K)
