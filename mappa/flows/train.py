"""The `train` flow: iterations of rollout -> score -> advantages -> update -> report, as Prefect tasks,
with an evaluation on held-out problems every `rollout.eval_every` iterations.

Each iteration is a subflow run (`iteration-0003`) holding its stages, each stage waiting for the one
before it, so the run's page in the Prefect UI draws the iteration diagram and a retried run finds the
finished iterations done. A readable sequence of calls and nothing else: the stages live in `mappa.stages`
(one module each), and every stage skips itself when its artifacts are complete, so running the flow again
with the same run id continues where the run stopped. Progress goes to the flows' loggers, one line per
stage. An outage of the Prefect API is waited through, stage by stage (`mappa.flows.prefect_outage`).
"""

from __future__ import annotations

import functools
import time
from typing import Any

from prefect import flow, get_run_logger
from prefect import runtime as prefect_runtime

from mappa.cluster.ray_cluster import COACH, HOST, release_workers
from mappa.config import load_config, override_config
from mappa.envs.overlap import overlap_report
from mappa.flows.prefect_outage import Outage, crash_abandoned_subflows
from mappa.flows.stage_tasks import configure_stage
from mappa.flows.summary import run_summary
from mappa.reporting.tracker_sinks import check_trackers, close_trackers
from mappa.reporting.trackers import log_scalars
from mappa.resources import check_resources
from mappa.sandbox import check_isolation
from mappa.stages import describe_stage, iteration_stages
from mappa.stages.evaluate import evaluation_rows
from mappa.stages.report import publish_evaluation
from mappa.storage.run import Run
from mappa.storage.store import ArtifactStore


def flow_run_name() -> str:
    """The flow run's name in the Prefect UI: the run id (`<id>-resume` for `mappa resume`), or the config's
    name with the time when the id is generated inside the flow."""
    parameters = prefect_runtime.flow_run.parameters
    run_id = parameters.get("run_id") or f"new-run-{time.strftime('%Y%m%d-%H%M%S')}"
    return f"{run_id}-resume" if parameters.get("resume_root") else run_id


@flow(name="mappa-train", flow_run_name=flow_run_name, log_prints=True)
def train(
    config_path: str | None = None,
    overrides: list[str] | None = None,
    run_id: str | None = None,
    iterations: int | None = None,
    resume_root: str | None = None,
) -> dict[str, Any]:
    """Train a run for `iterations` (default: the config's) and return its summary.

    With `resume_root` (and `run_id`), the run's stored config is used instead of `config_path`.

    Args:
        config_path: The run's YAML config, e.g. configs/mathchat-cpu.yaml. A relative path is relative to
            the folder `mappa serve` (or the worker) runs in, usually the project's checkout; a path that
            does not exist there is refused before anything starts. Not needed with resume_root.
        overrides: Dotted settings applied on top of the config, one per entry, e.g. ["algo.beta=0.02",
            "rollout.problems_per_iteration=32"] (values are read as YAML).
        run_id: The run's name (letters, digits, '-', '_', '.'); a run id that exists continues that run
            (with the same config). Empty: <config name>-<time>.
        iterations: How many iterations the run should have in all (default: the config's).
        resume_root: The storage root of an existing run to continue (e.g. runs or s3://bucket/runs), with
            run_id: its stored config is used and config_path is ignored.
    """
    overrides = list(overrides or [])
    if iterations is not None:
        overrides.append(f"iterations={iterations}")
    if resume_root is not None:
        stored = Run.open(resume_root, run_id)
        config = override_config(stored.config, overrides, stored.store.url(run_id, "config.yaml"))
    else:
        config = load_config(config_path, overrides)
    check_isolation(config.sandbox.isolation)  # before any folder, worker or model: names the fix
    check_trackers(config)
    written = ArtifactStore(config.storage.root).size(run_id, "checkpoints") if run_id else 0.0
    check_resources(config, written)  # disk and memory (the CLI checked too; a deployment run had not)
    run = Run.create(config, run_id or new_run_id(config.name))
    logger = get_run_logger()
    record_overlap(run)
    logger.info("run %s -> %s", run.run_id, run.store.url(run.run_id))
    root = config.storage.root
    outage = Outage(config.retries.prefect_outage_s, logger.warning)
    with run.lock():  # a second flow on this run id is refused here, before it touches a worker
        try:
            for iteration in range(config.iterations):
                step = functools.partial(iteration_result, root, run.run_id, iteration)
                name = f"iteration-{iteration:04d}"
                abandoned = functools.partial(
                    crash_abandoned_subflows, str(prefect_runtime.flow_run.id), name
                )
                outage.outlast(step, f"iteration {iteration}", abandoned)
        finally:
            release_workers(run.run_id, [*config.agents, HOST, COACH])
            close_trackers(run)
    return run_summary(run)


def iteration_result(root: str, run_id: str, iteration: int) -> None:
    """Run iteration `iteration` as its subflow run; a failed one raises its stage's error."""
    state = train_iteration(root, run_id, iteration, return_state=True)
    if not state.is_completed():
        state.result()  # raises the stage's error, failing the flow run


@flow(name="mappa-iteration", flow_run_name="iteration-{iteration:04d}", log_prints=True)
def train_iteration(root: str, run_id: str, iteration: int) -> None:
    """One training iteration of run `run_id`: its stages in order, its report, and its evaluation when
    `rollout.eval_every` asks for one.

    Args:
        root: The run's storage root (a folder or a URL such as s3://bucket/runs).
        run_id: The run.
        iteration: Which iteration (0 is the first).
    """
    run = Run.open(root, run_id)
    logger = get_run_logger()
    outage = Outage(run.config.retries.prefect_outage_s, logger.warning)
    before = None  # the previous stage's state: the graph's arrow into the next one
    for name in iteration_stages(run.config):
        before, manifest = run_stage(outage, run, name, iteration, after=before)
        logger.info(describe_stage(name, iteration, manifest))
        for warning in manifest.get("bias_warnings") or []:  # the coach-bias watch
            logger.warning(warning["message"])
    # a report that cannot write to the store stops the run
    done = [run_stage(outage, run, "report", iteration, after=before)[0]]
    every = run.config.rollout.eval_every
    if every and (iteration + 1) % every == 0:
        done.append(evaluate_iteration(outage, run, iteration, logger, after=before))
    # older checkpoints go last, once the newest state has served everything that reads it
    _, manifest = run_stage(outage, run, "retention", iteration, after=done)
    logger.info(describe_stage("retention", iteration, manifest))


def run_stage(outage: Outage, run: Run, name: str, iteration: int, after=None) -> tuple[Any, dict[str, Any]]:
    """Stage `name` of `iteration` as its task, after the state(s) `after`: its state and its manifest
    (`skipped` when Prefect's cache answered); a failed stage raises its error, an outage is waited for."""

    def submit() -> tuple[Any, dict[str, Any]]:
        stage = configure_stage(name, run.config, run.run_id)
        wait_for = after if isinstance(after, list) else [after] if after else None
        state = stage(run.config.storage.root, run.run_id, iteration, return_state=True, wait_for=wait_for)
        manifest = state.result()  # a failed stage raises here, failing the iteration and the run
        outage.settle(state)
        if state.name == "Cached":  # Prefect's cache answered: the stage is complete
            manifest = {**manifest, "skipped": True}
        return state, manifest

    return outage.outlast(submit, f"{name} of iteration {iteration}")


def evaluate_iteration(outage: Outage, run: Run, iteration: int, logger, after):
    """The held-out evaluation of `iteration`'s checkpoint, its held-out success logged to the trackers
    once (when it ran, not when it was cached) and its table published; returns its state."""
    state, evaluated = run_stage(outage, run, "evaluate", iteration, after=after)
    if not evaluated.get("skipped"):
        log_scalars(run, iteration, {"val/success_rate": evaluated["success_rate"]})
    logger.info(describe_stage("evaluate", iteration, evaluated))
    rows = evaluation_rows(run, iteration)
    publish = functools.partial(publish_evaluation, run, iteration, rows)
    outage.outlast(publish, f"the table of iteration {iteration}'s evaluation")
    return state


def record_overlap(run: Run) -> None:
    """`RUN/data_overlap.json`: the held-out problems that repeat training ones (`mappa.envs.overlap`)
    and what `env.overlap` did; a warning line when there are any."""
    env, spec = run.config.env, run.config.env_spec
    train, held_out = (spec.load_problems(source) for source in (env.train_data, env.eval_data))
    report = {**overlap_report(train, held_out), "policy": env.overlap}
    run.store.write_json(report, run.run_id, "data_overlap.json")
    if report["overlapping"]:
        get_run_logger().warning(
            "%d of %d held-out problems repeat training problems (env.overlap=%s): %s",
            report["overlapping"],
            report["eval_problems"],
            env.overlap,
            run.store.url(run.run_id, "data_overlap.json"),
        )


def new_run_id(name: str) -> str:
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
