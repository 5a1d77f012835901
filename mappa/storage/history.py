"""A run's history: one row per (iteration, agent) of every finished iteration, kept in one run-level file
that the report appends to once per finished iteration.

    {root}/{run_id}/history.parquet

A row holds the agent's coach-score statistics (from `score/scores.parquet`), its trainer metrics (from
the update's manifest), the team's success rate (the rollout's manifest) and each training stage's
seconds: what the curves, the progress table and `mappa inspect --plot` show. The report of iteration K
reads and rewrites this one small file (a constant number of store requests, local or S3) instead of
re-reading every earlier iteration's manifests and scores (O(K) per report, O(K^2) over a run). The file
is rebuilt from the manifests only where it is missing (a run made before it existed) or lacks earlier
iterations; a re-run of an iteration's report replaces that iteration's rows. Manifests' hashes are not
checked here, so a run made by an older mappa still reads.

Not covered: evaluations (their own results under `iter-K/evaluate/`), several runs side by side.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from mappa.storage.run import MANIFEST, Run

HISTORY = "history.parquet"
SCORE_STATS = ("actions", "mean_score", "std_score", "min_score", "max_score")
TRAINER_METRICS = ("kl", "loss", "clip_fraction", "approx_kl", "grad_norm", "tokens_per_s")
CURVE_COLUMNS = ("iteration", "agent", *SCORE_STATS, *TRAINER_METRICS, "success_rate")
"""What the curves draw from (`mappa.reporting.curves`): per iteration and agent."""
TIMED_STAGES = ("rollout", "score", "advantages", "update")
STAGE_SECONDS = tuple(f"{stage}_s" for stage in TIMED_STAGES)
COLUMNS = (*CURVE_COLUMNS, *STAGE_SECONDS)
SCORES = ("score", "scores.parquet")  # the score stage's output (`mappa.stages.score`)
_ITERATION_FOLDER = re.compile(r"^iter-(\d{4,})$")


def run_history(run: Run) -> pd.DataFrame:
    """Every finished iteration's rows (`COLUMNS`), from the history file, or rebuilt from the manifests
    where there is none. Raises ValueError when no iteration has finished."""
    frame = _stored(run)
    if frame is None:
        frame = _rows_frame(run, finished_iterations(run))
    if frame.empty:
        raise ValueError(
            f"run {run.run_id} has no finished iteration (no iter-*/update/_manifest.json under "
            f"{run.store.url(run.run_id)}); curves need at least one completed update stage"
        )
    return frame


def record_iteration(run: Run, iteration: int) -> pd.DataFrame:
    """Add finished iteration `iteration`'s rows to the history file (replacing any it had) and return the
    history up to it. Reads the file and this iteration's artifacts only; earlier iterations the file lacks
    are read from their manifests once."""
    if not run.has_manifest(iteration, "update"):
        raise ValueError(
            f"iteration {iteration} of run {run.run_id} has no update manifest "
            f"({run.store.url(*run.parts(iteration, 'update', MANIFEST))}); report finished ones only"
        )
    stored = _stored(run)
    kept = stored[stored["iteration"] != iteration] if stored is not None else _rows_frame(run, [])
    have = set(kept["iteration"])
    missing = [i for i in range(iteration) if i not in have and run.has_manifest(i, "update")]
    parts = [df for df in (kept, _rows_frame(run, [*missing, iteration])) if not df.empty]
    frame = pd.concat(parts).sort_values(["iteration", "agent"], kind="stable").reset_index(drop=True)
    run.store.write_parquet(frame, run.run_id, HISTORY)
    return frame[frame["iteration"] <= iteration].reset_index(drop=True)


def finished_iterations(run: Run) -> list[int]:
    """Iterations whose update stage wrote its manifest, in order (a listing of the run's folder)."""
    found = (_ITERATION_FOLDER.match(name) for name in run.store.list(run.run_id))
    iterations = sorted(int(m.group(1)) for m in found if m)
    return [i for i in iterations if run.has_manifest(i, "update")]


def _stored(run: Run) -> pd.DataFrame | None:
    if not run.store.exists(run.run_id, HISTORY):
        return None
    return run.store.read_parquet(run.run_id, HISTORY)


def _rows_frame(run: Run, iterations: list[int]) -> pd.DataFrame:
    rows = [row for iteration in iterations for row in iteration_rows(run, iteration)]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.astype({"iteration": int, "actions": int}) if rows else frame


def iteration_rows(run: Run, iteration: int) -> list[dict[str, Any]]:
    """One row per agent of a finished iteration: the agents the coach scored plus those the trainer
    updated (a frozen agent has NaN trainer metrics)."""
    trained = run.read_manifest(iteration, "update").get("agents", {})
    success = run.read_manifest(iteration, "rollout").get("success_rate")
    scores = pd.DataFrame({"agent": pd.Series([], dtype=str), "score": pd.Series([], dtype=float)})
    if run.store.exists(*run.parts(iteration, *SCORES)):
        scores = run.store.read_parquet(*run.parts(iteration, *SCORES))
    seconds = {
        f"{stage}_s": run.read_manifest(iteration, stage).get("timings", {}).get("total_s", math.nan)
        if run.has_manifest(iteration, stage)
        else math.nan
        for stage in TIMED_STAGES
    }
    rows = []
    for agent in sorted(set(scores["agent"]) | set(trained)):
        values = scores.loc[scores["agent"] == agent, "score"].astype(float)  # empty: the stats are NaN
        metrics = trained.get(agent, {})
        rows.append(
            {
                "iteration": iteration,
                "agent": agent,
                "actions": len(values),
                "mean_score": values.mean(),
                "std_score": values.std(ddof=0),
                "min_score": values.min(),
                "max_score": values.max(),
                **{name: float(metrics.get(name, math.nan)) for name in TRAINER_METRICS},
                "success_rate": math.nan if success is None else float(success),
                **seconds,
            }
        )
    return rows
