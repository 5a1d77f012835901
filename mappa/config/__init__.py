"""A run's configuration: pydantic v2 models, loaded from YAML with dotted command-line overrides.

Everything a run does is decided here and validated before any work starts: a typo, a value out of
range or a missing data file is reported with the field's dotted path and how to fix it. Configs are
frozen; a run never changes its config while it goes. Secrets (API keys, S3 credentials) are not config:
they come from the environment (`coach.api_key_env` names the variable; S3's are AWS_*) and never enter
YAML, artifacts or logs.

Sections by what they decide: `training` (agents, algorithm, rollout, trainer, engine), `coach`,
`operations` (sandbox, checkpoints, cluster, retries, trackers), `storage` (the artifact root and how long
to wait for it), `run` (the whole run and its hash), `loading` (YAML, overrides), `origins` (whether a
setting came from the file or `--set`), `errors` (how a problem reads). Not covered here: what the fields
mean at run time (see the module that reads each section).
"""

from mappa.config.coach import CoachConfig, CoachLearnConfig, CoachPhase
from mappa.config.errors import format_validation_error
from mappa.config.loading import (
    apply_overrides,
    dump_config,
    load_config,
    override_config,
    validate_config,
)
from mappa.config.operations import (
    CheckpointConfig,
    ClusterConfig,
    MlflowConfig,
    RetryConfig,
    SandboxConfig,
    TrackersConfig,
    WandbConfig,
)
from mappa.config.origins import Origins
from mappa.config.run import OPERATIONAL_FIELDS, RunConfig
from mappa.config.section import ConfigError, Section
from mappa.config.storage import StorageConfig
from mappa.config.training import (
    AgentConfig,
    AlgoConfig,
    EngineConfig,
    LoraConfig,
    RolloutConfig,
    TrainerConfig,
    rollout_logprobs_are_trainers,
)

__all__ = [
    "AgentConfig",
    "AlgoConfig",
    "CheckpointConfig",
    "ClusterConfig",
    "CoachConfig",
    "CoachLearnConfig",
    "CoachPhase",
    "ConfigError",
    "EngineConfig",
    "LoraConfig",
    "MlflowConfig",
    "OPERATIONAL_FIELDS",
    "Origins",
    "RetryConfig",
    "RolloutConfig",
    "RunConfig",
    "SandboxConfig",
    "Section",
    "StorageConfig",
    "TrackersConfig",
    "TrainerConfig",
    "WandbConfig",
    "apply_overrides",
    "dump_config",
    "format_validation_error",
    "load_config",
    "override_config",
    "rollout_logprobs_are_trainers",
    "validate_config",
]
