"""The read side of a run, for people: per-iteration summaries, per-agent stats and single trajectories.

Works on any store root (local folder or fsspec URL) from the artifacts alone; nothing here needs Ray,
Prefect, the stages or a model (the import-graph test keeps `mappa.storage` so). Rendering (rich tables)
is the CLI's job; these functions return plain data.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from mappa.storage.frames import action_ids
from mappa.storage.run import TRAINING, Run


def iteration_rows(run: Run) -> list[dict[str, Any]]:
    """One row per iteration that has a rollout: success rate, actions, mean score, stage status."""
    rows = []
    iteration = 0
    while run.store.exists(*run.output(iteration, "rollout")):
        row: dict[str, Any] = {"iteration": iteration}
        finished = [s for s in TRAINING if run.has_manifest(iteration, s)]
        rollout = run.read_manifest(iteration, "rollout") if "rollout" in finished else {}
        row["success_rate"] = rollout.get("success_rate")
        row["actions"] = rollout.get("rows")
        if run.store.exists(*run.output(iteration, "score")):
            row["mean_score"] = float(run.store.read_parquet(*run.output(iteration, "score"))["score"].mean())
        row["finished stages"] = ", ".join(finished)
        rows.append(row)
        iteration += 1
    return rows


def scored_actions(run: Run, iteration: int) -> pd.DataFrame:
    """The iteration's actions joined with their scores (one row per action)."""
    actions = run.store.read_parquet(*run.output(iteration, "rollout"))
    actions["action_id"] = action_ids(actions)
    if not run.store.exists(*run.output(iteration, "score")):
        return actions.assign(score=float("nan"), rationale=None, parse_status="not scored yet")
    scores = run.store.read_parquet(*run.output(iteration, "score"))
    return actions.merge(
        scores[["action_id", "score", "rationale", "parse_status"]], on="action_id", how="left"
    )


def agent_stats(frame: pd.DataFrame) -> pd.DataFrame:
    """Per agent: actions, mean/std/min/max coach score, mean response tokens."""
    frame = frame.assign(tokens=frame["response_token_ids"].map(len))
    grouped = frame.groupby("agent")
    return pd.DataFrame(
        {
            "actions": grouped.size(),
            "mean_score": grouped["score"].mean(),
            "std_score": grouped["score"].std(ddof=0),
            "min_score": grouped["score"].min(),
            "max_score": grouped["score"].max(),
            "mean_tokens": grouped["tokens"].mean(),
        }
    ).reset_index()


def extreme_actions(frame: pd.DataFrame, count: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The `count` lowest and highest scored actions."""
    ordered = frame.sort_values("score", kind="stable")
    return ordered.head(count), ordered.tail(count).iloc[::-1]


def find_trajectory(run: Run, trajectory_id: str) -> pd.DataFrame:
    """All actions of one trajectory with scores, in order; the iteration is read from the id."""
    iteration = 0
    while run.store.exists(*run.output(iteration, "rollout")):
        frame = scored_actions(run, iteration)
        found = frame[frame["trajectory_id"] == trajectory_id]
        if len(found):
            return found.sort_values("index")
        iteration += 1
    raise ValueError(
        f"no trajectory {trajectory_id} in run {run.run_id}; "
        "`mappa inspect RUN --iteration K` shows action ids"
    )
