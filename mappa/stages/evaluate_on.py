"""Evaluations on another problem file: a run's checkpoints on any problems, beside its own held-out set.

`mappa evaluate RUN --eval-data FILE [--as NAME] [--eval-problems N]` evaluates a checkpoint on FILE (any
source the run's env reads: a JSONL of `problem`/`answer` rows for MathChat, an s3:// URL, `builtin:...`)
as the stage `evaluate-on/NAME` (NAME: the file's stem unless `--as` names it):

    {root}/{run_id}/evaluate-on/NAME/config.yaml               the run's config with env.eval_data = FILE
    {root}/{run_id}/iter-0002/evaluate-on/NAME/results.parquet  as the evaluate stage's, one row a problem
    {root}/{run_id}/base/evaluate-on/NAME/...                   the base model on the same problems

The config is stored once, so every checkpoint of the run is evaluated on the same problems, and a
finished evaluation skips itself like any stage (a later `--eval-data` under the same name must name the
same file and count). The evaluation itself is the evaluate stage's (`mappa.stages.evaluate`): greedy at
`rollout.eval_temperature`, no coach, `env.overlap` against the training split. Not covered: evaluating
with other sampling settings or another env than the run's.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import yaml

from mappa.config import RunConfig, apply_overrides, dump_config, validate_config
from mappa.stages.evaluate import RESULTS, describe, evaluate_iteration
from mappa.stages.stage import REGISTRY, Stage, register
from mappa.storage.run import Run, validate_run_id

PREFIX = "evaluate-on/"


def stage_name(name: str) -> str:
    return PREFIX + name


def config_parts(run: Run, name: str) -> tuple[str, ...]:
    """Where evaluation set `name` keeps its config."""
    return (run.run_id, "evaluate-on", name, "config.yaml")


def set_name(data: str) -> str:
    """The default name of problem source `data`: its file's stem (`builtin:heldout-level1` ->
    `heldout-level1`)."""
    return PurePosixPath(data.rsplit(":", 1)[-1] if data.startswith("builtin:") else data).stem


def resolved_source(data: str) -> str:
    """A local path made absolute (the run may be evaluated again from another folder); URLs and
    `builtin:` sources as given."""
    if "://" in data or data.startswith("builtin:"):
        return data
    return str(Path(data).expanduser().resolve())


def set_config(run: Run, name: str) -> RunConfig:
    """The config evaluation set `name` was made with."""
    parts = config_parts(run, name)
    return validate_config(yaml.safe_load(run.store.read_text(*parts)), run.store.url(*parts))


def check_evaluation_set(run: Run, data: str, name: str | None = None, problems: int | None = None) -> str:
    """The set's name, after checking before any model loads: the name, that `data` holds problems the
    run's env reads (its error names the file), and that a name already used was used with the same
    source and count."""
    name = name or set_name(data)
    try:
        validate_run_id(name)
    except ValueError:
        raise ValueError(
            f"{name!r} is not a usable evaluation name: use letters, digits, '-', '_' and '.' (--as NAME)"
        ) from None
    if problems is not None and problems < 1:
        raise ValueError(f"--eval-problems {problems}: evaluate at least one problem")
    config = evaluation_set_config(run, data, problems)
    parts = config_parts(run, name)
    if run.store.exists(*parts):
        made = set_config(run, name)
        if made.config_hash() != config.config_hash():
            raise ValueError(
                f"evaluation set {name} of run {run.run_id} was made on {made.env.eval_data} "
                f"({made.rollout.eval_problems} problems; {run.store.url(*parts)}); repeat that, or name "
                "this one with --as NAME"
            )
    return name


def evaluation_set_config(run: Run, data: str, problems: int | None) -> RunConfig:
    """The run's config evaluating `data` (its first `problems`, by default all of them)."""
    source = resolved_source(data)
    available = len(run.config.env_spec.load_problems(source))  # a ValueError names the file
    count = available if problems is None else min(problems, available)
    overrides = [f"env.eval_data={source}", f"rollout.eval_problems={count}"]
    return validate_config(apply_overrides(run.config.model_dump(mode="json"), overrides), "--eval-data")


def create_evaluation_set(run: Run, data: str, name: str | None = None, problems: int | None = None) -> str:
    """`check_evaluation_set`, then store the config (once) and register the stage; the stage's name."""
    name = check_evaluation_set(run, data, name, problems)
    if not run.store.exists(*config_parts(run, name)):
        run.store.write_text(
            dump_config(evaluation_set_config(run, data, problems)), *config_parts(run, name)
        )
    return evaluation_set_stage(name).name


def evaluation_set_stage(name: str) -> Stage:
    """The stage `evaluate-on/NAME` (registered on first use; its config is read from the run)."""
    full = stage_name(name)
    if full in REGISTRY:
        return REGISTRY[full]

    def config_of(run: Run) -> RunConfig:
        return set_config(run, name)

    def compute(run: Run, iteration: int) -> dict:
        return evaluate_iteration(run, iteration, full, config_of(run))

    return register(Stage(full, RESULTS, compute, describe, inputs=("update",), config_of=config_of))


def evaluation_set_names(run: Run) -> list[str]:
    """The run's evaluation sets (each has its config under RUN/evaluate-on/), their stages registered."""
    names = run.store.list(run.run_id, "evaluate-on")
    for name in names:
        evaluation_set_stage(name)
    return names
