"""The evaluate stage: a run's agents, with one checkpoint's weights, on held-out problems, greedily.

    {root}/{run_id}/iter-0003/evaluate/results.parquet       one row per problem: answer, correct, seconds
    {root}/{run_id}/iter-0003/evaluate/trajectories.parquet  one row per action, as the rollout stage's
    {root}/{run_id}/iter-0003/evaluate/_manifest.json        success rate, problems, timings; written last
    {root}/{run_id}/base/evaluate/...                        the same for the base model (iteration -1)
    {root}/{run_id}/iter-0003/evaluate-on/NAME/...           the same on another problem file (below)

`execute(run, K, "evaluate")` evaluates the weights saved by iteration K's update (the checkpoint of iteration
K, which iteration K + 1 would roll out with); `K = -1` evaluates the initial weights, before any update. The
problems are the first `rollout.eval_problems` of `env.eval_data`, in file order, so every evaluation of a run
sees the same ones (those repeating a training problem left out under `env.overlap: drop`, their count in the
manifest's `dropped_for_overlap`: `mappa.envs.overlap`); sampling uses `rollout.eval_temperature` (0: greedy)
and the run's seed. No coach is asked: an evaluation is graded against the ground truth only.

Complete, and skipped, when its manifest matches the config hash, the code version and the hash of the
evaluated iteration's update output (`mappa.stages.stage`; the base evaluation has no input). Not covered:
metrics beyond the success rate per problem (no pass@k, no per-kind breakdown), and evaluating several envs at
once.

The same stage runs on any other problem file as the stage `evaluate-on/NAME` (`mappa evaluate RUN
--eval-data FILE`, `mappa.stages.evaluate_on`): the functions here take that stage's name and config
(`stage`, `config`; by default the run's own held-out set).
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

from mappa.config import RunConfig
from mappa.core.types import Problem, Trajectory
from mappa.envs.outcome_summary import summarize_by_kind
from mappa.envs.overlap import find_overlap
from mappa.envs.spec import EnvSpec
from mappa.inference.engine import SamplingParams
from mappa.reporting.progress import StageProgress
from mappa.stages.rollout import roll_out
from mappa.stages.stage import (
    Stage,
    completed_iterations,
    output_parts,
    register,
    stage_complete,
    write_manifest,
)
from mappa.storage.checkpoints import require_checkpoint
from mappa.storage.frames import trajectories_to_frame
from mappa.storage.run import Run, iteration_label

STAGE_NAME = "evaluate"
BASE = -1  # the iteration number that stands for the initial weights
RESULTS = "results.parquet"
TRAJECTORIES = "trajectories.parquet"


def evaluation_label(iteration: int) -> str:
    """The folder of an evaluation: `iter-000K` for checkpoint K, `base` for the initial weights."""
    return iteration_label(iteration)


def evaluation_parts(run: Run, iteration: int, name: str, stage: str = STAGE_NAME) -> tuple[str, ...]:
    return run.parts(iteration, stage, name)


def last_trained_iteration(run: Run) -> int:
    """The last iteration with a complete update (the default checkpoint to evaluate)."""
    done = completed_iterations(run)
    if done == 0:
        raise ValueError(
            f"run {run.run_id} has no finished iteration yet; evaluate the base model with --iteration -1"
        )
    return done - 1


def check_evaluable(run: Run, iteration: int) -> None:
    """Raise a ValueError, before any model loads, when checkpoint `iteration` does not exist (never
    written, or deleted by checkpoint retention: `require_checkpoint` says what the run keeps)."""
    evaluation_label(iteration)
    if iteration == BASE:
        return
    if not stage_complete(run, iteration, "update"):
        raise ValueError(
            f"iteration {iteration} of run {run.run_id} has no complete update (no checkpoint to evaluate); "
            f"finish it with `mappa resume {run.run_id}` or pick an earlier --iteration"
        )
    for agent in (name for name, agent in run.config.agents.items() if agent.trainable):
        require_checkpoint(run, agent, iteration, "weights", f"evaluating iteration {iteration}")


def evaluation_complete(run: Run, iteration: int, stage: str = STAGE_NAME) -> bool:
    evaluation_label(iteration)
    return stage_complete(run, iteration, stage)


def evaluation_summaries(run: Run, stage: str = STAGE_NAME) -> list[dict[str, Any]]:
    """Every finished evaluation of the run by `stage` (one problem set), base first: its label, problems,
    `success` (the env's grading, `correct`), where the env records them `success_strict` (only a
    `\\boxed{}` answer counts: `correct_boxed`) and `success_flexible` (the env's answer, else the reply's
    last number: `correct_flexible`), and each seat's share of problems where it did its part (`by_seat`)."""
    rows = []
    for iteration in finished_evaluations(run, stage):
        manifest = run.read_manifest(iteration, stage)
        by_seat = manifest.get("by_seat") or {}
        rows.append(
            {
                "evaluation": manifest["label"],
                "problems": manifest["problems"],
                "success": manifest["success_rate"],
                **_present("success_strict", _strict_rate(run, iteration, stage, manifest)),
                **_present("success_flexible", manifest.get("success_rate_flexible")),  # the env's, if any
                **{f"{seat} did its part": by_seat[seat] for seat in run.config.agents if seat in by_seat},
            }
        )
    return rows


def _strict_rate(run: Run, iteration: int, stage: str, manifest: dict[str, Any]) -> float | None:
    """The manifest's `success_rate_boxed`, or (an evaluation written before the manifest held it) the mean
    of the results' `correct_boxed`; None where the env records no strict grading."""
    if "success_rate_boxed" in manifest:
        return manifest["success_rate_boxed"]
    return _mean(run.store.read_parquet(*output_parts(run, iteration, stage)), "correct_boxed")


def finished_evaluations(run: Run, stage: str = STAGE_NAME) -> list[int]:
    """The checkpoints evaluated by `stage`, base (-1) first."""
    names = run.store.list(run.run_id)
    iterations = [BASE] * ("base" in names) + sorted(
        int(name[5:]) for name in names if name.startswith("iter-") and name[5:].isdigit()
    )
    return [iteration for iteration in iterations if run.has_manifest(iteration, stage)]


def evaluation_change(run: Run, first: int, last: int, stage: str = STAGE_NAME) -> list[dict[str, Any]]:
    """Checkpoint `last` against `first` on the problems both evaluated (`lift_stats.change_rows`: all, then
    per kind where the results have a `kind` column): right before and after, the change with its 95%
    interval over problems, gained and lost."""
    from mappa.core.lift_stats import change_rows

    before, after = (run.store.read_parquet(*output_parts(run, i, stage)) for i in (first, last))
    paired = before.merge(after, on="problem_id", suffixes=("_before", "_after"))
    kinds = paired["kind_before"].astype(str).tolist() if "kind_before" in paired else None
    return change_rows(paired["correct_before"].to_numpy(), paired["correct_after"].to_numpy(), kinds)


def _present(key: str, value: Any) -> dict[str, Any]:
    return {} if value is None else {key: value}


def evaluation_rows(run: Run, iteration: int, stage: str = STAGE_NAME) -> list[dict[str, Any]]:
    """The results of a finished evaluation, one dict per problem."""
    return run.store.read_parquet(*output_parts(run, iteration, stage)).to_dict("records")


def held_out_problems(run: Run, config: RunConfig | None = None) -> tuple[list[Problem], int]:
    """The problems an evaluation runs (`env.eval_data` of `config`, by default the run's), and how many
    held-out problems `env.overlap: drop` left out for repeating training problems (0 under `warn` and
    `error`)."""
    config = config or run.config
    env, spec = config.env, config.env_spec
    problems = spec.load_problems(env.eval_data)
    if not problems:
        raise ValueError(f"env.eval_data {env.eval_data} holds no problems; point it at a held-out data set")
    dropped = 0
    if env.overlap == "drop":
        repeated = {o.eval_id for o in find_overlap(spec.load_problems(env.train_data), problems)}
        kept = [p for p in problems if p.id not in repeated]
        if not kept:
            raise ValueError(f"every problem of env.eval_data {env.eval_data} repeats a training problem")
        problems, dropped = kept, len(problems) - len(kept)
    return problems[: config.rollout.eval_problems], dropped


def results_frame(trajectories: list[Trajectory], spec: EnvSpec | None = None) -> pd.DataFrame:
    """One row per problem. `correct` is the env's grading; then the env's own columns (`EnvSpec.
    result_columns`: MathChat's strict `correct_boxed` and lenient `correct_flexible`, DSBench's metric and
    relative score) and `seat_<agent>`, whether each seat did its part (`EnvSpec.seat_checks`). `seconds`:
    the trajectory's generation plus sandbox time (problems run batched, so none has a wall-clock time of
    its own)."""
    result_columns = spec.result_columns if spec is not None else None
    seat_checks = spec.seat_checks if spec is not None else None
    rows = []
    for t in trajectories:
        seconds = sum(
            a.generation_s + (a.tool_result.duration_s if a.tool_result else 0.0) for a in t.actions
        )
        rows.append(
            {
                "problem_id": t.problem.id,
                "question": t.problem.question,
                "gold_answer": t.problem.answer,
                "final_answer": t.final_answer,
                "correct": bool(t.correct),
                **(result_columns(t) if result_columns else {}),
                "trajectory_id": t.id,
                "actions": len(t.actions),
                "seconds": float(seconds),
                **{f"seat_{seat}": done for seat, done in (seat_checks(t) if seat_checks else {}).items()},
            }
        )
    return pd.DataFrame(rows)


def evaluate_iteration(
    run: Run, iteration: int, stage: str = STAGE_NAME, config: RunConfig | None = None
) -> dict[str, Any]:
    """Evaluate checkpoint `iteration` (-1: the base model) as stage `stage` on `config`'s held-out
    problems (by default the run's): results, trajectories and the manifest."""
    check_evaluable(run, iteration)
    started = time.perf_counter()
    config = config or run.config
    label = evaluation_label(iteration)
    problems, dropped = held_out_problems(run, config)
    pairs = [(f"eval-{label}-{p.id}", p) for p in problems]
    params = SamplingParams(
        temperature=config.rollout.eval_temperature,
        top_p=1.0,
        max_new_tokens=config.rollout.max_new_tokens,
        seed=config.seed,
    )
    # roll_out's iteration is the one the weights serve: iteration K + 1 rolls out with checkpoint K
    progress = StageProgress("evaluate", iteration, len(pairs), "problems")
    weights = "the base weights" if iteration == BASE else f"the checkpoint of iteration {iteration}"
    trajectories = roll_out(run, pairs, iteration + 1, params, progress, "weights", f"evaluating {weights}")
    generated = time.perf_counter() - started
    results = results_frame(trajectories, config.env_spec)
    frame = trajectories_to_frame(trajectories, iteration)
    run.store.write_parquet(frame, *evaluation_parts(run, iteration, TRAJECTORIES, stage))
    run.store.write_parquet(results, *output_parts(run, iteration, stage))
    timings = {"rollout_s": generated, "total_s": time.perf_counter() - started}
    by_kind = summarize_by_kind(trajectories)
    return write_evaluation_manifest(run, iteration, results, timings, by_kind, dropped, stage, config)


def write_evaluation_manifest(
    run: Run,
    iteration: int,
    results: pd.DataFrame,
    timings: dict[str, float],
    by_kind: dict[str, Any] | None = None,
    dropped_for_overlap: int = 0,
    stage: str = STAGE_NAME,
    config: RunConfig | None = None,
) -> dict[str, Any]:
    """The manifest, written last (its presence marks the evaluation complete)."""
    config = config or run.config
    return write_manifest(
        run,
        iteration,
        stage,
        rows=len(results),
        timings=timings,
        label=evaluation_label(iteration),
        trajectories=run.store.url(*evaluation_parts(run, iteration, TRAJECTORIES, stage)),
        problems=len(results),
        eval_data=config.env.eval_data,
        dropped_for_overlap=dropped_for_overlap,
        temperature=config.rollout.eval_temperature,
        correct=int(results["correct"].sum()),
        success_rate=float(results["correct"].mean()),
        success_rate_boxed=_mean(results, "correct_boxed"),
        success_rate_flexible=_mean(results, "correct_flexible"),
        by_kind=by_kind,
        by_seat={c.removeprefix("seat_"): float(results[c].mean()) for c in results if c.startswith("seat_")},
    )


def _mean(results: pd.DataFrame, column: str) -> float | None:
    return float(results[column].mean()) if column in results else None


def describe(manifest: dict[str, Any]) -> str:
    return (
        f"{manifest['label']}: {manifest['correct']}/{manifest['problems']} held-out problems correct "
        f"({manifest['success_rate']:.0%})"
    )


STAGE = register(Stage(STAGE_NAME, RESULTS, evaluate_iteration, describe, inputs=("update",)))
