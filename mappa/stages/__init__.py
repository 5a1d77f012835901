"""The pipeline's stages, one module each, and the registry that the flows, tasks, CLI and manifests use.

    rollout     problems -> trajectories.parquet                (mappa.stages.rollout)
    score       trajectories -> scores.parquet, a coach verdict per action   (mappa.stages.score)
    coach-update  trajectories + scores -> head.json, the learning coach's head (with `coach.learn`:
                mappa.stages.coach_update)
    advantages  trajectories + scores -> experiences.parquet    (mappa.stages.advantages)
    update      experiences -> new weights, checkpoints, metrics.json        (mappa.stages.update)
    report      a finished iteration -> Prefect artifacts (no file of its own)  (mappa.stages.report)
    evaluate    a checkpoint on held-out problems -> results.parquet         (mappa.stages.evaluate)
    retention   older checkpoints deleted as `checkpoint:` says -> retention.json (mappa.stages.retention)
    rescore/N   trajectories -> another coach's scores.parquet (registered per name on use:
                mappa.stages.rescore)

Adding a stage is adding a module that registers a `Stage` (`mappa.stages.stage`) and importing it
here; a stage of every training iteration also goes into `TRAINING`, a per-stage retry count into
`RetryConfig`. Stages may use Ray and Prefect; the packages below them (`core`, `envs`, `coach`,
`trainer`, `storage`) do not.
"""

from mappa.config import RunConfig
from mappa.stages import advantages, coach_update, evaluate, report, retention, rollout, score, update
from mappa.stages.stage import (
    REGISTRY,
    Stage,
    completed_iterations,
    describe_stage,
    execute,
    expected_manifest,
    get_stage,
    output_hash,
    output_parts,
    stage_complete,
    write_manifest,
)
from mappa.storage.run import TRAINING

MODULES = (rollout, score, coach_update, advantages, update, report, evaluate, retention)


def iteration_stages(config: RunConfig) -> tuple[str, ...]:
    """The stages of one training iteration of a run, in order: `TRAINING`, with the learning coach's
    `coach-update` after `score` where the coach learns (`coach.learn`)."""
    if not config.coach.learn.enabled:
        return TRAINING
    at = TRAINING.index("score") + 1
    return (*TRAINING[:at], coach_update.STAGE_NAME, *TRAINING[at:])


__all__ = [
    "MODULES",
    "REGISTRY",
    "TRAINING",
    "Stage",
    "completed_iterations",
    "describe_stage",
    "execute",
    "expected_manifest",
    "get_stage",
    "iteration_stages",
    "output_hash",
    "output_parts",
    "stage_complete",
    "write_manifest",
]
