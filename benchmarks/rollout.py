"""Rollout throughput: mappa's generation path against the bare HF engine, on the same prompts.

What it measures, in one process, alternating the two sides for `--repeats` rounds (A, B, A, B, ...):
- mappa: the MathChat rollout as the rollout stage runs it, without Prefect or storage. Three Ray
  `ModelWorker` actors (solver, executor, verifier; created with the arguments `mappa.cluster.ray_cluster`
  gives them: default trainer/algo configs, `EngineConfig(batch_size=...)`, the seed and torch threads),
  the agents built as `mappa.stages.rollout.build_agents` builds them (`remote_chat`), then
  `asyncio.run(run_mathchat(...))` on the first N built-in training problems. Timed: that call, i.e. Ray
  calls, chat templating, batched HF `generate` with per-token logprobs, the sandbox running the
  executor's code, answer grading. Tokens: every action's `response_token_ids`.
- bare: plain `model.generate` in this process on the exact prompt strings mappa's agents sent
  (`Action.prompt`), grouped per agent call in the order they were issued (solver batch, executor batch
  per turn, verifier batch); each group sorted by length and cut into batches of `--batch-size` with left
  padding (as `HFEngine` does); the same sampling settings, the same seed per call; no logits or scores
  returned; one outer bf16 autocast only where the CPU has native bf16, else fp32. Tokens: each row up to
  and including its first EOS (padding after it not counted).
Figure: generated tokens / wall seconds per side; the ratio of medians mappa / bare against the target 0.9.
Ray start and model loading are outside the timed region; both sides get one small untimed call first.

Also reported: the seconds the engines spent in `generate` inside the workers (sum of `Action.generation_s`)
and the sandbox seconds (sum of `ToolResult.duration_s`; runs overlap, so an upper bound), so a reader sees
what of mappa's wall time is not generation.

Not covered: vLLM (the engine here is HF), several problems per sample, more than one machine, generation
quality; the two sides sample independently after the first divergence, so they may generate different
numbers of tokens (hence tokens/s, not seconds).

Full settings (SmolLM2-135M-Instruct):  python benchmarks/rollout.py
Smoke run on a tiny random model:       python benchmarks/rollout.py --tiny --problems 2 --max-new-tokens 16
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402 - the environment above must be set before any hub or Ray import
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from comparison import (
    benchmark_model,  # noqa: E402
    default_out,
    machine_info,
    median,
    print_facts,
    print_table,
    verdict,
    write_json,
)

TARGET = 0.9  # mappa's tokens/s at least this share of the bare engine's (the project's issue)
NOTES = (
    "mappa's side includes Ray calls, chat templating, per-token logprobs and the sandbox running the "
    "executor's code; the bare side is model.generate only.",
    "Both sides sample, so they may generate different numbers of tokens: compare tokens/s, not seconds.",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="mappa's MathChat rollout (Ray workers, HF engine, sandbox) vs bare HF generate: "
        "tokens/s of each, interleaved, ratio of medians against the target 0.9.",
    )
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--model", default="smollm2", help="model spec or HF folder (default: smollm2)")
    model.add_argument("--tiny", action="store_true", help="build a tiny random model in a temp folder")
    parser.add_argument("--problems", type=int, default=8, help="built-in training problems (default 8)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=32, help="engine batch size (EngineConfig default)")
    parser.add_argument("--max-executor-turns", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of mappa then bare")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads, both sides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=default_out("rollout"), help="JSON result path")
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Measurement:
    side: str
    repeat: int
    wall_s: float
    tokens: int
    calls: int  # engine calls (mappa: agent calls; bare: prompt groups)
    engine_s: float = 0.0  # mappa: seconds inside the workers' generate
    sandbox_s: float = 0.0  # mappa: sum of sandbox run durations (overlapping: an upper bound)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / max(self.wall_s, 1e-9)


# ---------------------------------------------------------------- mappa side


def start_workers(model_path: str, args: argparse.Namespace, ray_dir: str) -> dict[str, Any]:
    """One ModelWorker actor per MathChat seat on a fresh local Ray cluster (never the demo's)."""
    import ray

    from mappa.cluster.model_worker import ModelWorker
    from mappa.config import AlgoConfig, EngineConfig, TrainerConfig
    from mappa.envs.registry import get_env_spec

    ray.init(
        address="local",  # start our own cluster even if another one runs on this machine
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        namespace="mappa-benchmark",
        log_to_driver=False,
        _temp_dir=ray_dir,
    )
    actor = ray.remote(ModelWorker).options(num_cpus=0, max_concurrency=1)
    engine = EngineConfig(batch_size=args.batch_size).model_dump()
    workers = {
        name: actor.remote(
            name,
            model_path,
            True,  # trainable, as in configs/mathchat-cpu.yaml: policy + reference in each worker
            TrainerConfig().model_dump(),
            AlgoConfig().model_dump(),
            engine,
            args.seed,
            args.threads,
        )
        for name in get_env_spec("mathchat").seats
    }
    ray.get([w.ready.remote() for w in workers.values()])
    return workers


def build_agents(workers: dict[str, Any], params) -> dict[str, Any]:
    """As `mappa.stages.rollout.build_agents`, without the Run it reads the env type from."""
    from mappa.agents.agent import Agent
    from mappa.envs.registry import get_env_spec
    from mappa.stages.rollout import remote_chat

    spec = get_env_spec("mathchat")
    return {name: Agent(name, spec.roles[name], remote_chat(workers[name]), params) for name in spec.seats}


def warm_up_workers(workers: dict[str, Any], params) -> None:
    import ray

    small = {**dataclasses.asdict(dataclasses.replace(params, max_new_tokens=4)), "stop": []}
    chat = [{"role": "user", "content": "What is 1 + 1?"}]
    ray.get([w.chat.remote([chat], small) for w in workers.values()])


def run_mappa(agents, pairs, args: argparse.Namespace, repeat: int) -> tuple[Measurement, list[list[str]]]:
    """One timed rollout; returns its measurement and the prompts sent, grouped per agent call."""
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
    started = time.perf_counter()
    trajectories = asyncio.run(run_mathchat(pairs, agents, limits, args.max_executor_turns))
    wall = time.perf_counter() - started
    actions = [a for t in trajectories for a in t.actions]
    groups = prompt_groups(actions)
    measurement = Measurement(
        side="mappa",
        repeat=repeat,
        wall_s=wall,
        tokens=sum(len(a.response_token_ids) for a in actions),
        calls=len(groups),
        engine_s=sum(a.generation_s for a in actions),
        sandbox_s=sum(a.tool_result.duration_s for a in actions if a.tool_result is not None),
    )
    return measurement, groups


def prompt_groups(actions) -> list[list[str]]:
    """The prompts of each agent call, in the order the env issued the calls: MathChat calls each seat once
    per turn over the whole batch, seats in topology order, so (seat, turn) names one call."""
    from mappa.envs.mathchat.team import SEATS

    groups: dict[tuple[int, int], list[str]] = {}
    for action in actions:  # trajectory order = the order of each call's batch
        groups.setdefault((SEATS.index(action.agent), action.turn), []).append(action.prompt)
    return [groups[key] for key in sorted(groups)]


# ---------------------------------------------------------------- bare side


def load_bare(model_path: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    return model, tokenizer


def eos_ids(model, tokenizer) -> set[int]:
    ids = model.generation_config.eos_token_id
    ids = ids if isinstance(ids, list) else [ids]
    return {i for i in ids + [tokenizer.eos_token_id] if i is not None}


@torch.no_grad()
def generate_batch(model, tokenizer, rows: list[list[int]], params, stops: set[int]) -> int:
    """Generate for one batch of token rows; returns the tokens kept (up to and including the first EOS)."""
    pad = tokenizer.pad_token_id
    width = max(len(r) for r in rows)
    input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])  # (B, L)
    attention = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])  # (B, L)
    sampling = params.temperature > 0
    out = model.generate(
        input_ids=input_ids,
        attention_mask=attention,
        max_new_tokens=params.max_new_tokens,
        do_sample=sampling,
        temperature=params.temperature if sampling else None,
        top_p=params.top_p if sampling else None,
        top_k=None,
        pad_token_id=pad,
    )  # (B, L + N)
    kept = 0
    for row in out[:, width:].tolist():
        ends = [i + 1 for i, token in enumerate(row) if token in stops]
        kept += ends[0] if ends else len(row)
    return kept


def run_bare(model, tokenizer, groups: list[list[str]], args, params, repeat: int) -> Measurement:
    """The same calls as mappa's, with plain generate; seeded per call as `HFEngine.generate` is."""
    from mappa.inference.precision import resolve_bf16

    bf16 = resolve_bf16("auto")
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    stops = eos_ids(model, tokenizer)
    tokens = 0
    started = time.perf_counter()
    with autocast:
        for prompts in groups:
            torch.manual_seed(params.seed)
            rows = sorted((tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts), key=len)
            for start in range(0, len(rows), args.batch_size):
                batch = rows[start : start + args.batch_size]
                tokens += generate_batch(model, tokenizer, batch, params, stops)
    wall = time.perf_counter() - started
    return Measurement("bare", repeat, wall, tokens, len(groups))


# ---------------------------------------------------------------- the comparison


def compare(args: argparse.Namespace, model_path: str, ray_dir: str) -> dict[str, Any]:
    import ray

    from mappa.envs.mathchat.problems import load_builtin
    from mappa.inference.engine import SamplingParams

    torch.set_num_threads(args.threads)
    params = SamplingParams(args.temperature, args.top_p, args.max_new_tokens, (), args.seed)
    problems = load_builtin("train")[: args.problems]
    pairs = [(f"bench-{p.id}", p) for p in problems]
    try:
        workers = start_workers(model_path, args, ray_dir)
        agents = build_agents(workers, params)
        model, tokenizer = load_bare(model_path)
        warm_up_workers(workers, params)
        run_bare(model, tokenizer, [["warm-up"]], args, dataclasses.replace(params, max_new_tokens=4), -1)
        measurements = []
        for repeat in range(args.repeats):
            mappa, groups = run_mappa(agents, pairs, args, repeat)
            bare = run_bare(model, tokenizer, groups, args, params, repeat)
            measurements += [mappa, bare]
            print(f"repeat {repeat}: mappa {mappa.tokens_per_s:.1f} tokens/s, bare {bare.tokens_per_s:.1f}")
    finally:
        ray.shutdown()
    return summarize(measurements, args, model_path, len(problems))


def summarize(measurements: list[Measurement], args, model_path: str, problems: int) -> dict[str, Any]:
    rates = {side: [m.tokens_per_s for m in measurements if m.side == side] for side in ("mappa", "bare")}
    mappa_median, bare_median = median(rates["mappa"]), median(rates["bare"])
    ratio = mappa_median / bare_median if bare_median else float("nan")
    settings = {
        "model": model_path,
        "problems": problems,
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "batch_size": args.batch_size,
        "max_executor_turns": args.max_executor_turns,
        "repeats": args.repeats,
        "seed": args.seed,
    }
    return {
        "benchmark": "rollout",
        "settings": settings,
        "machine": machine_info(args.threads),
        "measurements": [{**dataclasses.asdict(m), "tokens_per_s": m.tokens_per_s} for m in measurements],
        "median_tokens_per_s": {"mappa": mappa_median, "bare": bare_median},
        "ratio": ratio,
        "target": TARGET,
        "verdict": verdict(ratio >= TARGET),
        "notes": list(NOTES),
    }


def report(result: dict[str, Any]) -> None:
    from mappa.sandbox import bwrap_available

    machine = result["machine"]
    sandbox = "bubblewrap" if bwrap_available() else "plain process"
    facts = {**result["settings"], **machine, "sandbox": sandbox}
    facts["precision"] = "bf16 autocast (native)" if machine["bf16_autocast"] else "fp32 (no native bf16)"
    print_facts("Rollout benchmark: settings and machine", facts)
    rows = []
    for m in result["measurements"]:
        extra = (m["engine_s"], m["sandbox_s"]) if m["side"] == "mappa" else ("", "")
        rows.append((m["side"], m["repeat"], m["tokens"], m["calls"], m["wall_s"], m["tokens_per_s"], *extra))
    columns = ("side", "repeat", "tokens", "calls", "wall s", "tokens/s", "in generate s", "sandbox s")
    print_table("Per repeat (alternating, in run order)", columns, rows)
    medians = result["median_tokens_per_s"]
    print_table(
        "Result",
        ("figure", "value"),
        [
            ("mappa median tokens/s", medians["mappa"]),
            ("bare median tokens/s", medians["bare"]),
            ("ratio mappa / bare", result["ratio"]),
            ("target", f">= {result['target']}"),
            ("verdict", result["verdict"]),
        ],
    )
    for note in result["notes"]:
        print(f"note: {note}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="mappa-bench-"))
    try:
        model_path = benchmark_model(args.model, args.tiny, scratch)
        from mappa.inference.precision import resolve_bf16

        precision = "bf16 autocast (native bf16)" if resolve_bf16("auto") else "fp32 (no native bf16)"
        print(f"model {model_path}; torch threads {args.threads} on both sides; {precision}")
        result = compare(args, model_path, str(scratch / "ray"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report(result)
    print(f"wrote {write_json(args.out, result)}")


if __name__ == "__main__":
    main()
