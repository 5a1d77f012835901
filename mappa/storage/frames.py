"""Stage data <-> data frames: one row per action, as the parquet artifacts hold them (docs/architecture.md).

`trajectories.parquet` repeats each trajectory's problem and outcome on every one of its action rows,
so one file answers both "what did agent X do" and "did the team succeed". Nested sandbox results are
stored as a struct column. Readers rebuild the frozen dataclasses of `mappa.core.types`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import pandas as pd

from mappa.core.types import (
    ActionScore,
    Experience,
    Problem,
    Trajectory,
    action_from_record,
    action_id,
    to_record,
)
from mappa.storage.run import OUTPUTS, Run


def trajectories_to_frame(trajectories: Sequence[Trajectory], iteration: int) -> pd.DataFrame:
    rows = []
    for trajectory in trajectories:
        problem = trajectory.problem
        for action in trajectory.actions:
            row = to_record(action)
            row.update(
                iteration=iteration,
                question=problem.question,
                gold_answer=problem.answer,
                problem_meta=json.dumps(problem.meta, sort_keys=True),
                final_answer=trajectory.final_answer,
                correct=trajectory.correct,
                outcome=json.dumps(trajectory.outcome, sort_keys=True),
            )
            rows.append(row)
    return pd.DataFrame(rows)


def frame_to_trajectories(frame: pd.DataFrame) -> list[Trajectory]:
    trajectories = []
    for trajectory_id, group in frame.groupby("trajectory_id", sort=False):
        group = group.sort_values("index")
        first = group.iloc[0]
        problem = Problem(
            id=first["problem_id"],
            question=first["question"],
            answer=first["gold_answer"],
            meta=json.loads(first["problem_meta"]),
        )
        actions = tuple(action_from_record(_plain_row(r)) for r in group.to_dict("records"))
        final = first["final_answer"] if isinstance(first["final_answer"], str) else None
        outcome = json.loads(first["outcome"]) if isinstance(first.get("outcome"), str) else {}
        trajectories.append(
            Trajectory(str(trajectory_id), problem, actions, final, bool(first["correct"]), outcome)
        )
    return trajectories


def action_ids(actions: pd.DataFrame) -> pd.Series:
    """`Action.id` of every row of a trajectories frame (the key that scores and experiences carry)."""
    return pd.Series(
        [action_id(t, int(i)) for t, i in zip(actions["trajectory_id"], actions["index"])],
        index=actions.index,
        dtype=object,
    )


EXPERIENCE_FIELDS = tuple(field.name for field in dataclasses.fields(Experience))
_INT_LISTS = ("prompt_token_ids", "response_token_ids")
_FLOAT_LISTS = ("old_logprobs", "ref_logprobs", "kl", "rewards", "returns", "advantages")


def experiences_to_frame(experiences: Sequence[Experience]) -> pd.DataFrame:
    """experiences.parquet: one row per `Experience`, its fields as columns (token lists as lists)."""
    rows = [{name: getattr(e, name) for name in EXPERIENCE_FIELDS} for e in experiences]
    frame = pd.DataFrame(rows, columns=list(EXPERIENCE_FIELDS))
    for name in (*_INT_LISTS, *_FLOAT_LISTS):
        frame[name] = frame[name].map(list)
    return frame


def frame_to_experiences(frame: pd.DataFrame) -> list[Experience]:
    """The rows of experiences.parquet as `Experience`s (parquet gives numpy arrays: plain tuples here)."""
    missing = [name for name in EXPERIENCE_FIELDS if name not in frame.columns]
    if missing:
        raise ValueError(f"experiences frame lacks columns {missing}; re-run the advantages stage")
    out = []
    for row in frame.to_dict("records"):
        fields = {name: tuple(int(x) for x in row[name]) for name in _INT_LISTS}
        fields |= {name: tuple(float(x) for x in row[name]) for name in _FLOAT_LISTS}
        out.append(
            Experience(
                action_id=str(row["action_id"]), agent=str(row["agent"]), score=float(row["score"]), **fields
            )
        )
    return out


def scores_to_frame(scores: Sequence[ActionScore]) -> pd.DataFrame:
    """scores.parquet: one row per `ActionScore`; `criteria` as a list of {question, p_yes} (or null)."""
    rows = [dataclasses.asdict(s) | {"criteria": _criteria_rows(s.criteria)} for s in scores]
    return pd.DataFrame(rows)


def frame_to_scores(frame: pd.DataFrame) -> list[ActionScore]:
    """The rows of scores.parquet as `ActionScore`s (files written before a field existed lack it)."""
    out = []
    for row in frame.to_dict("records"):
        criteria = row.pop("criteria", None)
        template = row.pop("template", None)  # parquet may give NaN for a missing string
        template = template if isinstance(template, str) else None
        out.append(ActionScore(**row, template=template, criteria=_criteria_of(criteria)))
    return out


def read_scores(run: Run, iteration: int, stage: str = "score") -> list[ActionScore]:
    """Stage `stage`'s scores.parquet of iteration `iteration` as `ActionScore`s: the score stage's, or a
    re-scoring's (`rescore/NAME`). How every stage reads a coach's verdicts back."""
    return frame_to_scores(run.store.read_parquet(*run.parts(iteration, stage, OUTPUTS["score"])))


def _criteria_rows(criteria: dict[str, float] | None) -> list[dict[str, object]] | None:
    if criteria is None:
        return None
    return [{"question": question, "p_yes": float(p)} for question, p in criteria.items()]


def _criteria_of(rows: object) -> dict[str, float] | None:
    """Back from the list of {question, p_yes} (parquet gives a numpy array of dicts, or None)."""
    if rows is None or (isinstance(rows, float) and rows != rows):
        return None
    return {str(row["question"]): float(row["p_yes"]) for row in rows}


def _plain_row(row: dict) -> dict:
    """pyarrow hands back NaN rather than None for missing strings."""
    return {**row, "tool_call": row["tool_call"] if isinstance(row.get("tool_call"), str) else None}
