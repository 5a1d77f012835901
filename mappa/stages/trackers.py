"""Experiment trackers: each finished iteration's figures as scalars, for the tools researchers follow RL runs
in: TensorBoard (on by default: `tensorboard --logdir ROOT/RUN_ID/tensorboard`), W&B and MLflow when the
config enables them (the sinks: `mappa.storage.tracker_sinks`).

Names follow verl's, with the agent last (`critic/score/mean/solver`, `actor/pg_loss/executor`,
`actor/kl/verifier`, `response_length/mean/solver`, `timing_s/rollout`, `train/success_rate`,
`coach/parse/fallback`), one step per iteration. `iteration_metrics` reads them from the run's artifacts;
`log_iteration` writes them (the report stage calls it once per iteration; a resumed run does not report a
finished iteration again), and the train flow logs `val/success_rate` after each evaluation. Nothing secret
is logged: only numbers derived from the artifacts.

Not covered: per-step (micro-batch) curves.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pandas as pd

from mappa.stages.stage import TRAINING, output_parts
from mappa.storage.run import Run
from mappa.storage.tracker_sinks import TensorBoardSink, open_trackers

TENSORBOARD = "tensorboard"


def _mean_of_lists(column: pd.Series) -> float:
    values = [float(v) for row in column for v in row]
    return sum(values) / len(values) if values else math.nan


def iteration_metrics(run: Run, iteration: int, curves: pd.DataFrame) -> dict[str, float]:
    """The scalars of a finished iteration (`curves`: the run's history, `mappa.storage.history`)."""
    scalars: dict[str, float] = {}
    names = {
        "mean_score": "critic/score/mean",
        "std_score": "critic/score/std",
        "loss": "actor/pg_loss",
        "kl": "actor/kl",
        "approx_kl": "actor/ppo_kl",
        "clip_fraction": "actor/pg_clipfrac",
        "grad_norm": "actor/grad_norm",
        "tokens_per_s": "perf/tokens_per_s",
    }
    for row in curves[curves["iteration"] == iteration].to_dict("records"):
        for column, name in names.items():
            scalars[f"{name}/{row['agent']}"] = row[column]
        scalars["train/success_rate"] = row["success_rate"]
    experiences = run.store.read_parquet(*output_parts(run, iteration, "advantages"))
    for agent, frame in experiences.groupby("agent"):
        for column in ("rewards", "returns", "advantages"):
            if column in frame:  # (a run written by hand may lack some)
                scalars[f"critic/{column}/mean/{agent}"] = _mean_of_lists(frame[column])
        if "response_token_ids" in frame:
            scalars[f"response_length/mean/{agent}"] = float(frame["response_token_ids"].map(len).mean())
    for stage in TRAINING:
        if run.has_manifest(iteration, stage):
            manifest = run.read_manifest(iteration, stage)
            scalars[f"timing_s/{stage}"] = manifest.get("timings", {}).get("total_s", math.nan)
    score = run.read_manifest(iteration, "score")
    for status, count in (score.get("parse_status") or {}).items():
        scalars[f"coach/parse/{status}"] = float(count)
    return {name: float(value) for name, value in scalars.items() if value is not None and not pd.isna(value)}


def log_scalars(run: Run, step: int, scalars: dict[str, float]) -> None:
    """Write `scalars` at `step` to every tracker the run's config enables."""
    if run.config.trackers.tensorboard:
        log_tensorboard(run, step, scalars)
    for sink in open_trackers(run):
        sink.log(step, scalars)


def log_tensorboard(run: Run, step: int, scalars: dict[str, float]) -> Path:
    """One event file with `scalars` at `step` in the run's TensorBoard folder; returns the local folder."""
    if run.store.is_local:
        folder = Path(run.store.path(run.run_id, TENSORBOARD))
    else:
        folder = Path(tempfile.mkdtemp(prefix="mappa-tensorboard-"))
    sink = TensorBoardSink(folder)
    try:
        sink.log(step, scalars)
    finally:
        sink.close()
    if not run.store.is_local:
        run.store.put_folder(folder, run.run_id, TENSORBOARD, move=True)
    return folder


def log_iteration(run: Run, iteration: int, curves: pd.DataFrame) -> None:
    """Iteration `iteration`'s scalars (`iteration_metrics`) to the run's trackers."""
    log_scalars(run, iteration, iteration_metrics(run, iteration, curves))
