"""The DeepSpeed trainer backend (`trainer.type: deepspeed`): the torch trainer's update on DeepSpeed.

What changes against `TorchTrainer`, and nothing else: the policy is wrapped by `deepspeed.initialize` with
ZeRO stage `trainer.zero_stage` (0-3), optional optimizer offload to CPU (`trainer.offload_optimizer`,
DeepSpeedCPUAdam), DeepSpeed's bf16 mode where `trainer.bf16_autocast` resolves to true (bf16 weights,
fp32 master weights in the optimizer), and gradient clipping by the engine. The loss, the micro-batching
and the token-share weighting are the base class's (`mappa.core.losses` underneath). Gradient accumulation
is caller-managed (`managed_gradient_accumulation: false`): every `backward` accumulates and `step` is the
boundary, so an optimizer step may hold any number of micro-batches.

Ranks: a process joins the default process group that `torch.distributed` already has, or starts one from
RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT (defaults: a group of one on this machine). The ranks of one
agent split each optimizer step's actions (`rank_micro_batches`) and each logprob pass's rows; DeepSpeed
averages gradients over ranks, so every rank scales its loss by the world size to keep the global token
mean. Every rank must receive the same calls in the same order (ZeRO-3 gathers parameters collectively).

Weights leave in full: `full_state_dict` gathers ZeRO-3 partitions; checkpoints hold `model.safetensors`
(readable by `from_pretrained`, written by rank 0; a LoRA agent: its adapter instead) plus DeepSpeed's own
optimizer shards under `deepspeed/` for resume (never the only copy of the weights).

A LoRA agent (`mappa.trainer.lora`) works here too: only the adapter is in the optimizer, and the base
model is the reference.

Not covered: a ZeRO-sharded reference model (each rank holds a full frozen reference copy), pipeline or
tensor parallelism.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Any

import torch

from mappa.config import AlgoConfig, LoraConfig, TrainerConfig
from mappa.inference.precision import resolve_bf16
from mappa.storage.checkpoints import DEEPSPEED_STATE, TRAINER_STATE
from mappa.trainer.logprobs import response_logprobs
from mappa.trainer.lora import save_adapter
from mappa.trainer.torch_trainer import TorchTrainer, warmup_schedule

DEEPSPEED_TAG = "state"


def import_deepspeed():
    try:
        import deepspeed
    except ImportError as error:
        raise ImportError(
            "trainer.type is `deepspeed` but DeepSpeed is not installed: run "
            "`DS_BUILD_OPS=0 pip install deepspeed` (or `pip install -e .[gpu]` on a GPU machine), "
            "or set trainer.type=torch"
        ) from error
    return deepspeed


def join_process_group() -> None:
    """The default process group: the existing one, or one from RANK/WORLD_SIZE/MASTER_* (a group of one
    on this machine when they are unset). gloo on CPU, nccl on GPUs."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return
    if "WORLD_SIZE" not in os.environ:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        os.environ.update(
            RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
        )
    os.environ.setdefault("LOCAL_RANK", os.environ.get("RANK", "0"))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    import_deepspeed().init_distributed(dist_backend=backend)


def deepspeed_config(trainer: TrainerConfig, bf16: bool) -> dict[str, Any]:
    zero: dict[str, Any] = {"stage": trainer.zero_stage}
    if trainer.zero_stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": trainer.micro_batch_size,
        "gradient_accumulation_steps": 1,
        "managed_gradient_accumulation": False,
        "gradient_clipping": trainer.grad_clip,
        "zero_optimization": zero,
        "bf16": {"enabled": bf16},
        "zero_allow_untested_optimizer": True,  # a torch AdamW as the client optimizer
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }
    if trainer.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu"}
        config["optimizer"] = {
            "type": "AdamW",
            "params": {"lr": trainer.lr, "weight_decay": trainer.weight_decay},
        }
    return config


class DeepSpeedTrainer(TorchTrainer):
    """A trainable agent's policy on a DeepSpeed engine (a frozen agent needs none: `make_trainer`)."""

    # two forwards (prefix, then rows) before one backward has not been run under ZeRO-3's parameter
    # gathering here (no GPU): its forwards keep the plain left-padded batch
    share_prefix = False

    def __init__(
        self,
        model_path: str,
        trainer: TrainerConfig,
        algo: AlgoConfig,
        pad_token_id: int,
        seed: int = 0,
        lora: LoraConfig | None = None,
    ) -> None:
        deepspeed = import_deepspeed()
        join_process_group()
        super().__init__(model_path, trainer, algo, pad_token_id, True, seed, lora)
        self.rank = torch.distributed.get_rank()
        self.world_size = torch.distributed.get_world_size()
        self.bf16 = resolve_bf16(trainer.bf16_autocast)
        client_optimizer = None if trainer.offload_optimizer else self.optimizer

        def schedule(optimizer):
            return warmup_schedule(optimizer, trainer.warmup_steps)

        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=self.policy,
            optimizer=client_optimizer,
            lr_scheduler=schedule,
            model_parameters=None
            if client_optimizer
            else [p for p in self.policy.parameters() if p.requires_grad],
            config=deepspeed_config(trainer, self.bf16),
        )
        self.policy = self.engine.module

    def _place_reference(self, model):
        """The reference on the engine's device, in its dtype (a LoRA agent has none: its base model is)."""
        return model.to(device=self.engine.device, dtype=torch.bfloat16 if self.bf16 else torch.float32)

    # ---------------------------------------------------------------- the step's DeepSpeed parts

    def _training_module(self) -> torch.nn.Module:
        # The engine's forward, not the module's: ZeRO-3 counts micro-batches there, and without the count
        # each backward would overwrite the gradients accumulated so far instead of adding to them.
        return self.engine

    def _start_step(self) -> None:
        """Nothing: the engine zeroes gradients after each step."""

    def _backward(self, loss: torch.Tensor) -> None:
        # DeepSpeed averages gradients over ranks; the base class's shares sum to 1 over all ranks.
        self.engine.backward(loss * self.world_size, scale_wrt_gas=False)

    def _apply_gradients(self) -> float:
        self.engine.step()  # clips, steps the optimizer and the schedule
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else 0.0

    def _sum_over_ranks(self, values: list[float]) -> list[float]:
        if self.world_size == 1:
            return values
        tensor = torch.tensor(values, dtype=torch.float64, device=self.engine.device)
        torch.distributed.all_reduce(tensor)
        return tensor.tolist()

    def _autocast(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()  # bf16 is the engine's own mode, not autocast

    # ---------------------------------------------------------------- logprobs, weights, checkpoints

    def logprobs(self, prompts, responses, which: str = "policy") -> list[list[float]]:
        """As `TorchTrainer.logprobs`; with several ranks each computes every `world_size`-th row (padded
        to equal counts, so sharded forwards line up) and the rows are gathered on every rank."""
        model, switch = self._scoring_model(which)
        rows = list(range(self.rank, len(prompts), self.world_size))
        rows += [0] * (-(-len(prompts) // self.world_size) - len(rows))  # padding rows, dropped below
        with switch:
            mine = response_logprobs(
                model,
                [prompts[i] for i in rows],
                [responses[i] for i in rows],
                self.pad_token_id,
                self.config.micro_batch_size,
                self.share_prefix,
            )
        if self.world_size == 1:
            return mine[: len(prompts)]
        gathered: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(gathered, (self.rank, mine))
        result: list[list[float]] = [[] for _ in prompts]
        for rank, values in gathered:
            for i, row in zip(range(rank, len(prompts), self.world_size), values):
                result[i] = row
        return result

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """Complete weights on every rank (ZeRO-3 partitions gathered, an adapter merged), fp32 on CPU."""
        with self._gathered():
            return {k: v.detach().float().cpu().clone() for k, v in super().full_state_dict().items()}

    def _gathered(self) -> contextlib.AbstractContextManager:
        """Every parameter whole on this rank for the block (ZeRO-3; a no-op for stages 0-2)."""
        if self.config.zero_stage < 3:
            return contextlib.nullcontext()
        params = list(self.policy.parameters())
        return import_deepspeed().zero.GatheredParameters(params, modifier_rank=None)

    def parameter_count(self) -> int:
        return sum(getattr(p, "ds_numel", p.numel()) for p in self.policy.parameters())

    def save_checkpoint(self, folder: Path, extra: dict[str, Any] | None = None) -> None:
        """`model.safetensors` + config (rank 0; a LoRA agent: its adapter alone), DeepSpeed's optimizer
        shards under `deepspeed/` (every rank), and steps / RNG / `extra` in `trainer_state.pt` (rank 0)."""
        folder.mkdir(parents=True, exist_ok=True)
        if self.lora:
            with self._gathered():
                if self.rank == 0:
                    save_adapter(self.policy, folder)  # for readers; resume uses DeepSpeed's own state
        else:
            weights = self.full_state_dict()
            if self.rank == 0:
                self.policy.save_pretrained(folder, state_dict=weights, safe_serialization=True)
        self.engine.save_checkpoint(str(folder / DEEPSPEED_STATE), tag=DEEPSPEED_TAG)
        if self.rank == 0:
            torch.save(self._position(extra), folder / TRAINER_STATE)

    def load_checkpoint(self, folder: Path, weights_only: bool = False) -> dict[str, Any]:
        if weights_only:
            self.load_weights(folder)
            return {}
        if not (folder / DEEPSPEED_STATE).exists():
            raise FileNotFoundError(
                f"{folder} has no {DEEPSPEED_STATE}/ folder: it was written by the torch backend; resume "
                "it with trainer.type=torch"
            )
        self.engine.load_checkpoint(
            str(folder / DEEPSPEED_STATE),
            tag=DEEPSPEED_TAG,
            load_optimizer_states=True,
            load_lr_scheduler_states=True,
        )
        return self._restore_position(torch.load(folder / TRAINER_STATE, weights_only=False))

    def load_weights(self, folder: Path) -> None:
        """The weights alone into the (partitioned) policy, for evaluating a checkpoint that retention
        stripped to its weights: gathered, written on rank 0, partitioned again. The optimizer's master
        weights are not touched (the worker then reloads a full state before it trains)."""
        if self.config.zero_stage < 3:
            super().load_weights(folder)
            return
        params = list(self.policy.parameters())
        with import_deepspeed().zero.GatheredParameters(params, modifier_rank=0):
            if self.rank == 0:
                super().load_weights(folder)
