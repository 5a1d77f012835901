"""Re-scoring: a finished run's stored trajectories scored again by another coach, without a new rollout.

A re-scoring has a name (`mappa rescore RUN --as NAME --set coach.type=... ...`) and a config: the run's
own, with the `coach.*` settings changed, stored once at `RUN/rescore/NAME/config.yaml` (a later
re-scoring under the same name must ask for the same coach). Its stage `rescore/NAME` writes
`RUN/iter-K/rescore/NAME/scores.parquet` and a manifest in the score stage's schema; like any stage it
skips itself when complete, and its coach answers go through the run's answer cache, so running it again
bills nothing. It reads the rollout only: the run's scores, advantages and checkpoints never change.

With `--fallbacks-only` (stored once as `RUN/rescore/NAME/options.json`) a re-scoring asks the coach
only about the actions the run's coach left unscored (parse status `fallback`), afresh (their cached
answers are not final), and copies every other verdict of the run's scores; its stage then reads the
run's scores too, so it is redone if they change.

`comparison_rows` sets a re-scoring against the run's own scores (`mappa.coach.compare`). Not covered:
running the iterations in order (`mappa.flows.rescore`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import yaml

from mappa.coach.compare import compare_scores
from mappa.config import ConfigError, RunConfig, dump_config, override_config, validate_config
from mappa.stages.score import score_actions
from mappa.stages.stage import REGISTRY, Stage, output_parts, register, stage_complete
from mappa.storage.frames import frame_to_trajectories
from mappa.storage.run import Run, validate_run_id

PREFIX = "rescore/"


def stage_name(name: str) -> str:
    return PREFIX + name


def config_parts(run: Run, name: str) -> tuple[str, ...]:
    """Where re-scoring `name` keeps its config."""
    return (run.run_id, "rescore", name, "config.yaml")


def rescore_config(run: Run, name: str) -> RunConfig:
    """The config re-scoring `name` was made with."""
    parts = config_parts(run, name)
    return validate_config(yaml.safe_load(run.store.read_text(*parts)), run.store.url(*parts))


def rescore_settings(run: Run, overrides: list[str]) -> RunConfig:
    """The run's config with `overrides` applied, which may change the coach only (a ConfigError names
    any other)."""
    others = [item for item in overrides if not item.strip().startswith("coach.")]
    if others:
        raise ConfigError(
            f"a re-scoring changes the coach only; not {', '.join(others)} (use coach.<field>=value)"
        )
    # the run's settings are the base: one that the coach type of `--set coach.type=...` cannot use is reset
    # to its default (a plug-in env's run with `scoring: criteria`, re-scored `--as outcome`), as from a file
    return override_config(run.config, overrides, run.store.url(run.run_id, "config.yaml"))


def options_parts(run: Run, name: str) -> tuple[str, ...]:
    """Where re-scoring `name` keeps its options (only a fallbacks-only re-scoring has them)."""
    return (run.run_id, "rescore", name, "options.json")


def fallbacks_only(run: Run, name: str) -> bool:
    """Whether re-scoring `name` asks about the run's fallbacks alone."""
    parts = options_parts(run, name)
    return run.store.exists(*parts) and bool(run.store.read_json(*parts).get("fallbacks_only"))


def check_rescore(run: Run, name: str, overrides: list[str], only_fallbacks: bool = False) -> RunConfig:
    """The re-scoring's config, checked before any work: the name, the overrides (coach settings only),
    and that a name already used was used with the same coach settings and the same `--fallbacks-only`."""
    try:
        validate_run_id(name)
    except ValueError:
        raise ValueError(
            f"--as {name!r} is not a usable name: use letters, digits, '-', '_' and '.'"
        ) from None
    config = rescore_settings(run, overrides)
    parts = config_parts(run, name)
    if run.store.exists(*parts) and rescore_config(run, name).config_hash() != config.config_hash():
        raise ValueError(
            f"re-scoring {name} of run {run.run_id} was made with other coach settings "
            f"({run.store.url(*parts)}); repeat them, or pick another --as name"
        )
    if run.store.exists(*parts) and fallbacks_only(run, name) != only_fallbacks:
        made = "with" if fallbacks_only(run, name) else "without"
        raise ValueError(
            f"re-scoring {name} of run {run.run_id} was made {made} --fallbacks-only; repeat that, or pick "
            f"another --as name"
        )
    return config


def create_rescore(run: Run, name: str, overrides: list[str], only_fallbacks: bool = False) -> RunConfig:
    """`check_rescore`, then store the config and options (once) and register the re-scoring's stage."""
    config = check_rescore(run, name, overrides, only_fallbacks)
    if not run.store.exists(*config_parts(run, name)):
        if only_fallbacks:
            run.store.write_json({"fallbacks_only": True}, *options_parts(run, name))
        run.store.write_text(dump_config(config), *config_parts(run, name))
    rescore_stage(name, only_fallbacks)
    return config


def rescore_stage(name: str, only_fallbacks: bool = False) -> Stage:
    """The stage `rescore/NAME` (registered on first use; its config is read from the run). A
    fallbacks-only one also reads the run's scores, which it keeps but for their fallbacks."""
    full = stage_name(name)
    inputs = ("rollout", "score") if only_fallbacks else ("rollout",)
    if full in REGISTRY and REGISTRY[full].inputs == inputs:
        return REGISTRY[full]
    REGISTRY.pop(full, None)  # (another run's re-scoring of this name, in this process)

    def config_of(run: Run) -> RunConfig:
        return rescore_config(run, name)

    def compute(run: Run, iteration: int) -> dict:
        coach = config_of(run).coach
        kept = "score" if only_fallbacks else None
        return score_actions(run, iteration, full, coach, worker_name=f"coach-{name}", fallbacks_of=kept)

    def describe(manifest: dict) -> str:
        model, status = manifest["coach_model"], manifest["parse_status"]
        if manifest.get("fallbacks_only"):
            return (
                f"{manifest['fallbacks_rescored']} unscored actions scored again by {model}, parse {status}"
            )
        return f"{manifest['rows']} actions re-scored by {model}, parse {status}"

    return register(Stage(full, "scores.parquet", compute, describe, inputs=inputs, config_of=config_of))


def rescore_names(run: Run) -> list[str]:
    """The re-scorings made of the run (each has its config under RUN/rescore/)."""
    return run.store.list(run.run_id, "rescore")


def rolled_out_iterations(run: Run) -> list[int]:
    """The iterations with a finished rollout, from 0 on (what a re-scoring can score)."""
    done = []
    while run.has_manifest(len(done), "rollout"):
        done.append(len(done))
    return done


def rescored_iterations(run: Run, name: str) -> list[int]:
    """The iterations whose re-scoring `name` is complete."""
    rescore_stage(name, fallbacks_only(run, name))
    return [k for k in rolled_out_iterations(run) if stage_complete(run, k, stage_name(name))]


def comparison_rows(run: Run, name: str) -> list[dict[str, Any]]:
    """How re-scoring `name` compares with the run's own coach over every iteration both scored, per agent
    (and per task kind where the env grades by kind): `mappa.coach.compare.compare_scores`, plus `name`."""
    base, other, outcomes, kinds = [], [], {}, {}
    for k in rescored_iterations(run, name):
        if not stage_complete(run, k, "score"):
            continue
        trajectories = frame_to_trajectories(run.store.read_parquet(*output_parts(run, k, "rollout")))
        outcomes |= {f"{k}:{t.id}": t.correct for t in trajectories}
        kinds |= {f"{k}:{t.id}": t.outcome["kind"] for t in trajectories if t.outcome.get("kind")}
        for frames, stage in ((base, "score"), (other, stage_name(name))):
            frame = run.store.read_parquet(*output_parts(run, k, stage))
            frames.append(
                frame.assign(
                    action_id=f"{k}:" + frame["action_id"], trajectory_id=f"{k}:" + frame["trajectory_id"]
                )
            )
    if not base:
        return []
    rows = compare_scores(pd.concat(base), pd.concat(other), outcomes, kinds or None)
    return [{"rescore": name, **row} for row in rows]
