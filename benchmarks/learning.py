"""Does the coach's signal improve the agents? MathChat under three reward sources, evaluated held out.

Trains the three MathChat agents (SmolLM2-135M-Instruct each, the CPU demo's config) for N iterations under
each reward source, with the same problems per iteration and the same sampling seed across sources, and
evaluates the team's success rate greedily on the held-out split at iteration 0 (the base model), after
N/2 iterations and after N:

    llm       the local SmolLM2 coach (probability-weighted score tokens, `coach.scoring=expected`)
    rubric    the rubric coach's explicit rules, with ground truth (`mappa.coach.rubric`)
    outcome   outcome only: the trajectory's correctness (10 or 0) given to every action

For each source and seed it records the success rates, the share of held-out problems that got a final
answer at all (a signal below success), the coach's mean score per agent and the KL per agent after each
iteration; it prints a table of mean and spread over seeds, writes JSON (`--out`) and a plot (`--plot`;
one line per source, bars for the half-range over seeds: held-out success against iterations trained, the
mean training score and the mean KL per iteration; `--replot` redraws table and plot from the JSON). It
checks first that the evaluation split shares no problem with the training split.

Each run is a real `mappa train` in a subprocess (its own Ray and Prefect), so a run can be inspected
afterwards with `mappa inspect RUN --root ROOT`; runs already finished under `--root` are reused (`mappa
train` skips finished stages), so an interrupted benchmark continues where it stopped.

Default size: 2 iterations x 4 problems x 2 seeds x 3 sources, 8 evaluation problems, 64 new tokens,
lr 1e-5: about 70 minutes on a quiet 2-core CPU (measured 2026-11-30: a rubric or outcome run about 10
minutes, an LLM-coach run about 13, the base model's evaluation 2). Larger settings (the paper's regime,
on GPUs, with a bigger model in the config): `--iterations 20 --problems 32 --eval-problems 64
--max-new-tokens 512 --seeds 0 1 2`.

Not covered: significance testing (2 seeds give a spread, not a confidence interval), other envs.
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

REPO = Path(__file__).resolve().parents[1]
SOURCES = {
    "llm": ["coach.type=local", "coach.scoring=expected", "coach.use_ground_truth=true"],
    "rubric": ["coach.type=rubric", "coach.scoring=generate", "coach.use_ground_truth=true"],
    "outcome": ["coach.type=outcome", "coach.scoring=generate"],
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(REPO / "configs" / "mathchat-cpu.yaml"))
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--problems", type=int, default=4, help="problems per iteration")
    parser.add_argument("--eval-problems", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--sources", nargs="+", default=list(SOURCES), choices=list(SOURCES))
    parser.add_argument("--set", action="append", default=[], help="more config overrides, e.g. agents.*")
    parser.add_argument("--root", default=str(REPO / "benchmarks" / "runs" / "learning"))
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "learning.json"))
    parser.add_argument("--plot", default=str(REPO / "benchmarks" / "results" / "learning.png"))
    parser.add_argument("--replot", action="store_true", help="table and plot from --out's JSON; no runs")
    return parser.parse_args()


def check_splits_disjoint(config_path: str) -> dict[str, int]:
    from mappa.config import load_config
    from mappa.envs.registry import load_env_problems

    env = load_config(config_path, []).env
    train = load_env_problems(env.type, env.train_data)
    held_out = load_env_problems(env.type, env.eval_data)
    shared_ids = {p.id for p in train} & {p.id for p in held_out}
    shared_text = {p.question.strip() for p in train} & {p.question.strip() for p in held_out}
    if shared_ids or shared_text:
        raise SystemExit(f"the eval split shares {len(shared_ids | shared_text)} problems with training")
    return {"train_problems": len(train), "eval_problems": len(held_out), "shared": 0}


def mappa(*args: str) -> None:
    """One `mappa` command in a subprocess; its output goes to this terminal."""
    command = [str(Path(sys.executable).with_name("mappa")), *args]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def overrides(args: argparse.Namespace, source: str, seed: int) -> list[str]:
    every = max(1, args.iterations // 2)
    common = [
        f"seed={seed}",
        f"iterations={args.iterations}",
        f"rollout.problems_per_iteration={args.problems}",
        f"rollout.eval_problems={args.eval_problems}",
        f"rollout.max_new_tokens={args.max_new_tokens}",
        f"rollout.eval_every={every}",
        f"trainer.lr={args.lr}",
        f"storage.root={args.root}",
        f"name=learning-{source}-s{seed}",
        "engine.type=hf",  # as when these runs began (the demo config moved to vLLM since); the same samples
        "engine.shared=false",
    ]
    return [*common, *SOURCES[source], *args.set]


def train_one(args: argparse.Namespace, source: str, seed: int) -> str:
    run_id = f"learning-{source}-s{seed}"
    sets = [part for item in overrides(args, source, seed) for part in ("--set", item)]
    mappa("train", args.config, "--run-id", run_id, *sets)
    return run_id


def evaluate_base(args: argparse.Namespace, run_id: str) -> None:
    from mappa.envs.evaluate_stage import evaluation_complete
    from mappa.storage.run import Run

    if not evaluation_complete(Run.open(args.root, run_id), -1):
        mappa("evaluate", run_id, "--root", args.root, "--iteration", "-1")


def collect(args: argparse.Namespace, run_id: str) -> dict:
    """Success per evaluated checkpoint (-1: base) and per-iteration coach scores and KL per agent."""
    from mappa.envs.evaluate_stage import evaluation_complete, evaluation_parts
    from mappa.storage.curves import run_curves
    from mappa.storage.run import Run

    run = Run.open(args.root, run_id)
    success, answered = {}, {}
    for iteration in range(-1, args.iterations):
        if evaluation_complete(run, iteration):
            manifest = run.store.read_json(*evaluation_parts(run, iteration, "_manifest.json"))
            success[iteration + 1] = manifest["success_rate"]  # keyed by iterations trained
            results = run.store.read_parquet(*evaluation_parts(run, iteration, "results.parquet"))
            answered[iteration + 1] = float(results["final_answer"].notna().mean())
    curves = run_curves(run)
    per_agent = {
        agent: {
            "mean_score": group["mean_score"].tolist(),
            "kl": group["kl"].tolist(),
            "train_success_rate": group["success_rate"].tolist(),
        }
        for agent, group in curves.sort_values("iteration").groupby("agent")
    }
    return {"run_id": run_id, "eval_success": success, "eval_answered": answered, "agents": per_agent}


def mean_and_spread(values: list[float]) -> tuple[float, float]:
    """The mean over seeds and the half-range (the error bar)."""
    return statistics.fmean(values), (max(values) - min(values)) / 2


def summarize(results: dict[str, list[dict]], base: float | None) -> dict[str, dict]:
    summary = {}
    for source, runs in results.items():
        points: dict[int, list[float]] = {}
        for result in runs:
            for trained, rate in result["eval_success"].items():
                points.setdefault(int(trained), []).append(rate)
        if base is not None:
            points.setdefault(0, [base] * len(runs))
        summary[source] = {
            str(k): dict(zip(("mean", "spread"), mean_and_spread(v)), values=v)
            for k, v in sorted(points.items())
        }
    return summary


def print_table(summary: dict[str, dict], results: dict[str, list[dict]]) -> None:
    checkpoints = sorted({int(k) for s in summary.values() for k in s})
    header = "source    " + "".join(f"  after {k} it.    " for k in checkpoints)
    print("\nheld-out success rate (greedy), mean ± half-range over seeds")
    print(header)
    for source, points in summary.items():
        cells = "".join(
            f"  {points[str(k)]['mean']:6.1%} ± {points[str(k)]['spread']:5.1%}  "
            if str(k) in points
            else " " * 19
            for k in checkpoints
        )
        print(f"{source:<10}{cells}")
    print("\nheld-out problems with a final answer at all (\\boxed{}), per run, by iterations trained")
    for source, runs in results.items():
        cells = "; ".join(
            ", ".join(f"{k}: {v:.0%}" for k, v in sorted(r["eval_answered"].items())) for r in runs
        )
        print(f"{source:<10}{cells}")
    print("\nper agent after the last iteration: coach mean score / KL (first seed)")
    for source, runs in results.items():
        agents = runs[0]["agents"]
        cells = ", ".join(
            f"{a} {v['mean_score'][-1]:.2f} / {v['kl'][-1]:.2e}" for a, v in sorted(agents.items())
        )
        print(f"{source:<10}{cells}")


def per_iteration(results: dict[str, list[dict]], metric: str) -> dict[str, dict[int, list[float]]]:
    """Per source and iteration: `metric` (mean_score or kl) averaged over the agents, one value per run."""
    out: dict[str, dict[int, list[float]]] = {}
    for source, runs in results.items():
        for result in runs:
            series = [values[metric] for values in result["agents"].values()]
            for iteration, per_agent in enumerate(zip(*series)):
                out.setdefault(source, {}).setdefault(iteration, []).append(statistics.fmean(per_agent))
    return out


def plot(summary: dict[str, dict], results: dict[str, list[dict]], path: str, title: str) -> None:
    """Three panels, one line per source, bars for the half-range over seeds: held-out success against
    iterations trained; the mean training score of each iteration (over agents); its mean KL per token."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 3.8), layout="constrained")
    FigureCanvasAgg(figure)
    success, score, kl = figure.subplots(1, 3)
    panels = [
        (success, {s: {int(k): p["values"] for k, p in points.items()} for s, points in summary.items()}),
        (score, per_iteration(results, "mean_score")),
        (kl, per_iteration(results, "kl")),
    ]
    for axes, series in panels:
        for offset, (source, points) in enumerate(series.items()):
            xs = [k + (offset - 1) * 0.04 for k in points]
            means, spreads = zip(*map(mean_and_spread, points.values()))
            axes.errorbar(xs, means, yerr=spreads, marker="o", capsize=3, label=source)
        axes.xaxis.get_major_locator().set_params(integer=True)
    success.set_ylim(-0.02, max(0.25, *(p["mean"] + 0.05 for s in summary.values() for p in s.values())))
    success.set(xlabel="iterations trained", ylabel="held-out success rate (greedy)")
    score.set(xlabel="iteration", ylabel="mean training score, 0-10 (over agents)")
    kl.set(xlabel="iteration (updates before it)", ylabel="KL to the reference, per token (k1, signed)")
    success.legend()
    figure.suptitle(title, fontsize=9)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")


def plot_title(config: str, overrides: list[str], settings: dict) -> str:
    from mappa.config import load_config

    models = sorted({Path(a.model).name for a in load_config(config, overrides).agents.values()})
    return (
        f"MathChat, agents {', '.join(models)}, {settings['iterations']} it. x {settings['problems']} "
        f"problems, seeds {settings['seeds']}, lr {settings['lr']:g}"
    )


def replot(args: argparse.Namespace) -> int:
    report = json.loads(Path(args.out).read_text())
    print_table(report["summary"], report["runs"])
    settings = report["settings"]
    title = plot_title(args.config, settings["set"], settings)  # the stored path may be another checkout's
    plot(report["summary"], report["runs"], args.plot, title)
    print(f"\nwrote {args.plot} from {args.out}")
    return 0


def main() -> int:
    args = parse_args()
    if args.replot:
        return replot(args)
    args.root = str(Path(args.root).resolve())
    started = time.time()
    splits = check_splits_disjoint(args.config)
    print(f"splits: {splits}")
    results: dict[str, list[dict]] = {source: [] for source in args.sources}
    base_run = None
    for seed in args.seeds:
        for source in args.sources:
            run_id = train_one(args, source, seed)
            base_run = base_run or run_id
            results[source].append(collect(args, run_id))
    evaluate_base(args, base_run)  # greedy on the same base weights: one evaluation serves every run
    base = collect(args, base_run)["eval_success"].get(0)
    summary = summarize(results, base)
    print_table(summary, results)
    plot(summary, results, args.plot, plot_title(args.config, args.set, vars(args)))
    report = {
        "benchmark": "learning",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cores": os.cpu_count()},
        "settings": {k: v for k, v in vars(args).items() if k not in {"out", "plot"}},
        "splits": splits,
        "base_success": base,
        "summary": summary,
        "runs": results,
        "wall_s": time.time() - started,
        "plot": args.plot,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out} and {args.plot} in {report['wall_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
