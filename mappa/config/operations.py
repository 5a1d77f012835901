"""The run's machinery: the sandbox's limits for model-written code, how many checkpoints stay, the Ray
cluster, stage retries and the trackers (all but the sandbox are left out of the config hash:
`run.OPERATIONAL_FIELDS`). Where artifacts go: `mappa.config.storage`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from mappa.config.section import Section


class SandboxConfig(Section):
    """Limits for model-written code (`mappa.sandbox`)."""

    timeout_s: float = Field(10.0, gt=0)
    memory_mb: int = Field(1024, ge=64)
    cpu_s: int = Field(20, ge=1)
    max_output_chars: int = Field(2000, ge=100)
    isolation: Literal["auto", "bwrap", "none"] = "auto"


class CheckpointConfig(Section):
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


class ClusterConfig(Section):
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

    def resources_of(self, name: str) -> dict[str, float]:
        """The Ray resources worker `name` asks for: its seat's `placement`; a coach worker (`coach`, or a
        re-scoring's `coach-<name>`) takes `coach`'s."""
        if name in self.placement:
            return dict(self.placement[name])
        return dict(self.placement.get("coach", {})) if name.startswith("coach") else {}


class RetryConfig(Section):
    """Prefect task retries per stage, with exponential backoff: attempt k waits `delay_s * 2**k` seconds.

    A retried stage resumes from its artifacts (the update stage keeps finished agents, the score stage
    its cached coach answers), so a retry costs only the unfinished part."""

    rollout: int = Field(0, ge=0)
    score: int = Field(3, ge=0)
    """The coach is the stage most likely to meet a passing outage (rate limits, a restarting server)."""
    advantages: int = Field(0, ge=0)
    coach_update: int = Field(1, ge=0)
    """The learning coach's `coach-update` stage (`coach.learn`)."""
    update: int = Field(1, ge=0)
    report: int = Field(1, ge=0)
    evaluate: int = Field(0, ge=0)
    retention: int = Field(1, ge=0)
    delay_s: float = Field(10.0, ge=0)
    prefect_outage_s: float = Field(900.0, ge=0)
    """How long a run waits for an unreachable Prefect API before it stops (per outage; 0: stop at once).
    15 minutes outlast a server's restart or upgrade (seconds to a few minutes, its database migrations
    included) and a rescheduled pod, while a server gone for good stops the run (its workers idle) within
    a quarter of an hour; the run's finished stages are kept either way (`mappa.flows.prefect_outage`)."""

    def delays(self, stage: str) -> list[float]:
        """The waits before each retry of `stage` (a field per registered stage: a test keeps them so)."""
        return [self.delay_s * 2**k for k in range(getattr(self, stage.replace("-", "_")))]


class WandbConfig(Section):
    """Weights & Biases: one W&B run per mappa run (`mappa.reporting.tracker_sinks`)."""

    enabled: bool = False
    project: str = "mappa"
    entity: str | None = None
    """Your W&B team or user; default: the login's."""
    mode: Literal["online", "offline"] = "online"
    """offline: files under the run's wandb/ folder only (`wandb sync` them later); online needs `wandb
    login` or WANDB_API_KEY."""


class MlflowConfig(Section):
    """MLflow: one MLflow run per mappa run, found again by its `mappa.run_id` tag."""

    enabled: bool = False
    tracking_uri: str | None = None
    """Default: sqlite:///ROOT/RUN_ID/mlflow.db (a local root only); else your server, e.g.
    http://mlflow:5000."""
    experiment: str = "mappa"


class TrackersConfig(Section):
    """Where each iteration's scalars go besides the artifacts: TensorBoard on by default, W&B and MLflow
    when enabled (`mappa.reporting.trackers` names the scalars)."""

    tensorboard: bool = True
    """Event files under ROOT/RUN_ID/tensorboard (`tensorboard --logdir` it)."""
    wandb: WandbConfig = Field(default_factory=WandbConfig)
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)
