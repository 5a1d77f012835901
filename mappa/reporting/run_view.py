"""The read side of a run, for people: per-iteration summaries, per-agent stats and single trajectories.

Works on any store root (local folder or fsspec URL) from the artifacts alone; nothing here needs Ray,
Prefect, the stages or a model (the import-graph test keeps `mappa.reporting` so). Rendering (rich tables)
is the CLI's job; these functions return plain data.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from mappa.storage.frames import action_ids
from mappa.storage.run import OUTPUTS, Run

EVALUATE = "evaluate"  # the held-out evaluation's stage (`mappa.stages.evaluate`; reporting imports no stage)


TRAINING_SUCCESS = "training success (sampled)"
"""The default table's success column: the share of the iteration's sampled rollouts the env graded right."""
HELD_OUT_SUCCESS = "held-out success"
"""The greedy evaluation of the iteration's checkpoint (`mappa.stages.evaluate`), where there is one."""


def iteration_rows(run: Run) -> list[dict[str, Any]]:
    """One row per iteration that has a rollout: its sampled training success, the held-out success of its
    checkpoint (a column only where some iteration was evaluated), actions, mean coach score, stages."""
    rows = []
    for iteration in rolled_out_iterations(run):
        row: dict[str, Any] = {"iteration": iteration}
        finished = [s for s in OUTPUTS if run.has_manifest(iteration, s)]  # learning coach: coach-update
        rollout = run.read_manifest(iteration, "rollout") if "rollout" in finished else {}
        row[TRAINING_SUCCESS] = rollout.get("success_rate")
        evaluated = run.has_manifest(iteration, EVALUATE)
        row[HELD_OUT_SUCCESS] = run.read_manifest(iteration, EVALUATE)["success_rate"] if evaluated else None
        row["actions"] = rollout.get("rows")
        if run.store.exists(*run.output(iteration, "score")):
            scores = run.store.read_parquet(*run.output(iteration, "score"))["score"]
            row["mean coach score"] = float(scores.mean())
        row["finished stages"] = ", ".join(finished)
        rows.append(row)
    if all(row[HELD_OUT_SUCCESS] is None for row in rows):
        rows = [{k: v for k, v in row.items() if k != HELD_OUT_SUCCESS} for row in rows]
    return rows


def rolled_out_iterations(run: Run) -> list[int]:
    """The leading iterations 0, 1, ... whose rollout wrote its trajectories."""
    iterations = []
    while run.store.exists(*run.output(len(iterations), "rollout")):
        iterations.append(len(iterations))
    return iterations


def check_iteration(run: Run, iteration: int) -> None:
    """A ValueError naming the iterations the run has, when `iteration` is not one of them."""
    have = rolled_out_iterations(run)
    if iteration in have:
        return
    configured = f"its config asks for {run.config.iterations}"
    if not have:
        raise ValueError(
            f"run {run.run_id} has no rolled-out iteration yet ({configured}; nothing under "
            f"{run.store.url(run.run_id, 'iter-0000', 'rollout')}); `mappa resume {run.run_id}` continues it"
        )
    span = f"{have[0]}-{have[-1]}" if len(have) > 1 else str(have[0])
    base = " (-1 is the base model: it has evaluations only, `--evaluations`)" if iteration == -1 else ""
    raise ValueError(
        f"run {run.run_id} has no iteration {iteration}{base}: iterations {span} are rolled out "
        f"({configured}); pick one of them with --iteration K"
    )


def scored_actions(run: Run, iteration: int) -> pd.DataFrame:
    """The iteration's actions joined with their scores (one row per action); a ValueError naming the
    run's iterations when it has no iteration `iteration`."""
    check_iteration(run, iteration)
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


def find_trajectory(run: Run, wanted: str) -> tuple[pd.DataFrame, int | None]:
    """All actions of one trajectory with scores, in order, and the index of the action asked for:
    `wanted` is a trajectory id (`iter-0002-p7-s0`, index None) or an action id (`iter-0002-p7-s0/3`, as
    `mappa inspect RUN --iteration K` prints them). The iteration is read from the id where it starts with
    one (`iter-0002-`), else every rolled-out iteration is searched."""
    action = re.fullmatch(r"(.+)/(\d+)", wanted)
    candidates = [(wanted, None)] + ([(action.group(1), int(action.group(2)))] if action else [])
    named = re.match(r"iter-(\d{4,})-", wanted)
    searched = rolled_out_iterations(run)
    if named and int(named.group(1)) in searched:
        searched = [int(named.group(1))]
    example = None
    for iteration in searched:
        frame = scored_actions(run, iteration)
        example = example or (str(frame["trajectory_id"].iloc[0]) if len(frame) else None)
        for trajectory_id, index in candidates:
            found = frame[frame["trajectory_id"] == trajectory_id].sort_values("index")
            if not len(found):
                continue
            if index is not None and index not in set(found["index"]):
                last = int(found["index"].max())
                raise ValueError(
                    f"trajectory {trajectory_id} of run {run.run_id} has actions 0-{last}, not {index}; "
                    f"`mappa inspect {run.run_id} --trajectory {trajectory_id}` shows them all"
                )
            return found, index
    shape = f" (trajectory ids look like {example}, action ids like {example}/0)" if example else ""
    where = f"iteration {searched[0]}" if len(searched) == 1 else f"{len(searched)} iterations"
    raise ValueError(
        f"no trajectory or action {wanted} in the rollouts of run {run.run_id} ({where} searched){shape}; "
        f"`mappa inspect {run.run_id} --iteration K` lists action ids"
    )


def action_training(run: Run, iteration: int) -> pd.DataFrame | None:
    """What trained each action of `iteration` (indexed by action id; None before its advantages stage):
    its response tokens, the mean advantage over them, the return G_0 at its first token (reward minus the
    KL penalty over the action) and the reward R the coach score became (after `algo.baseline`, scale and
    clip: R = r_T + beta * kl_T, `mappa.core.advantages`). A frozen seat's actions have no row."""
    if not run.store.exists(*run.output(iteration, "advantages")):
        return None
    experiences = run.store.read_parquet(*run.output(iteration, "advantages"))
    beta = run.config.algo.beta
    rows = {
        str(e["action_id"]): {
            "tokens": len(e["advantages"]),
            "mean_advantage": float(sum(e["advantages"]) / len(e["advantages"])),
            "return": float(e["returns"][0]),
            "reward": float(e["rewards"][-1] + beta * e["kl"][-1]),
        }
        for e in experiences.to_dict("records")
        if len(e["advantages"])
    }
    columns = ["tokens", "mean_advantage", "return", "reward"]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)
