"""Does the coach blame the right agent? `mappa coach-check` across envs and coaches (issue 47).

For each env: a one-iteration run of its CPU config under the outcome coach (the cheapest), the base team
evaluated greedily on `--eval-problems` held-out problems (`mappa evaluate RUN --iteration -1`), then
`mappa coach-check RUN --evaluation --iteration -1` on `--problems` of them (the base team's successes
first: from a success, a corruption alone makes the difference) with every coach of the env's list. Each
check plants the env's corruptions and the generic ones (empty, cut, echo) in each seat's last action,
replays the later seats greedily with the base weights (an original replay reproduces the evaluation), and
scores original and corrupted replays alike; `mappa.core.blame` turns the pairs into blame accuracy, the
innocent-seat penalty (up- and downstream) and the reporter penalty.

DSBench is checked on its reference team instead (`--team reference`, `mappa.envs.dsbench.reference_team`:
fixed pandas and scikit-learn programs that solve the builtin tasks): SmolLM2-135M's programs crash before
saving anything, so deleting X_train.pkl after them changes nothing. With the reference team the modeler's
program, run again, meets "file not found" (the MAPPA paper's case); the later seats do not adapt.

Coaches (a name and its `coach.*` overrides of the env's config):

    outcome        the trajectory's success for every action: every seat moves alike (the floor)
    rubric(-nogt)  the env's explicit rules with (without) ground truth, where the env has a rubric
    facts          MathChat's AI coach as shipped: Qwen2.5-Coder-0.5B, yes/no facts with the reference
                   answer written in (`mathchat-facts`, criteria)
    facts-own      the same without the solver's question about the team's final answer
                   (`mathchat-facts-own`; it still asks the solver about the team's wrong answer)
    facts-step     no question whose asking depends on the outcome (`mathchat-facts-step`: each seat is
                   asked only about its own step)
    judge(-nogt)   Qwen2.5-Coder-0.5B asked one seat-agnostic yes/no question ("Did this agent do its own
                   part of the task correctly?", the `judge` template, criteria), with (without) ground
                   truth: no hand-written questions; the learning coach's start (`coach.learn`)
    generic(-nogt) Qwen2.5-Coder-0.5B reading the step and judging it (the `generic` template, expected
                   score over the score tokens), with (without) ground truth: no hand-written questions
    env            the env's own coach as its config ships it (codepair: its questions, criteria)

Output: a table per env and `--out` JSON whose `records` each name `env`, `coach`, `seat`,
`blame_accuracy` and the penalties. Runs under `--root` are reused (`mappa train` and `mappa coach-check`
skip finished work). Not covered: several corruptions at once; Who&When's logs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from mappa.core.blame import corruption_accuracies

REPO = Path(__file__).resolve().parents[1]
QWEN = ["coach.type=local", "coach.model=qwen2.5-coder-0.5b"]
GENERIC = [*QWEN, "coach.scoring=expected", "coach.template=generic"]
JUDGE = [*QWEN, "coach.scoring=criteria", "coach.template=judge"]  # one seat-agnostic yes/no question
COACHES = {
    "outcome": ["coach.type=outcome"],
    "rubric": ["coach.type=rubric", "coach.use_ground_truth=true"],
    "rubric-nogt": ["coach.type=rubric", "coach.use_ground_truth=false"],
    "facts": [
        *QWEN,
        "coach.scoring=criteria",
        "coach.template=mathchat-facts",
        "coach.use_ground_truth=true",
    ],
    "facts-own": [
        *QWEN,
        "coach.scoring=criteria",
        "coach.template=mathchat-facts-own",
        "coach.use_ground_truth=true",
    ],
    "facts-step": [
        *QWEN,
        "coach.scoring=criteria",
        "coach.template=mathchat-facts-step",
        "coach.use_ground_truth=true",
    ],
    "judge": [*JUDGE, "coach.use_ground_truth=true"],
    "judge-nogt": [*JUDGE, "coach.use_ground_truth=false"],
    "generic": [*GENERIC, "coach.use_ground_truth=true"],
    "generic-nogt": [*GENERIC, "coach.use_ground_truth=false"],
    "env": [],  # filled from the env's config (`env_coach`)
}
ENVS = {  # env -> (config, its coaches, whose trajectories: `mappa coach-check --team`)
    "mathchat": (
        "configs/mathchat-cpu-learn.yaml",
        [
            "outcome",
            "rubric",
            "rubric-nogt",
            "facts",
            "facts-own",
            "facts-step",
            "judge",
            "judge-nogt",
            "generic",
            "generic-nogt",
        ],
        "policy",
    ),
    "dsbench": (  # SmolLM2-135M writes no working pipeline: its corrupted replays equal the originals
        "configs/dsbench-cpu.yaml",
        ["outcome", "rubric", "rubric-nogt", "judge", "judge-nogt", "generic", "generic-nogt"],
        "reference",
    ),
    "codepair": (
        "examples/mappa-codepair/codepair-cpu.yaml",
        ["outcome", "env", "judge", "judge-nogt", "generic", "generic-nogt"],
        "policy",
    ),
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--coaches", nargs="+", choices=list(COACHES), help="default: each env's list")
    parser.add_argument("--problems", type=int, default=8, help="trajectories per env (one per problem)")
    parser.add_argument("--eval-problems", type=int, default=64, help="held-out problems the base team tries")
    parser.add_argument(
        "--team",
        choices=["policy", "reference"],
        help="whose trajectories to check (default: each env's; DSBench: its reference team)",
    )
    parser.add_argument("--seats", nargs="+", help="the seats to corrupt (default: every seat)")
    parser.add_argument("--set", action="append", default=[], help="more overrides of every env's config")
    parser.add_argument("--root", default=str(REPO / "benchmarks" / "runs" / "blame"))
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "blame.json"))
    parser.add_argument(
        "--markdown",
        nargs="+",
        metavar="JSON",
        help="no runs: the README/docs table of these results files (blame accuracy and penalties per "
        "env, coach and corrupted seat, and per corruption)",
    )
    parser.add_argument(
        "--compact", action="store_true", help="with --markdown: one row per env and coach (README's table)"
    )
    parser.add_argument(
        "--from-report",
        nargs=2,
        metavar=("ENV", "REPORT"),
        help="no runs: take the rows of a finished `mappa coach-check` (its report.json) as env ENV's",
    )
    return parser.parse_args()


def mappa(*args: str) -> None:
    command = [str(Path(sys.executable).with_name("mappa")), *args]
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if done.returncode:
        raise SystemExit(f"error: `mappa {' '.join(args[:2])}` failed (exit {done.returncode}; see above)")


def base_team(args: argparse.Namespace, env: str, config: str, team: str) -> str:
    """A one-iteration run under the outcome coach, and (for the policy's check) its base team's held-out
    evaluation."""
    run_id = f"blame-{env}"
    sets = [
        "iterations=1",
        "coach.type=outcome",
        "rollout.problems_per_iteration=4",
        "rollout.samples_per_problem=1",
        "rollout.eval_every=0",
        f"rollout.eval_problems={args.eval_problems}",
        "algo.baseline=none",  # one sample per problem: no siblings to compare with
        f"storage.root={args.root}",
        *args.set,
    ]
    mappa("train", config, "--run-id", run_id, *[part for item in sets for part in ("--set", item)])
    if team == "policy":
        mappa("evaluate", run_id, "--root", args.root, "--iteration", "-1")
    return run_id


def env_coach(config: str) -> list[str]:
    """The coach the env's config ships, as overrides (the check's run was made with the outcome coach)."""
    import yaml

    coach = yaml.safe_load((REPO / config).read_text()).get("coach") or {}
    return [f"coach.{key}={value}" for key, value in coach.items() if not isinstance(value, (dict, list))]


def check(args: argparse.Namespace, env: str, run_id: str, coaches: list[str], team: str) -> dict:
    overrides = {name: COACHES[name] or env_coach(ENVS[env][0]) for name in coaches}
    specs = [f"{name}:{' '.join(settings)}" for name, settings in overrides.items()]
    command = ["coach-check", run_id, "--root", args.root, "--problems", str(args.problems)]
    command += ["--team", "reference"] if team == "reference" else ["--evaluation", "--iteration", "-1"]
    command += ["--seats", *args.seats] if args.seats else []
    mappa(*command, *[part for spec in specs for part in ("--coach", spec)])
    folder = "reference-team" if team == "reference" else "evaluate-base"
    return json.loads((Path(args.root) / run_id / "coach-check" / folder / "report.json").read_text())


def points(value: float | None) -> str:
    """A drop in points of 10, signed; "-" where the seat has no such neighbours."""
    return "-" if value is None else f"{value:+.2f}"


def markdown(paths: list[str]) -> str:
    """One table row per (env, coach, corrupted seat) of the results files: pairs, blame accuracy (and
    per corruption), the innocent seats' mean drop upstream and downstream, from the JSON as the benchmark
    wrote it."""
    lines = [
        "| env | coach | corrupted seat | pairs | blame accuracy | per corruption | innocent up "
        "| innocent down |",
        "|---|---|---|---|---|---|---|---|",
    ]

    for path in paths:
        for r in json.loads(Path(path).read_text())["records"]:
            lines.append(
                f"| {r['env']} | `{r['coach']}` | {r['seat']} | {r['pairs']} | {r['blame_accuracy']:.2f} "
                f"| {corruption_accuracies(r)} | {points(r['innocent_penalty_upstream'])} "
                f"| {points(r['innocent_penalty_downstream'])} |"
            )
    return "\n".join(lines)


def compact(paths: list[str]) -> str:
    """One row per env and coach (README): blame accuracy per corrupted seat, and the innocent seats' drop
    upstream and downstream per corrupted seat, seats in acting order, from the JSON as written."""
    lines = [
        "| env | coach | seats | blame accuracy | innocent up | innocent down |",
        "|---|---|---|---|---|---|",
    ]

    for path in paths:
        rows: dict[tuple[str, str], list[dict]] = {}
        for r in json.loads(Path(path).read_text())["records"]:
            rows.setdefault((r["env"], r["coach"]), []).append(r)
        for (env, coach), seats in rows.items():
            accuracy = " / ".join(format(r["blame_accuracy"], ".2f") for r in seats)
            lines.append(
                f"| {env} | `{coach}` | {' / '.join(r['seat'] for r in seats)} "
                f"| {accuracy} "
                f"| {' / '.join(points(r['innocent_penalty_upstream']) for r in seats)} "
                f"| {' / '.join(points(r['innocent_penalty_downstream']) for r in seats)} |"
            )
    return "\n".join(lines)


def main() -> int:
    args = parse_args()
    if args.markdown:
        print((compact if args.compact else markdown)(args.markdown))
        return 0
    args.root = str(Path(args.root).resolve())
    started = time.time()
    records, reports = [], {}
    if args.from_report:
        env, path = args.from_report
        reports[env] = json.loads(Path(path).read_text())
        records += [{"env": env, **row} for row in reports[env]["rows"]]
    for env in [] if args.from_report else args.envs:
        config, default_coaches, team = ENVS[env]
        team = args.team or team
        coaches = [c for c in (args.coaches or default_coaches) if c in default_coaches]
        run_id = base_team(args, env, config, team)
        reports[env] = check(args, env, run_id, coaches, team)
        records += [{"env": env, **row} for row in reports[env]["rows"]]
    header = f"{'env':<9} {'coach':<13} {'seat':<14} {'pairs':>5} {'blame acc.':>10} {'innocent':>8}"
    print(f"\n{header} {'reporter':>8}")  # innocent: mean drop of the other seats, points of 10
    for r in records:
        innocent = "-" if r["innocent_penalty"] is None else f"{r['innocent_penalty']:+.2f}"
        reporter = "-" if r["reporter_penalty"] is None else f"{r['reporter_penalty']:+.2f}"
        print(
            f"{r['env']:<9} {r['coach']:<13} {r['seat']:<14} {r['pairs']:>5} {r['blame_accuracy']:>10.2f} "
            f"{innocent:>8} {reporter:>8}"
        )
    print(f"\n{'env':<9} {'coach':<13} {'seat':<14} {'corruption':<16} {'pairs':>5} {'blame acc.':>10}")
    for r in records:
        for name, figures in r.get("by_corruption", {}).items():
            print(
                f"{r['env']:<9} {r['coach']:<13} {r['seat']:<14} {name:<16} {figures['pairs']:>5} "
                f"{figures['blame_accuracy']:>10.2f}"
            )
    out = {
        "benchmark": "blame",
        "date": time.strftime("%Y-%m-%d"),
        "settings": vars(args),
        "coaches": {env: report["coaches"] for env, report in reports.items()},  # name -> coach.* overrides
        "records": records,
        "reports": {
            env: {k: v for k, v in report.items() if k != "pairs"} for env, report in reports.items()
        },
        "wall_s": time.time() - started,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"\nwrote {args.out} in {out['wall_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
