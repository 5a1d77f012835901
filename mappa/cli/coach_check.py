"""`mappa coach-check RUN`: does each coach blame the agent that caused a failure? Arguments and table.

`--coach NAME[:coach.a=x coach.b=y]` (repeatable) names a coach and its `coach.*` overrides of the run's
config (as `mappa rescore --set` takes them); the presets need no overrides: `run` (the run's own coach),
`outcome`, `rubric`, `rubric-nogt`. Default: `run` and `outcome` (outcome-only's blame accuracy is the
floor: it gives every seat the same change).
"""

from __future__ import annotations

import argparse

from mappa.cli.render import console
from mappa.core.blame import corruption_accuracies

PRESETS = {
    "run": [],
    "outcome": ["coach.type=outcome"],
    "rubric": ["coach.type=rubric", "coach.use_ground_truth=true"],
    "rubric-nogt": ["coach.type=rubric", "coach.use_ground_truth=false"],
}


def add_coach_check_command(sub: argparse._SubParsersAction) -> None:
    check = sub.add_parser(
        "coach-check",
        help="plant a mistake in one agent's action, replay, and see whether each coach blames that agent",
    )
    check.add_argument("run_id")
    check.add_argument("--root", default="runs", help="the run's storage root (default: runs)")
    check.add_argument(
        "--iteration", type=int, default=0, help="whose stored rollout to replay (default 0: the base team's)"
    )
    check.add_argument(
        "--coach",
        action="append",
        metavar="NAME[:OVERRIDES]",
        help=f"a coach to check (repeatable): a preset ({', '.join(PRESETS)}) or NAME:coach.x=v coach.y=w "
        "(default: run and outcome)",
    )
    check.add_argument(
        "--evaluation",
        action="store_true",
        help="check the held-out evaluation of checkpoint --iteration (-1: the base team; greedy) instead of "
        "the iteration's rollout",
    )
    check.add_argument(
        "--team",
        choices=["policy", "reference"],
        default="policy",
        help="policy: the run's stored trajectories, later seats replayed by its weights (default); "
        "reference: the env's reference team (a fixed response per seat that does its part) on the first "
        "--problems held-out problems, for an env whose policy cannot do the task yet",
    )
    check.add_argument("--seats", nargs="+", help="the seats to corrupt (default: every seat)")
    check.add_argument("--problems", type=int, default=8, help="trajectories to replay, one per problem")
    check.add_argument("--debug", action="store_true", help="print tracebacks")
    check.set_defaults(func=cmd_coach_check)


def parse_coaches(specs: list[str] | None) -> dict[str, list[str]]:
    """{name: overrides} from `--coach` values; a preset's name alone, or NAME:overrides."""
    coaches: dict[str, list[str]] = {}
    for spec in specs or ["run", "outcome"]:
        name, _, overrides = spec.partition(":")
        name = name.strip()
        if not overrides and name not in PRESETS:
            raise ValueError(
                f"--coach {spec!r}: not a preset ({', '.join(PRESETS)}); give its settings as "
                f"{name}:coach.type=... coach.template=..."
            )
        coaches[name] = overrides.split() if overrides else PRESETS[name]
    return coaches


def cmd_coach_check(args: argparse.Namespace) -> int:
    from mappa.blame.check import coach_configs, reference_team_problems, sample_trajectories
    from mappa.cli.commands import run_logged
    from mappa.storage.run import Run

    run = Run.open(args.root, args.run_id)  # fails fast, before Ray or Prefect start
    coaches = parse_coaches(args.coach)
    coach_configs(run, coaches)  # a bad coach setting stops here, before any model loads
    seats = list(args.seats or run.config.env_spec.seats)
    unknown = sorted(set(seats) - set(run.config.agents))
    if unknown:
        raise ValueError(f"--seats {', '.join(unknown)}: the run's seats are {', '.join(run.config.agents)}")
    if args.problems < 1:
        raise ValueError("--problems: check at least one trajectory")
    if args.team == "reference":
        reference_team_problems(run, args.problems)  # the env has one for these problems
    else:
        sample_trajectories(run, args.iteration, args.problems, args.evaluation)  # the trajectories exist
    from mappa.flows.coach_check import coach_check

    code, report = run_logged(
        args,
        args.run_id,
        args.root,
        run.config,
        lambda: coach_check(
            args.run_id, args.root, args.iteration, coaches, seats, args.problems, args.evaluation, args.team
        ),
    )
    if code:
        return code
    print_blame(report)
    return 0


def print_blame(report: dict) -> None:
    """The table: per coach and corrupted seat, blame accuracy and the penalties, in points of 10."""
    console.print(
        f"run {report['run']}, {report['folder']} ({report['trajectories']}): {report['replays']} replays of "
        f"{report['problems']} trajectories; downstream agents {report['downstream']}",
        markup=False,
        highlight=False,
    )
    w = max([10, *(len(row["seat"]) for row in report["rows"])])  # the seat column: DSBench's data_engineer
    header = f"  {'coach':<14} {'corrupted':<{w}} {'pairs':>5} {'blame acc.':>10} {'from success':>12} "
    header += f"{'its drop':>8} {'innocent up':>11} {'innocent down':>13} {'reporter':>8}"
    lines = [header]
    for row in report["rows"]:
        cells = [
            row[k] for k in ("innocent_penalty_upstream", "innocent_penalty_downstream", "reporter_penalty")
        ]
        up, down, reporter = ("-" if v is None else f"{v:+.2f}" for v in cells)
        sharp = row["blame_accuracy_from_success"]
        sharp = "-" if sharp is None else f"{sharp:.2f} ({row['pairs_from_success']})"
        lines.append(
            f"  {row['coach']:<14} {row['seat']:<{w}} {row['pairs']:>5} {row['blame_accuracy']:>10.2f} "
            f"{sharp:>12} {row['corrupted_seat_drop']:>+8.2f} {up:>11} {down:>13} {reporter:>8}"
        )
    lines.append("  blame accuracy per corruption (pairs):")
    for row in report["rows"]:
        lines.append(f"    {row['coach']:<14} {row['seat']:<{w}} {corruption_accuracies(row)}")
    lines.append(
        "  blame acc.: share of pairs whose corrupted seat lost strictly more than every other seat (from "
        "success: of the pairs whose original team succeeded); the rest are drops (original - corrupted) in "
        "points of 10"
    )
    console.print("\n".join(lines), markup=False, highlight=False)
    if report.get("upstream_changed"):
        console.print(f"note: {report['upstream_changed']} replays changed upstream (a random env?)")
