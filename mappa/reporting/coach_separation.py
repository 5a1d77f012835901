"""Does the run's own coach rank the actions of successful teams above those of failed ones? Per seat, the
AUC of the coach's scores (`iter-K/score/scores.parquet`) for telling the actions of trajectories the env
graded right from those of trajectories it graded wrong (`iter-K/rollout/trajectories.parquet`), per
iteration and pooled over the run (`mappa.core.auc`: Mann-Whitney, ties half; 0.5 = chance).

Actions the coach left unscored (parse status `fallback`) are left out: their score is a stand-in, and they
get no advantage. Actions scored by rule (parse status `rule`: no usable output) count, as they train.

What it is not: blame accuracy. A coach can order the actions by outcome (a high AUC) and still credit the
wrong seat within a trajectory, and a seat whose good work ends in a team's failure (a right solver, a wrong
executor) is scored well by a good coach and lowers this AUC. A coach that saw the reference answer
(`coach.use_ground_truth`) is expected to follow outcomes. `mappa rescore` with `mappa inspect --coaches`
compares coaches on the same actions; `benchmarks/coach_signal.py` measures agreement with a rubric.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from mappa.core.auc import auc
from mappa.core.types import UNSCORED
from mappa.reporting.run_view import rolled_out_iterations
from mappa.storage.run import Run

POOLED = "all"  # the iteration column of the rows pooled over the run's iterations


def scored_outcomes(run: Run, iteration: int) -> pd.DataFrame:
    """The iteration's scores (agent, score, parse_status) with each action's team outcome (`success`)."""
    outcomes = run.store.read_parquet(*run.output(iteration, "rollout"))[["trajectory_id", "correct"]]
    outcomes = outcomes.drop_duplicates("trajectory_id").rename(columns={"correct": "success"})
    scores = run.store.read_parquet(*run.output(iteration, "score"))
    frame = scores[["trajectory_id", "agent", "score", "parse_status"]].merge(outcomes, on="trajectory_id")
    return frame.assign(iteration=iteration, success=frame["success"].astype(bool))


def coach_separation(run: Run) -> list[dict[str, Any]]:
    """Per seat and scored iteration, then per seat pooled over them (iteration `all`): the AUC (None where
    one outcome is missing), the actions of successful and of failed teams, and the unscored left out."""
    iterations = rolled_out_iterations(run)
    frames = [scored_outcomes(run, i) for i in iterations if run.store.exists(*run.output(i, "score"))]
    if not frames:
        return []
    every = pd.concat(frames, ignore_index=True)
    rows = [_row(agent, i, group) for (agent, i), group in every.groupby(["agent", "iteration"], sort=True)]
    if len(frames) > 1:
        rows += [_row(agent, POOLED, group) for agent, group in every.groupby("agent", sort=True)]
    return rows


def _row(agent: str, iteration: int | str, group: pd.DataFrame) -> dict[str, Any]:
    scored = group[group["parse_status"] != UNSCORED]
    success = scored["success"].to_numpy(dtype=bool)
    return {
        "agent": agent,
        "iteration": iteration if iteration == POOLED else int(iteration),
        "auc": auc(scored["score"].to_numpy(dtype=float), success),
        "n_success": int(success.sum()),
        "n_failed": int((~success).sum()),
        "n_unscored": len(group) - len(scored),
    }
