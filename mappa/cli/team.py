"""`mappa export` and `mappa ask`: the arguments, and a thin layer over `mappa.team` that prints.

`mappa export RUN DIR [--iteration K] [--dtype D]` writes each trainable agent as a Hugging Face model
folder with a team card (`mappa.team.export`); `mappa ask RUN "problem" [--iteration K | --exported DIR]
[--answer A] [--coach]` runs the team on one problem and prints each seat's input, output, tool result and
(with --coach) the coach's verdict, then the team's final answer (`mappa.team.ask`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from mappa.cli.render import console

ROOT_HELP = "the run's storage root (default: runs)"


def add_team_commands(sub: argparse._SubParsersAction) -> None:
    """The `export` and `ask` sub-commands."""
    from mappa.team.hf_folder import DTYPES

    export = sub.add_parser(
        "export",
        help="write a run's trained agents as standalone Hugging Face model folders with a team card",
    )
    export.add_argument("run_id")
    export.add_argument(
        "out", metavar="DIR", help="a new or empty folder: DIR/<agent>/ per trained agent, TEAM.md, team.json"
    )
    export.add_argument("--root", default="runs", help=ROOT_HELP)
    export.add_argument(
        "--iteration", type=int, help="checkpoint to export (default: the last finished; -1: the base team)"
    )
    export.add_argument(
        "--dtype", choices=DTYPES, default="float32", help="the weights' dtype (default float32)"
    )
    export.set_defaults(func=cmd_export)
    ask = sub.add_parser("ask", help="run a run's team on one problem of yours and show what each agent did")
    ask.add_argument("run_id")
    ask.add_argument("question", help='the problem, e.g. "What is 6 times 7?"')
    ask.add_argument("--root", default="runs", help=ROOT_HELP)
    weights = ask.add_mutually_exclusive_group()
    weights.add_argument(
        "--iteration", type=int, help="checkpoint to ask (default: the last finished; -1: the base team)"
    )
    weights.add_argument("--exported", metavar="DIR", help="ask the agents `mappa export` wrote to DIR")
    ask.add_argument(
        "--answer", help="the right answer: the team's is graded against it (and a coach may see it)"
    )
    ask.add_argument(
        "--coach",
        action="store_true",
        help="score each action with the run's coach (greedy; nothing is stored)",
    )
    ask.set_defaults(func=cmd_ask)


def quiet_transformers() -> None:
    """No progress bar per model load and save: the commands print one line per agent."""
    from transformers.utils import logging

    logging.disable_progress_bar()


def cmd_export(args: argparse.Namespace) -> int:
    from mappa.storage.run import Run, iteration_label
    from mappa.team.checkpoint import chosen_iteration
    from mappa.team.export import TEAM_CARD, export_team

    run = Run.open(args.root, args.run_id)
    iteration = chosen_iteration(run, args.iteration)
    out = Path(args.out)
    console.print(
        f"[bold]mappa export[/bold] run [cyan]{run.run_id}[/cyan], checkpoint {iteration_label(iteration)}, "
        f"{args.dtype}, to {out.resolve()}",
        highlight=False,
    )
    quiet_transformers()
    facts = export_team(run, iteration, out, args.dtype, say=lambda text: console.print(text, markup=False))
    exported = facts["held_out"]["exported"]
    if exported:
        console.print(
            f"held-out success of {facts['checkpoint']}: {exported['success']:.1%}", highlight=False
        )
    console.print(f"team card: {(out / TEAM_CARD).resolve()}", markup=False, highlight=False)
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from mappa.storage.run import Run
    from mappa.team.ask import ask_team
    from mappa.team.checkpoint import BASE, chosen_iteration

    run = Run.open(args.root, args.run_id)
    exported = Path(args.exported) if args.exported else None
    iteration = BASE if exported else chosen_iteration(run, args.iteration)
    quiet_transformers()
    asked = ask_team(run, args.question, args.answer, iteration, exported, args.coach)
    print_asked(run.run_id, asked)
    return 0


def print_asked(run_id: str, asked) -> None:
    """Seat by seat: the input, the output, the tool's result and the coach's verdict; then the answer."""
    trajectory = asked.trajectory
    scores = {score.action_id.rsplit("/", 1)[-1]: score for score in asked.scores or []}
    console.print(f"[bold]mappa ask[/bold] run {run_id}, weights {asked.weights}, greedy", highlight=False)
    console.print(f"problem: {trajectory.problem.question}", markup=False, highlight=False)
    for action in trajectory.actions:
        console.rule(f"{action.index + 1}. {action.agent} (turn {action.turn})", style="cyan")
        console.print("[bold]input[/bold]")
        console.print(shown(action.observation), markup=False, highlight=False)
        console.print("[bold]output[/bold]")
        console.print(shown(action.response), markup=False, highlight=False)
        result = action.tool_result
        if result is not None:
            status = "timed out" if result.timed_out else f"exit {result.exit_code}"
            extra = f", {result.error}" if result.error else ""
            console.print(f"[bold]tool[/bold] (sandbox: {status}{extra}, {result.duration_s:.2f} s)")
            console.print(
                (result.stdout + result.stderr).rstrip() or "(no output)", markup=False, highlight=False
            )
        score = scores.get(str(action.index))
        if score is not None:
            console.print(
                f"[bold]coach[/bold] {score.score:.1f}/10 ({score.parse_status}): ", end="", highlight=False
            )
            console.print(score.rationale, markup=False, highlight=False)
    console.rule(style="cyan")
    verdict = (
        ("correct" if trajectory.correct else f"wrong (expected {trajectory.problem.answer})")
        if (asked.graded)
        else "not graded (no --answer)"
    )
    console.print(f"final answer: {trajectory.final_answer}: {verdict}", markup=False, highlight=False)


def shown(text: str) -> str:
    """Model text as printed: blank text said so, runs of blank lines kept to one."""
    if not text.strip():
        return f"(blank: {len(text)} whitespace characters)"
    return re.sub(r"\n\s*\n\s*\n", "\n\n", text.strip("\n"))
