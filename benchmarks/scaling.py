"""Scaling: how rollout and update time grow with problems per iteration and with the number of agents.

What it measures, in one process, on Ray `ModelWorker` actors created as `benchmarks/rollout.py` creates
them (trainable: policy, reference and optimizer in each; `EngineConfig(batch_size=...)`; no Prefect, no
artifact store), reused by every measurement:
- problems: for each size N in `--problems` (default 4 8 16 32), the MathChat rollout (solver -> executor
  with the sandbox -> verifier, `run_mathchat`, as the rollout stage runs it) of the N problems a run's
  iteration 0 draws (`select_problems`; the sets nest), then per agent, one after another, what the
  advantages and update stages ask of its worker: old and reference logprobs of its actions (both calls at
  once, as `fetch_logprobs` does) and one update (`worker.train`, i.e. `TorchTrainer.train`) on them;
- agents: a synthetic chain of k agents for k in `--agents` (default 2 3 4), defined here (a benchmark
  topology, not a product env): agent 1 reads the problem, agent i reads the problem and agent i-1's text
  and writes its own, no tools; the same rollout, logprob and update timing for `--chain-problems` problems.
Advantages are fixed values, not a coach's: +1 on every token of even-numbered actions, -1 on odd ones
(the update does the same work whatever the values; old logprobs are the worker's real ones). After each
measurement the workers go back to the base weights (`ModelWorker.reset`, untimed), so every size starts
from the same model. Timed: wall seconds of the rollout, of the logprob calls, of the train calls (each
Ray call included); tokens: generated tokens, and prompt + response tokens of the update.
Start-up (Ray start, worker creation and model loading, one small warm-up call per worker) happens once,
before any measurement, and is reported separately. Prints a table (medians over `--repeats`) and writes
JSON and a PNG plot (`--plot`, default next to the JSON).

Not covered: Prefect, artifact I/O and checkpoint writing (see `benchmarks/overhead.py`), the coach (score
stage), vLLM, several samples per problem, more than one machine. Sizes run in ascending order, so a slow
minute on a shared machine lands on one size (timings drift by up to 40%: docs/pitfalls.md); `--repeats` takes
medians over rounds. Memory: one SmolLM2 worker with its trainer holds about 2.5 GB; the default sweep
keeps four (max(3, largest k)) alive at once.

Full settings (SmolLM2-135M-Instruct):  python benchmarks/scaling.py
Smoke run on a tiny random model:       python benchmarks/scaling.py --tiny --problems 2 4 --agents 2 3
                                        --chain-problems 2 --max-new-tokens 16
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402 - the environment above must be set before any hub or Ray import
import asyncio  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from comparison import (  # noqa: E402
    benchmark_model,
    default_out,
    machine_info,
    median,
    print_facts,
    print_table,
    write_json,
)

MATHCHAT_SEATS = ("solver", "executor", "verifier")
Batches = dict[str, list[tuple[list[int], list[int]]]]  # agent -> (prompt token ids, response token ids)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Rollout, logprob and update seconds of mappa's workers against problems per iteration "
        "(MathChat) and against the number of agents (a synthetic chain); a table, JSON and a PNG plot.",
    )
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--model", default="smollm2", help="model spec or HF folder (default: smollm2)")
    model.add_argument("--tiny", action="store_true", help="build a tiny random model in a temp folder")
    parser.add_argument("--problems", type=int, nargs="*", default=[4, 8, 16, 32], help="MathChat sizes")
    parser.add_argument("--agents", type=int, nargs="*", default=[2, 3, 4], help="chain lengths")
    parser.add_argument("--chain-problems", type=int, default=8, help="problems per chain measurement")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32, help="engine batch size (EngineConfig default)")
    parser.add_argument("--max-executor-turns", type=int, default=2)
    parser.add_argument(
        "--repeats", type=int, default=1, help="rounds over all sizes; the table shows medians"
    )
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads per worker")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=default_out("scaling"), help="JSON result path")
    parser.add_argument("--plot", help="PNG path (default: the JSON path with .png)")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.problems + args.agents) or (args.agents and min(args.agents) < 2):
        parser.error("--problems sizes must be >= 1 and --agents lengths >= 2")
    return args


# ---------------------------------------------------------------- workers


def start_workers(names: list[str], model_path: str, args, ray_dir: str, startup: dict) -> dict[str, Any]:
    """One trainable ModelWorker per name on a fresh local Ray cluster (never another run's); the seconds
    of Ray's start and of the workers' creation and model loading go into `startup`."""
    import ray

    from mappa.cluster.model_worker import ModelWorker
    from mappa.config import AlgoConfig, EngineConfig, TrainerConfig

    started = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        namespace="mappa-benchmark",
        log_to_driver=False,
        _temp_dir=ray_dir,
    )
    startup["ray_start_s"] = time.perf_counter() - started
    started = time.perf_counter()
    actor = ray.remote(ModelWorker).options(num_cpus=0, max_concurrency=1)
    trainer, algo = TrainerConfig().model_dump(), AlgoConfig().model_dump()
    engine = EngineConfig(batch_size=args.batch_size).model_dump()
    workers = {
        name: actor.remote(name, model_path, True, trainer, algo, engine, args.seed, args.threads)
        for name in names
    }
    ray.get([w.ready.remote() for w in workers.values()])
    startup["workers_start_and_model_loading_s"] = time.perf_counter() - started
    return workers


def update_agents(workers: dict[str, Any], batches: Batches, seed: int) -> dict[str, Any]:
    """Per agent, one after another: old + reference logprobs (one round trip), then one update."""
    import ray

    from mappa.core.types import TrainSample

    logprob_s = update_s = 0.0
    tokens = 0
    for name, rows in batches.items():
        rows = [(p, r) for p, r in rows if r]  # as the advantages stage: no empty responses
        if not rows:
            continue
        prompts, responses = [p for p, _ in rows], [r for _, r in rows]
        worker = workers[name]
        started = time.perf_counter()
        old, _ = ray.get(
            [
                worker.logprobs.remote(prompts, responses, "policy"),
                worker.logprobs.remote(prompts, responses, "ref"),
            ]
        )
        trained = time.perf_counter()
        samples = []
        for i, (p, r, o) in enumerate(zip(prompts, responses, old)):
            sign = 1.0 if i % 2 == 0 else -1.0  # fixed advantages: the update's work does not depend on them
            samples.append(TrainSample(p, r, old_logprobs=o, advantages=[sign] * len(r)))
        ray.get(worker.train.remote(samples, seed))
        logprob_s += trained - started
        update_s += time.perf_counter() - trained
        tokens += sum(len(p) + len(r) for p, r in rows)
    return {"logprobs_s": logprob_s, "update_s": update_s, "update_tokens": tokens}


def reset(workers: dict[str, Any]) -> None:
    import ray

    ray.get([w.reset.remote() for w in workers.values()])


# ---------------------------------------------------------------- the two topologies


def roll_out_mathchat(workers: dict[str, Any], problems, args, params) -> tuple[float, Batches]:
    """`workers` keyed by MathChat seat; returns the rollout's seconds and each seat's actions."""
    from rollout import build_agents  # benchmarks/rollout.py: the agents as the rollout stage builds them

    from mappa.config import SandboxConfig
    from mappa.envs.mathchat.team import run_mathchat
    from mappa.sandbox import SandboxLimits

    box = SandboxConfig()
    limits = SandboxLimits(
        timeout_s=box.timeout_s,
        memory_mb=box.memory_mb,
        cpu_s=box.cpu_s,
        max_output_chars=box.max_output_chars,
        isolation=box.isolation,
    )
    agents = build_agents(workers, params)
    pairs = [(f"scale-{i}-{p.id}", p) for i, p in enumerate(problems)]
    started = time.perf_counter()
    trajectories = asyncio.run(run_mathchat(pairs, agents, limits, args.max_executor_turns))
    seconds = time.perf_counter() - started
    batches: Batches = {seat: [] for seat in MATHCHAT_SEATS}
    for action in (a for t in trajectories for a in t.actions):
        batches[action.agent].append((list(action.prompt_token_ids), list(action.response_token_ids)))
    return seconds, batches


def chain_role(index: int, count: int) -> str:
    if index == 0:
        duty = "Start solving the problem step by step."
    elif index == count - 1:
        duty = "Read the previous agent's text and give the final answer as \\boxed{answer}."
    else:
        duty = "Read the previous agent's text, check it and continue the solution."
    return f"You are agent {index + 1} of {count} in a chain of agents solving a math problem. {duty}"


def chain_observation(question: str, previous: str | None) -> str:
    if previous is None:
        return f"Problem: {question}"
    return f"Problem: {question}\n\nThe previous agent wrote:\n{previous}"


async def run_chain(questions: list[str], agents: list) -> list[list]:
    """Each agent acts on the whole batch in turn; agent i sees agent i-1's text. Replies per agent."""
    replies_by_agent: list[list] = []
    previous: list[str | None] = [None] * len(questions)
    for agent in agents:
        replies = await agent.act([chain_observation(q, p) for q, p in zip(questions, previous)])
        replies_by_agent.append(replies)
        previous = [r.generation.text for r in replies]
    return replies_by_agent


def roll_out_chain(workers: dict[str, Any], problems, count: int, params) -> tuple[float, Batches]:
    from mappa.agents.agent import Agent
    from mappa.stages.rollout import remote_chat

    names = list(workers)[:count]
    agents = [Agent(n, chain_role(i, count), remote_chat(workers[n]), params) for i, n in enumerate(names)]
    started = time.perf_counter()
    replies = asyncio.run(run_chain([p.question for p in problems], agents))
    seconds = time.perf_counter() - started
    batches = {
        name: [(list(r.generation.prompt_token_ids), list(r.generation.token_ids)) for r in rows]
        for name, rows in zip(names, replies)
    }
    return seconds, batches


# ---------------------------------------------------------------- the sweeps


def measure(sweep: str, size: int, problems: int, rollout: tuple[float, Batches], workers, args) -> dict:
    """Update the agents on a rollout's actions, reset them to the base weights; one result row."""
    rollout_s, batches = rollout
    updated = update_agents(workers, batches, args.seed)
    reset(workers)
    generated = sum(len(r) for rows in batches.values() for _, r in rows)
    total = rollout_s + updated["logprobs_s"] + updated["update_s"]
    row = {"sweep": sweep, "size": size, "problems": problems, "rollout_s": rollout_s, **updated}
    row.update(tokens=generated, s_per_problem=total / problems, actions=sum(map(len, batches.values())))
    print(
        f"{sweep} {size}: rollout {rollout_s:.1f} s, logprobs {updated['logprobs_s']:.1f} s, "
        f"update {updated['update_s']:.1f} s, {generated} tokens"
    )
    return row


def run_sweeps(args, model_path: str, ray_dir: str) -> tuple[list[dict], dict[str, float]]:
    import ray
    from rollout import warm_up_workers

    from mappa.envs.mathchat.problems import load_builtin
    from mappa.inference.engine import SamplingParams
    from mappa.stages.rollout import select_problems

    params = SamplingParams(1.0, 1.0, args.max_new_tokens, (), args.seed)
    train = load_builtin("train")
    names = [f"agent-{i}" for i in range(max([3, *args.agents]))]
    startup: dict[str, float] = {}
    rows: list[dict] = []
    try:
        workers = start_workers(names, model_path, args, ray_dir, startup)
        started = time.perf_counter()
        warm_up_workers(workers, params)
        startup["warm_up_s"] = time.perf_counter() - started
        for repeat in range(args.repeats):
            for size in args.problems:
                problems = select_problems(train, size, args.seed, 0)
                mathchat = dict(zip(MATHCHAT_SEATS, (workers[n] for n in names)))
                rollout = roll_out_mathchat(mathchat, problems, args, params)
                rows.append({**measure("problems", size, size, rollout, mathchat, args), "repeat": repeat})
            problems = select_problems(train, args.chain_problems, args.seed, 0)
            for count in args.agents:
                chain = {n: workers[n] for n in names[:count]}
                rollout = roll_out_chain(chain, problems, count, params)
                row = measure("agents", count, len(problems), rollout, chain, args)
                rows.append({**row, "repeat": repeat})
    finally:
        ray.shutdown()
    return rows, startup


def medians(rows: list[dict]) -> list[dict]:
    keys = ("rollout_s", "logprobs_s", "update_s", "tokens", "update_tokens", "s_per_problem")
    out = []
    for sweep, size in dict.fromkeys((r["sweep"], r["size"]) for r in rows):
        group = [r for r in rows if (r["sweep"], r["size"]) == (sweep, size)]
        out.append({"sweep": sweep, "size": size, "problems": group[0]["problems"]})
        out[-1].update({k: median([r[k] for r in group]) for k in keys})
        out[-1].update({k: round(out[-1][k]) for k in ("tokens", "update_tokens")})  # counts, not seconds
    return out


def plot(table: list[dict], path: Path) -> None:
    """Seconds against problems (left) and against agents (right): rollout, logprobs, update."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4), dpi=80, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, 2)
    titles = {"problems": "MathChat: problems per iteration", "agents": "chain: number of agents"}
    for ax, sweep in zip(axes, ("problems", "agents")):
        rows = [r for r in table if r["sweep"] == sweep]
        for index, key in enumerate(("rollout_s", "logprobs_s", "update_s")):
            label = key.removesuffix("_s")
            ax.plot(
                [r["size"] for r in rows], [r[key] for r in rows], marker="o", color=f"C{index}", label=label
            )
        ax.set_title(titles[sweep])
        ax.set_xlabel(sweep)
        ax.set_ylabel("seconds")
        ax.grid(alpha=0.3)
        if rows:
            ax.set_xticks([r["size"] for r in rows])
            ax.legend(fontsize="small")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")


def report(result: dict[str, Any]) -> None:
    print_facts(
        "Scaling benchmark: settings, machine and start-up", {**result["settings"], **result["machine"]}
    )
    print_table(
        "Start-up (once, not in the rows below)", ("what", "seconds"), list(result["startup"].items())
    )
    columns = ("sweep", "size", "problems", "rollout s", "logprobs s", "update s", "tokens", "update tokens")
    keys = ("sweep", "size", "problems", "rollout_s", "logprobs_s", "update_s", "tokens", "update_tokens")
    rows = [(*(r[k] for k in keys), r["s_per_problem"]) for r in result["table"]]
    print_table(
        f"Seconds per measurement (median of {result['settings']['repeats']})",
        (*columns, "s per problem"),
        rows,
    )
    for note in result["notes"]:
        print(f"note: {note}")


NOTES = (
    "s per problem = (rollout + logprobs + update) / problems; update = one optimizer step per agent.",
    "tokens: generated tokens; update tokens: prompt + response tokens of the actions the agents train on.",
    "Advantages are fixed (+1 / -1 per action): the update's cost does not depend on their values.",
)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="mappa-bench-"))
    try:
        model_path = benchmark_model(args.model, args.tiny, scratch)
        print(f"model {model_path}; torch threads {args.threads} per worker")
        rows, startup = run_sweeps(args, model_path, str(scratch / "ray"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    settings = {key: getattr(args, key) for key in ("problems", "agents", "chain_problems", "max_new_tokens")}
    settings.update(
        model=model_path,
        batch_size=args.batch_size,
        max_executor_turns=args.max_executor_turns,
        repeats=args.repeats,
        seed=args.seed,
        advantages="fixed: +1 even actions, -1 odd actions",
    )
    result = {
        "benchmark": "scaling",
        "settings": settings,
        "machine": machine_info(args.threads),
        "startup": startup,
        "measurements": rows,
        "table": medians(rows),
        "notes": list(NOTES),
    }
    report(result)
    plot_path = Path(args.plot) if args.plot else Path(args.out).with_suffix(".png")
    plot(result["table"], plot_path)
    print(f"wrote {write_json(args.out, result)} and {plot_path}")


if __name__ == "__main__":
    main()
