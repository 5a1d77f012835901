"""The whole run's config (`RunConfig`): its sections, the checks across them, and the hash that decides
which finished work a run may reuse."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import Field, SerializeAsAny, ValidationInfo, field_validator, model_validator

from mappa.config.coach import CoachConfig
from mappa.config.coach_registry import get_coach_spec
from mappa.config.operations import (
    CheckpointConfig,
    ClusterConfig,
    RetryConfig,
    SandboxConfig,
    TrackersConfig,
)
from mappa.config.origins import origins_in
from mappa.config.section import Section
from mappa.config.storage import StorageConfig
from mappa.config.training import AgentConfig, AlgoConfig, EngineConfig, RolloutConfig, TrainerConfig
from mappa.core.baseline_registry import get_baseline
from mappa.envs.registry import DEFAULT_ENV, get_env_spec
from mappa.envs.spec import EnvSection, EnvSpec

# Settings that change how a run is executed, not what it computes: left out of the config hash, so a run
# can move to another root, cluster or coach endpoint, get more iterations or retries, and keep its work.
OPERATIONAL_FIELDS = {
    "": ("storage", "iterations", "cluster", "retries", "trackers", "checkpoint"),
    "coach": ("base_url", "api_key_env", "max_concurrency", "max_retries", "outage_budget_s", "timeout_s"),
    "rollout": ("eval_every",),
    "env": ("workspace_root",),
}


class RunConfig(Section):
    """A whole run."""

    name: str = "run"
    seed: int = 0
    iterations: int = Field(2, ge=1)
    env: SerializeAsAny[EnvSection] = Field(default_factory=lambda: get_env_spec(DEFAULT_ENV).config())
    """The env's own section: its model is the env's (`EnvSpec.config`), chosen by `env.type`."""
    agents: dict[str, AgentConfig]
    coach: SerializeAsAny[CoachConfig] = Field(default_factory=CoachConfig)
    """The coach's section: `CoachConfig`, or a plug-in coach's subclass of it (`CoachSpec.config`)."""
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
        return get_env_spec(env_type).config.model_validate({**value, "type": env_type})

    @field_validator("coach", mode="before")
    @classmethod
    def _coach_section(cls, value: Any, info: ValidationInfo) -> Any:
        """Validate `coach:` with the section of the coach that `coach.type` names, where it has its own."""
        if not isinstance(value, dict):
            return value
        try:
            section = get_coach_spec(value.get("type", "local")).config
        except (ValueError, TypeError):
            return value  # the coach section's `type` validator reports it
        if section is None or section is CoachConfig:
            return value
        if not (isinstance(section, type) and issubclass(section, CoachConfig)):
            raise ValueError(
                f"coach {value['type']!r}: its CoachSpec.config is {section!r}, not a subclass of "
                "mappa.config.CoachConfig; derive the coach's section from CoachConfig"
            )
        return section.model_validate(value, context=info.context)

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
                template = get_env_spec(env_type).coach_template
            except ValueError:
                return data  # the env's own validator reports it
            if template is not None:
                data = {**data, "coach": {**(coach or {}), "template": template}}
            elif _reads_template((coach or {}).get("type", "local")):
                raise ValueError(
                    f"env `{env_type}` ships no coach template and coach.template is not set: give the LLM "
                    "coach one (coach.template: path/to/template.txt; see mappa/coach/templates/)"
                )
        return data

    @model_validator(mode="after")
    def _rubric_exists(self, info: ValidationInfo) -> RunConfig:
        if self.coach.type == "rubric" and self.env_spec.rubric is None:
            origins = origins_in(info.context)
            where = f" (from {origins.of('coach.type')})" if origins else ""
            raise ValueError(
                f"coach.type=rubric{where}, but env `{self.env.type}` has no rubric (its EnvSpec.rubric): "
                "use an LLM coach (coach.type=local or openai) or the outcome coach (coach.type=outcome)"
            )
        return self

    @model_validator(mode="after")
    def _baseline_has_its_samples(self) -> RunConfig:
        estimator, samples = get_baseline(self.algo.baseline), self.rollout.samples_per_problem
        if samples < estimator.min_samples_per_problem:
            raise ValueError(
                f"algo.baseline={self.algo.baseline} subtracts {estimator.summary}, which needs "
                f"{estimator.min_samples_per_problem} or more samples of each problem, but "
                f"rollout.samples_per_problem={samples}. Set rollout.samples_per_problem to "
                f"{estimator.min_samples_per_problem} or more, or algo.baseline=none"
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
        seats = self.env_spec.seats  # the env decides its seats
        if set(self.agents) != set(seats):
            raise ValueError(
                f"env `{self.env.type}` has seats {list(seats)}, but agents lists {list(self.agents)}; "
                f"give one entry per seat under `agents:`"
            )
        return self

    @property
    def env_spec(self) -> EnvSpec:
        """The env `env.type` names: its seats, problems, rollout and grading. Resolved once per process,
        when the config is validated (the registry keeps the spec it loaded), and handed on from here: the
        rest of mappa takes the spec, not `env.type`. Not a field: it is neither dumped nor hashed."""
        return get_env_spec(self.env.type)

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


def _reads_template(coach_type: Any) -> bool:
    """Whether the coach `coach_type` names renders a template (`CoachSpec.reads_template`); False for a
    name the registry does not know (the coach section's validator reports it)."""
    try:
        return get_coach_spec(coach_type).reads_template
    except (ValueError, TypeError):
        return False
