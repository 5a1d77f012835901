"""Experiment trackers: each finished iteration's figures as scalars, for the tools researchers follow RL runs
in: TensorBoard (on by default: `tensorboard --logdir ROOT/RUN_ID/tensorboard`), W&B and MLflow when the
config enables them (the sinks: `mappa.reporting.tracker_sinks`).

Names follow verl's, with the agent last (`critic/score/mean/solver`, `actor/pg_loss/executor`,
`actor/kl/verifier`, `response_length/mean/solver`, `timing_s/rollout`, `train/success_rate`,
`coach/parse/fallback`, `coach/unscored/solver`: the actions out of the gradient, `coach/criterion/solver/
<question's first words>`: the criteria coach's mean P(Yes)), one step per iteration. `iteration_metrics`
reads them from the run's artifacts; `log_iteration` writes them (the report stage calls it once per
iteration; a resumed run does not report a finished iteration again), with a table of a few sampled actions
(`sample_actions`: agent, score, parse status, rationale, a trimmed response) for the trackers that show
tables (W&B, MLflow; TensorBoard as text); a tracker that fails at the table is warned about, not raised.
The train flow logs `val/success_rate` after each evaluation. Nothing secret is logged: numbers derived
from the artifacts, and the agents' and coach's own texts.

Not covered: per-step (micro-batch) curves.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from mappa.reporting.tracker_sinks import TensorBoardSink, open_trackers
from mappa.storage.frames import action_ids
from mappa.storage.run import TRAINING, Run

TENSORBOARD = "tensorboard"
SAMPLES_TABLE = "coach/samples"
SAMPLE_ROWS = 8
TABLE_ERRORS = (OSError, ValueError, KeyError, TypeError, RuntimeError, ImportError, AttributeError)
"""What a tracker may raise at a table (a version without tables, a lost connection): warned, not raised."""


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
    experiences = run.store.read_parquet(*run.output(iteration, "advantages"))
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
    scalars |= coach_metrics(run, iteration)
    return {name: float(value) for name, value in scalars.items() if value is not None and not pd.isna(value)}


def coach_metrics(run: Run, iteration: int) -> dict[str, float]:
    """The coach's figures: verdicts by parse status, unscored actions per agent (out of the gradient),
    and the criteria coach's mean P(Yes) per agent and question."""
    score = run.read_manifest(iteration, "score")
    scalars = {f"coach/parse/{status}": float(n) for status, n in (score.get("parse_status") or {}).items()}
    advantages = (
        run.read_manifest(iteration, "advantages") if run.has_manifest(iteration, "advantages") else {}
    )
    unscored = advantages.get("unscored") or {}
    scalars |= {f"coach/unscored/{agent}": float(n) for agent, n in unscored.items()}
    for agent, questions in (score.get("criteria_means") or {}).items():
        names = criterion_names(list(questions))
        scalars |= {f"coach/criterion/{agent}/{names[q]}": float(p) for q, p in questions.items()}
    return scalars


def criterion_names(questions: list[str], words: int = 6) -> dict[str, str]:
    """A short, distinct scalar name per question: its first `words` words in lowercase, joined by `_`
    ("Does the agent's output end with ...?" -> `does_the_agents_output_end_with`)."""
    names: dict[str, str] = {}
    for question in questions:
        tokens = re.findall(r"[a-z0-9]+", question.lower().replace("'", ""))
        name = "_".join(tokens[:words]) or "criterion"
        if name in names.values():
            name = f"{name}_{len(names) + 1}"
        names[question] = name
    return names


def sample_actions(run: Run, iteration: int, rows: int = SAMPLE_ROWS, chars: int = 300) -> list[dict]:
    """A few of the iteration's actions (seeded by the run's seed and the iteration), in rollout order:
    agent, score, parse status, rationale and response, the texts cut to `chars` characters."""
    scores = run.store.read_parquet(*run.output(iteration, "score"))
    actions = run.store.read_parquet(*run.output(iteration, "rollout"))
    responses = dict(zip(action_ids(actions), actions["response"]))
    picked = scores.sample(n=min(rows, len(scores)), random_state=run.config.seed + iteration).sort_index()
    return [
        {
            "action_id": str(row["action_id"]),
            "agent": str(row["agent"]),
            "score": float(row["score"]),
            "parse_status": str(row.get("parse_status") or "ok"),
            "rationale": _cut(str(row.get("rationale") or ""), chars),
            "response": _cut(str(responses.get(row["action_id"], "")), chars),
        }
        for row in picked.to_dict("records")
    ]


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 3] + "..."


def log_scalars(run: Run, step: int, scalars: dict[str, float]) -> None:
    """Write `scalars` at `step` to every tracker the run's config enables."""
    if run.config.trackers.tensorboard:
        log_tensorboard(run, step, scalars)
    for sink in open_trackers(run):
        sink.log(step, scalars)


def log_tensorboard(run: Run, step: int, scalars: dict[str, float]) -> Path:
    """One event file with `scalars` at `step` in the run's TensorBoard folder; returns the local folder."""
    return with_tensorboard(run, lambda board: board.log(step, scalars))


def with_tensorboard(run: Run, write: Callable[[TensorBoardSink], None]) -> Path:
    """`write` to a new event file in the run's TensorBoard folder (a remote root: written locally, then
    copied there); returns the local folder."""
    if run.store.is_local:
        folder = Path(run.store.path(run.run_id, TENSORBOARD))
    else:
        folder = Path(tempfile.mkdtemp(prefix="mappa-tensorboard-"))
    sink = TensorBoardSink(folder)
    try:
        write(sink)
    finally:
        sink.close()
    if not run.store.is_local:
        run.store.put_folder(folder, run.run_id, TENSORBOARD, move=True)
    return folder


def log_iteration(run: Run, iteration: int, curves: pd.DataFrame) -> None:
    """Iteration `iteration`'s scalars (`iteration_metrics`) and sampled actions to the run's trackers."""
    log_scalars(run, iteration, iteration_metrics(run, iteration, curves))
    try:
        rows = sample_actions(run, iteration)
    except TABLE_ERRORS as exc:  # (a run written by hand may lack the texts)
        logging.getLogger(__name__).warning("no sampled actions for iteration %d: %s", iteration, exc)
        return
    log_table(run, iteration, SAMPLES_TABLE, rows)


def log_table(run: Run, step: int, name: str, rows: list[dict]) -> None:
    """`rows` as table `name` at `step` in every tracker the run enables; a failure is only a warning."""
    writers: list[Callable[[], object]] = []
    if run.config.trackers.tensorboard:
        writers.append(lambda: with_tensorboard(run, lambda board: board.log_table(step, name, rows)))
    writers += [functools.partial(sink.log_table, step, name, rows) for sink in open_trackers(run)]
    for write in writers if rows else []:
        try:
            write()
        except TABLE_ERRORS as exc:
            logging.getLogger(__name__).warning("table %s of step %d not logged: %s", name, step, exc)
