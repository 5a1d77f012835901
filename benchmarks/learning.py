"""Does the coach's signal make the team better? MathChat under several reward sources, evaluated held out.

Trains the three MathChat agents (SmolLM2-135M-Instruct each, `configs/mathchat-cpu-learn.yaml`: one-step
problems, 16 per iteration x 4 samples each, the sibling baseline, 3 iterations) under each reward source at
equal samples (the same problems, sampling seeds and updates per iteration), and evaluates the team
greedily on held-out problems before training (the base model, shared by every run: the same weights,
greedy) and after the last iteration:

    llm       an AI coach, no hand rules: Qwen2.5-Coder-0.5B-Instruct with ground truth, asked one fact per
              question about each action (`coach.template=mathchat-facts`, `coach.scoring=criteria`)
    llm-learn a coach that learns, no hand-written questions: the same model asked one seat-agnostic
              question (`coach.template=judge`), its Yes/No readout a head learned after every score
              stage from counterfactual pairs (`coach.learn.signal=pairs`, `mappa.stages.coach_update`)
    outcome   outcome only: the trajectory's correctness (10 or 0) given to every action
    rubric    (optional) the rubric coach's explicit rules with ground truth (`mappa.envs.mathchat.rubric`)
    rubric-nogt  (optional) the rubric without ground truth: it judges each action alone

Held-out success is reported strictly (the verifier's `\\boxed{}` answer, as the trainer grades it) and
flexibly (else its last number, as lm-eval's GSM8K "flexible-extract"). `--eval-data FILE` evaluates on a
JSONL file of `problem`/`answer` rows instead of the config's held-out split.

The held-out sets: the config's split, and the TEST FILE `benchmarks/data/mathchat-test-level1.jsonl`
(256 problems balanced over add, subtract, multiply and two-step and over expression, phrased and word
forms, written before any tuning by an author blind to the generators; its sha256 is checked). A run
that chooses settings passes `--tuning`: it evaluates on the VALIDATION file `mathchat-blind-level1.jsonl`
(the recipe's executor tokens were chosen on it) instead, never on the test file.

Per kind and targets (`learning_report.py`): every lift also per operation and per form of problem, a
kind whose seeds x problems interval lies below 0 flagged as a regression, and per set the targets
(best coach >= +10 over the base and >= +5 over outcome-only, seed-level intervals above 0, no kind
worse) computed as met or missed into the JSON's `targets`.

Output: a table (mean and half-range over seeds), JSON (`--out`) whose `summary` is a list of rows
`{source, seed, iteration, heldout_success, heldout_success_flexible, heldout_n}` (iteration = updates
trained; success a fraction), and a plot beside it (`--plot`): held-out success and the mean training
score per iteration, one line per source, bars for the seed spread. `--replot` redraws both from the JSON.
The JSON also keeps each held-out problem's 0/1 for the base and every run (`per_problem`), so runs of
several invocations, sessions or machines can be paired later without their run folders
(`combine_learning.py`, beside this file).

Each run is a real `mappa train` in a subprocess (its own Ray and Prefect), inspectable afterwards with
`mappa inspect RUN --root ROOT`; runs already finished under `--root` are reused (finished stages are
skipped), so an interrupted benchmark continues where it stopped. The script first checks that the
evaluation problems share none with the training split and that every source's models are prepared.

Default size, and its time on this 2-core CPU machine: see BENCHMARKS.md ("Does it learn?").
Each lift comes with a 95% paired bootstrap interval over problems, a seed-level interval (Student's t
over seeds) and the problems gained and lost against the base (`mappa.core.lift_stats`). Not covered:
other envs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from mappa.stages import completed_iterations

sys.path.insert(0, str(Path(__file__).resolve().parent))  # comparison: beside this file
from comparison import machine_info  # noqa: E402
from learning_report import markdown_tables, print_kinds, print_targets, set_targets  # noqa: E402

from mappa.core.types import Problem  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SOURCES = {
    "rubric": ["coach.type=rubric", "coach.use_ground_truth=true"],
    "llm": [  # Qwen2.5-Coder-0.5B asked one fact per question (mathchat-facts; `mappa models prepare`)
        "coach.type=local",
        "coach.scoring=criteria",
        "coach.model=qwen2.5-coder-0.5b",
        "coach.template=mathchat-facts",
        "coach.use_ground_truth=true",
    ],
    "llm-learn": [  # the same model, one seat-agnostic question, its readout learned from the run (issue 48)
        "coach.type=local",
        "coach.scoring=criteria",
        "coach.model=qwen2.5-coder-0.5b",
        "coach.template=judge",
        "coach.use_ground_truth=true",
        "coach.learn.signal=pairs",
    ],
    "outcome": ["coach.type=outcome"],
    "rubric-nogt": ["coach.type=rubric", "coach.use_ground_truth=false"],
}
DATA = REPO / "benchmarks" / "data"
TEST_FILE = DATA / "mathchat-test-level1.jsonl"  # written before any tuning; evaluated in final runs only
TEST_SHA256 = "3af29e7bb132b9ecbf78c9b6df6f1a4613b5f375b66dd95b98454dead01cd8ab"  # also in BENCHMARKS.md
VALIDATION_FILE = DATA / "mathchat-blind-level1.jsonl"  # the recipe was chosen on it: a validation set
COLUMNS = ("correct_flexible", "correct_boxed")  # an evaluation's strict and flexible success per problem
DEFAULT_SOURCES = ["llm", "outcome"]  # the AI coach against outcome-only; `rubric` on request


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "mathchat-cpu-learn.yaml"))
    parser.add_argument("--iterations", type=int, help="default: the config's")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sources", nargs="+", default=DEFAULT_SOURCES, choices=list(SOURCES))
    parser.add_argument("--eval-data", help="a JSONL file of problem/answer rows to evaluate on")
    parser.add_argument("--eval-problems", type=int, help="default: the config's rollout.eval_problems")
    parser.add_argument(
        "--also-eval",
        action="append",
        metavar="FILE",
        help="also evaluate on this JSONL file's problems, in the same pass, reported apart (repeatable; "
        f"default: the test file {TEST_FILE.name}, with --tuning the validation file {VALIDATION_FILE.name})",
    )
    parser.add_argument(
        "--tuning",
        action="store_true",
        help="a run that chooses settings: evaluate on the validation file, never on the test file",
    )
    parser.add_argument("--set", action="append", default=[], help="more config overrides (a.b=value)")
    parser.add_argument("--root", default=str(REPO / "benchmarks" / "runs" / "learning"))
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "learning.json"))
    parser.add_argument("--plot", help="default: --out with .png")
    parser.add_argument("--replot", action="store_true", help="table and plot from --out's JSON; no runs")
    parser.add_argument(
        "--markdown", action="store_true", help="with --replot: the README/docs tables from --out's JSON"
    )
    args = parser.parse_args()
    args.plot = args.plot or str(Path(args.out).with_suffix(".png"))
    if args.also_eval is None:
        args.also_eval = [str(VALIDATION_FILE if args.tuning else TEST_FILE)]
    if args.tuning and any(Path(path).resolve() == TEST_FILE.resolve() for path in args.also_eval):
        parser.error(f"--tuning runs never evaluate on the test file {TEST_FILE.name}")
    return args


def common_overrides(args: argparse.Namespace) -> tuple[list[str], dict[str, list[str]]]:
    """What every run of this benchmark shares: evaluation after the last iteration only, on --eval-data
    (else the config's held-out split) and every --also-eval file; and the problem ids of each such set."""
    from mappa.config import load_config

    config = load_config(args.config, args.set)
    iterations = args.iterations or config.iterations
    sets = [f"iterations={iterations}", f"rollout.eval_every={iterations}", f"storage.root={args.root}"]
    if args.eval_data:
        sets.append(f"env.eval_data={Path(args.eval_data).resolve()}")
    if args.eval_problems:
        sets.append(f"rollout.eval_problems={args.eval_problems}")
    sets.extend(args.set)
    eval_sets, combined = evaluation_sets(args, load_config(args.config, sets))
    if combined is not None:
        sets += [f"env.eval_data={combined}", f"rollout.eval_problems={sum(map(len, eval_sets.values()))}"]
    return sets, eval_sets


def evaluation_sets(args: argparse.Namespace, config) -> tuple[dict[str, list[Problem]], str | None]:
    """The held-out sets by name (the first: --eval-data's or the config's split), each a list of problems,
    and with --also-eval the path of one JSONL holding them all (written under --root), which the runs
    evaluate on at once: one greedy pass per checkpoint, split by problem id in the report."""
    from mappa.envs.mathchat.problems import load_problems, write_jsonl

    primary = config.env_spec.load_problems(config.env.eval_data)[: config.rollout.eval_problems]
    name = Path(args.eval_data).stem if args.eval_data else "heldout"
    problems = {name: primary}
    for path in args.also_eval:
        problems[Path(path).stem] = load_problems(Path(path).resolve())
    if len(problems) < len(args.also_eval) + 1:
        raise SystemExit(f"--also-eval: two held-out sets share a name ({', '.join(args.also_eval)})")
    ids = [p.id for group in problems.values() for p in group]
    if len(set(ids)) < len(ids):
        raise SystemExit("the held-out sets share problem ids; give each file's rows ids of their own")
    if not args.also_eval:
        return problems, None
    combined = Path(args.root) / "eval-sets.jsonl"
    write_jsonl([p for group in problems.values() for p in group], combined)
    return problems, str(combined)


def check_splits_disjoint(config_path: str, overrides: list[str]) -> dict[str, int]:
    from mappa.config import load_config

    config = load_config(config_path, overrides)
    train = config.env_spec.load_problems(config.env.train_data)
    held_out = config.env_spec.load_problems(config.env.eval_data)[: config.rollout.eval_problems]
    shared = {p.question.strip() for p in train} & {p.question.strip() for p in held_out}
    if shared:
        raise SystemExit(
            f"the evaluation problems share {len(shared)} with training, e.g. {sorted(shared)[0]!r}"
        )
    return {"train_problems": len(train), "eval_problems": len(held_out), "shared": 0}


def check_models(args: argparse.Namespace, common: list[str]) -> None:
    """Before the first run: each source's run passes `mappa train`'s pre-flight (its models resolve, the
    disk and memory suffice), so a coach model that is not prepared stops the benchmark in one line naming
    `mappa models prepare`, not after other sources' runs."""
    from mappa.config import load_config
    from mappa.preflight import check_before_run
    from mappa.resources import ResourceError
    from mappa.sandbox import SandboxUnavailableError

    for source in args.sources:
        config = load_config(args.config, [*common, *SOURCES[source], *args.set])
        try:
            check_before_run(config, None, say=lambda _: None)
        except (ValueError, FileNotFoundError, SandboxUnavailableError, ResourceError) as error:
            raise SystemExit(f"error: source {source}: {error}") from None


def mappa(*args: str) -> None:
    """One `mappa` command in a subprocess; its output goes to this terminal. A failed one ends the benchmark
    with one line (its own error is above it); finished runs stay, and a rerun skips them."""
    command = [str(Path(sys.executable).with_name("mappa")), *args]
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if done.returncode:
        what = " ".join(args[:2])
        raise SystemExit(f"error: `mappa {what}` failed (exit {done.returncode}; its error is above)")


def run_id(source: str, seed: int) -> str:
    return f"learning-{source}-s{seed}"


def train_one(args: argparse.Namespace, common: list[str], source: str, seed: int) -> str:
    # --set last: it may change a source's own settings (say coach.template for the llm source)
    sets = [*common, f"seed={seed}", f"name={run_id(source, seed)}", *SOURCES[source], *args.set]
    mappa("train", args.config, "--run-id", run_id(source, seed), *[x for s in sets for x in ("--set", s)])
    return run_id(source, seed)


def evaluate_base(args: argparse.Namespace, run: str) -> None:
    from mappa.stages.evaluate import evaluation_complete
    from mappa.storage.run import Run

    if not evaluation_complete(Run.open(args.root, run), -1):
        mappa("evaluate", run, "--root", args.root, "--iteration", "-1")


def evaluation(args: argparse.Namespace, run_name: str, iteration: int, ids: list[str]) -> dict | None:
    """Strict and flexible success of checkpoint `iteration` (-1: base) on problems `ids`, if evaluated."""
    from mappa.stages.evaluate import evaluation_complete, evaluation_parts
    from mappa.storage.run import Run

    run = Run.open(args.root, run_name)
    if not evaluation_complete(run, iteration):
        return None
    results = run.store.read_parquet(*evaluation_parts(run, iteration, "results.parquet"))
    results = results.set_index("problem_id").loc[ids]
    return {
        "heldout_success": float(results["correct_boxed"].mean()),
        "heldout_success_flexible": float(results["correct_flexible"].mean()),
        "heldout_n": len(results),
    }


def training_curves(args: argparse.Namespace, run_name: str) -> dict:
    """Per iteration: mean coach score, KL and training success per agent; the run's stage times (the
    evaluations' too, where an iteration was evaluated)."""
    from mappa.storage.history import run_history
    from mappa.storage.run import Run

    run = Run.open(args.root, run_name)
    curves = run_history(run).sort_values("iteration")
    agents = {
        agent: {"mean_score": g["mean_score"].tolist(), "kl": g["kl"].tolist()}
        for agent, g in curves.groupby("agent")
    }
    stage_s, coach = {}, []
    for iteration in range(completed_iterations(run)):
        for stage in ("rollout", "score", "coach-update", "advantages", "update", "evaluate"):
            parts = run.parts(iteration, stage, "_manifest.json")
            if stage in ("coach-update", "evaluate") and not run.store.exists(*parts):
                continue  # a coach that does not learn; an iteration not evaluated
            manifest = run.store.read_json(*parts)
            stage_s.setdefault(stage, []).append(round(manifest["timings"]["total_s"], 1))
            if stage == "coach-update":
                coach.append(coach_learning(iteration, manifest))
    success = curves.groupby("iteration")["success_rate"].first().tolist()
    learned = {"coach_learning": coach} if coach else {}
    return {"agents": agents, "train_success": success, "stage_s": stage_s, **learned}


def coach_learning(iteration: int, manifest: dict) -> dict:
    """What one coach-update says of the head in force (out of sample: the outcome AUC of its scores on the
    iteration's actions, the blame check on its fresh replays) and of what it learned (issue 48)."""
    blame = {row["seat"]: row for row in manifest["blame_before"]}
    return {
        "iteration": iteration,
        "outcome_auc": manifest["outcome_auc"],
        "blame_accuracy": {seat: row["blame_accuracy"] for seat, row in blame.items()},
        "innocent_penalty": {seat: row["innocent_penalty"] for seat, row in blame.items()},
        "pairs": manifest["rows"],
        "pair_accuracy": [manifest["pair_accuracy_before"], manifest["pair_accuracy_after"]],
        "moved": manifest["moved"],
        "timings": manifest["timings"],
    }


def per_problem(args: argparse.Namespace, run_name: str, iteration: int, ids: list[str]) -> dict:
    """{column: 0/1 per problem of `ids` (in that order)} of checkpoint `iteration` (-1: base), strict and
    flexible, from one read of its evaluation."""
    from mappa.stages.evaluate import evaluation_parts
    from mappa.storage.run import Run

    run = Run.open(args.root, run_name)
    results = run.store.read_parquet(*evaluation_parts(run, iteration, "results.parquet"))
    results = results.set_index("problem_id").loc[ids]
    return {column: results[column].astype(float).to_numpy() for column in COLUMNS}


def print_lifts(lifts: dict, name: str = "held-out") -> None:
    """The lifts with their intervals, per seed, and gained / lost problems (flexible success)."""
    print(f"\nchange in {name} success (flexible), mean over seeds [95% paired bootstrap over problems]")
    for source, figures in lifts["correct_flexible"].items():
        base = figures["vs_base"]
        low, high = base["ci95"]
        line = f"{source:<13} vs base {base['mean']:+6.1%} [{low:+.1%}, {high:+.1%}]"
        line += f" seeds ({_per_seed(base)}),"
        line += f" gained {base['gained']} lost {base['lost']} of {base['problems']}"
        line += _seed_level(base)
        if "vs_outcome" in figures:
            other = figures["vs_outcome"]
            low, high = other["ci95"]
            line += f"; vs outcome {other['mean']:+.1%} [{low:+.1%}, {high:+.1%}] seeds ({_per_seed(other)})"
            line += _seed_level(other)
        print(line)


def _seed_level(figures: dict) -> str:
    """The seed-level interval (Student's t over seeds), what a target is judged on."""
    interval = figures.get("seed_ci95")
    return "" if interval is None else f", seed-level [{interval[0]:+.1%}, {interval[1]:+.1%}]"


def _per_seed(figures: dict) -> str:
    """Each seed's change with its own interval."""
    pairs = zip(figures["per_seed"], figures["per_seed_ci95"])
    return ", ".join(f"{value:+.1%} [{low:+.1%}, {high:+.1%}]" for value, (low, high) in pairs)


def summary_rows(args, runs: dict[tuple[str, int], str], iterations: int, base: dict, ids: list[str]):
    rows = []
    for (source, seed), name in runs.items():
        rows.append({"source": source, "seed": seed, "iteration": 0, **base})
        final = evaluation(args, name, iterations - 1, ids)
        if final is not None:
            rows.append({"source": source, "seed": seed, "iteration": iterations, **final})
    return rows


def set_report(args, runs: dict[tuple[str, int], str], iterations: int, base_run: str, problems: list):
    """One held-out set's `summary` rows, `lifts` (over the base and outcome-only) and `kinds` (the lifts
    per operation and per form of problem, flexible success, and the kinds that regressed)."""
    from learning_report import kind_report, kinds_of

    from mappa.core.lift_stats import as_bits, lifts_by_source

    ids = [problem.id for problem in problems]
    kinds = kinds_of(problems)
    base = per_problem(args, base_run, -1, ids)
    after = {key: per_problem(args, name, iterations - 1, ids) for key, name in runs.items()}
    # per_problem: each problem's 0/1 as '0'/'1' strings, what `combine_learning.py` pairs when runs of
    # several invocations (or machines) are compared after their run folders are gone
    return {
        "summary": summary_rows(args, runs, iterations, evaluation(args, base_run, -1, ids), ids),
        "lifts": {
            column: lifts_by_source(base[column], {key: values[column] for key, values in after.items()})
            for column in COLUMNS
        },
        "kinds": kind_report(
            kinds,
            base["correct_flexible"],
            {key: values["correct_flexible"] for key, values in after.items()},
        ),
        "per_problem": {
            "ids": ids,
            "kinds": kinds,
            **{
                column: {"base": as_bits(base[column])}
                | {runs[key]: as_bits(values[column]) for key, values in after.items()}
                for column in COLUMNS
            },
        },
    }


def precision(config_path: str, overrides: list[str]) -> dict:
    """Whether the runs trained and generated (agents and a local coach) under bf16 autocast, resolved on
    this machine: runs of another precision are another experiment (`combine_learning.py` refuses them)."""
    from mappa.config import load_config
    from mappa.inference.precision import resolve_bf16

    config = load_config(config_path, overrides)
    return {
        "trainer_bf16": resolve_bf16(config.trainer.bf16_autocast),
        "engine_bf16": resolve_bf16(config.engine.bf16_autocast),
    }


def mean_and_spread(values: list[float]) -> tuple[float, float]:
    """The mean over seeds and the half-range (the error bar)."""
    return statistics.fmean(values), (max(values) - min(values)) / 2


def grouped(rows: list[dict], key: str) -> dict[str, dict[int, list[float]]]:
    out: dict[str, dict[int, list[float]]] = {}
    for row in rows:
        out.setdefault(row["source"], {}).setdefault(row["iteration"], []).append(row[key])
    return out


def print_table(rows: list[dict], curves: dict[str, dict] | None = None, name: str = "held-out") -> None:
    for key, title in (("heldout_success", "strict (\\boxed{})"), ("heldout_success_flexible", "flexible")):
        series = grouped(rows, key)
        points = sorted({i for s in series.values() for i in s})
        print(f"\n{name} success, {title}, mean ± half-range over seeds (n = {rows[0]['heldout_n']})")
        print("source       " + "".join(f"  after {k} it.     " for k in points))
        for source, by_iteration in series.items():
            cells = "".join(
                f"  {m:6.1%} ± {s:5.1%}   " if k in by_iteration else " " * 20
                for k in points
                for m, s in [mean_and_spread(by_iteration.get(k, [0.0]))]
            )
            print(f"{source:<13}{cells}")
    if curves is None:
        return
    print("\nmean training score per iteration (over agents), per run; stage seconds of the last iteration")
    for name, curve in curves.items():
        scores = per_iteration_mean(curve["agents"], "mean_score")
        last = {stage: times[-1] for stage, times in curve["stage_s"].items()}
        print(f"{name:<24} {' '.join(f'{s:5.2f}' for s in scores)}   {last}")
    print_coach_learning(curves)


def print_coach_learning(curves: dict[str, dict]) -> None:
    """Per run of a learning coach, per iteration: its head's outcome AUC and blame accuracy per corrupted
    seat (out of sample), the pairs it learned from and their accuracy before -> after."""
    learning = {name: curve["coach_learning"] for name, curve in curves.items() if "coach_learning" in curve}
    if not learning:
        return
    print("\nthe learning coach per iteration: outcome AUC (all), blame accuracy per seat, pairs, accuracy")
    for name, updates in learning.items():
        for update in updates:
            auc = update["outcome_auc"].get("all")
            blame = " ".join(f"{seat} {value:.2f}" for seat, value in update["blame_accuracy"].items())
            before, after = update["pair_accuracy"]
            print(
                f"{name:<24} iter {update['iteration']}  AUC {'-' if auc is None else f'{auc:.2f}'}  "
                f"blame {blame or '-'}  {update['pairs']} pairs {before:.2f} -> {after:.2f}  "
                f"{update['timings']['total_s']:.0f} s"
            )


def per_iteration_mean(agents: dict[str, dict], metric: str) -> list[float]:
    series = [values[metric] for values in agents.values()]
    return [statistics.fmean(per_agent) for per_agent in zip(*series)]


def plot(rows: list[dict], curves: dict[str, dict], sources: dict[str, str], path: str, title: str) -> None:
    """Two panels, one line per source, bars for the half-range over seeds: held-out success (strict,
    solid; flexible, dashed) against iterations trained, and the mean training score per iteration."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4), layout="constrained")
    FigureCanvasAgg(figure)
    success, score = figure.subplots(1, 2)
    # the team's answer is what the env grades (flexible: the verifier's last number, for models too small
    # to box it): solid, with the seeds' spread; the strict \boxed{} success dashed
    for offset, (source, points) in enumerate(grouped(rows, "heldout_success_flexible").items()):
        xs = [k + (offset - 1) * 0.04 for k in points]
        means, spreads = zip(*map(mean_and_spread, points.values()))
        line = success.errorbar(xs, means, yerr=spreads, marker="o", capsize=3, label=source)
        strict = grouped(rows, "heldout_success")[source]
        smeans, _ = zip(*map(mean_and_spread, strict.values()))
        success.plot(xs, smeans, linestyle="--", color=line[0].get_color(), alpha=0.6)
    by_source: dict[str, dict[int, list[float]]] = {}
    for name, curve in curves.items():
        for iteration, value in enumerate(per_iteration_mean(curve["agents"], "mean_score")):
            by_source.setdefault(sources[name], {}).setdefault(iteration, []).append(value)
    for source, points in by_source.items():
        means, spreads = zip(*map(mean_and_spread, points.values()))
        score.errorbar(list(points), means, yerr=spreads, marker="o", capsize=3, label=source)
    for axes in (success, score):
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.legend(fontsize=8)
    success.set(xlabel="iterations trained", ylabel="held-out success (solid: flexible, dashed: strict)")
    score.set(xlabel="iteration", ylabel="mean training score, 0-10\n(over agents; each source its own)")
    figure.suptitle(title, fontsize=9)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")


def plot_title(settings: dict) -> str:
    return (
        f"MathChat, SmolLM2-135M-Instruct x 3, {Path(settings['config']).name}, "
        f"{settings['iterations']} it., "
        f"seeds {settings['seeds']}, eval {settings['eval_data'] or 'the config split'}"
    )


def held_out_sets(report: dict, part: str) -> dict:
    """{set name: `part` of it} of a report: its primary held-out set first, then each --also-eval file."""
    sets = {next(iter(report["eval_sets"])): report[part]}
    sets.update({name: other[part] for name, other in report.get("other_sets", {}).items()})
    return sets


def replot(args: argparse.Namespace) -> int:
    report = json.loads(Path(args.out).read_text())
    if args.markdown:
        print(markdown_tables(report))
        return 0
    print_table(report["summary"], report["curves"])
    if "lifts" in report:
        print_lifts(report["lifts"])
    for name, other in report.get("other_sets", {}).items():
        print_table(other["summary"], name=name)
        print_lifts(other["lifts"], name=name)
    print_kinds_and_targets(report)
    plot(
        report["summary"], report["curves"], report["run_sources"], args.plot, plot_title(report["settings"])
    )
    print(f"\nwrote {args.plot} from {args.out}")
    return 0


def main() -> int:
    args = parse_args()
    if args.replot:
        return replot(args)
    args.root = str(Path(args.root).resolve())
    started = time.time()
    check_test_file(args.also_eval)
    common, eval_sets = common_overrides(args)
    splits = check_splits_disjoint(args.config, common)
    print(f"splits: {splits}", flush=True)
    check_models(args, common)
    iterations = int(next(s for s in common if s.startswith("iterations=")).split("=")[1])
    runs: dict[tuple[str, int], str] = {}
    for seed in args.seeds:
        for source in args.sources:
            runs[source, seed] = train_one(args, common, source, seed)
    first = next(iter(runs.values()))
    evaluate_base(args, first)  # greedy on the same base weights: one evaluation serves every run
    curves = {name: training_curves(args, name) for name in runs.values()}
    primary, *others = eval_sets  # the held-out split (or --eval-data's file), then each --also-eval file
    reports = {name: set_report(args, runs, iterations, first, group) for name, group in eval_sets.items()}
    for name, set_figures in reports.items():
        print_table(set_figures["summary"], curves if name == primary else None, name)
        print_lifts(set_figures["lifts"], name)
    settings = {**vars(args), "iterations": iterations, "overrides": common}
    run_sources = {name: source for (source, _), name in runs.items()}
    plot(reports[primary]["summary"], curves, run_sources, args.plot, plot_title(settings))
    report = {
        "benchmark": "learning",
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine_info(threads=os.cpu_count()),  # each worker: cluster.torch_threads, the cores
        "precision": precision(args.config, common),
        "settings": settings,
        "splits": splits,
        "eval_sets": {name: len(group) for name, group in eval_sets.items()},
        "set_roles": set_roles(args, eval_sets),
        "summary": reports[primary]["summary"],
        "lifts": reports[primary]["lifts"],
        "kinds": reports[primary]["kinds"],
        "per_problem": reports[primary]["per_problem"],
        "other_sets": {name: reports[name] for name in others},  # --also-eval: each file as the above
        "targets": {
            name: set_targets(r["lifts"]["correct_flexible"], r["kinds"]) for name, r in reports.items()
        },
        "curves": curves,
        "run_sources": run_sources,
        "wall_s": time.time() - started,
        "plot": args.plot,
    }
    print_kinds_and_targets(report)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out} and {args.plot} in {report['wall_s'] / 60:.1f} min")
    return 0


def check_test_file(paths: list[str]) -> None:
    """The test file, where evaluated, is the one committed before any tuning (its sha256)."""
    import hashlib

    for path in paths:
        if Path(path).resolve() == TEST_FILE.resolve():
            digest = hashlib.sha256(TEST_FILE.read_bytes()).hexdigest()
            if digest != TEST_SHA256:
                raise SystemExit(
                    f"{TEST_FILE} changed (sha256 {digest}, committed {TEST_SHA256}): restore it"
                )


def set_roles(args: argparse.Namespace, eval_sets: dict) -> dict[str, str]:
    """What each held-out set is for: the split, the test file (final runs only), the validation file
    (the recipe was chosen on it), or another file."""
    primary, *others = eval_sets
    roles = {primary: "held-out split" if not args.eval_data else "file"}
    for name, path in zip(others, args.also_eval):
        resolved = Path(path).resolve()
        known = {TEST_FILE.resolve(): "test", VALIDATION_FILE.resolve(): "validation"}
        roles[name] = known.get(resolved, "file")
    return roles


def print_kinds_and_targets(report: dict) -> None:
    for name, figures in held_out_sets(report, "kinds").items():
        print_kinds(figures, name)
    print_targets(report["targets"])
    roles = report.get("set_roles", {})
    print("sets: " + ", ".join(f"{name} ({role})" for name, role in roles.items()))


if __name__ == "__main__":
    raise SystemExit(main())
