"""Update throughput and memory: mappa's REINFORCE++ update against a minimal hand-written one.

What it measures: one policy update over a fixed synthetic batch on the real tokenizer (`--actions`
actions, prompts and responses of about `--prompt-tokens` / `--response-tokens` random token ids, lengths
varying by +-25%, fixed random per-token advantages; all from `--seed`). One step, on both sides, is the
work mappa does per agent and iteration:
- old logprobs: a no-grad forward of the policy over the batch (mappa: the advantages stage's
  `worker.logprobs(..., "policy")`, i.e. `TorchTrainer.logprobs`);
- reference logprobs: a no-grad forward of the frozen reference (`TorchTrainer.logprobs(..., "ref")`);
- the update: per micro-batch of `--micro-batch-size` (sorted by length, padded) a policy forward, the
  clipped policy-gradient loss (ratio = exp(logp - old), -min(r A, clip(r, 0.8, 1.2) A), token mean
  weighted by token share), backward; then clip_grad_norm_ 1.0 and one AdamW step (lr 1e-5, no weight
  decay). mappa: `TorchTrainer(path, TrainerConfig(micro_batch_size=...), AlgoConfig(), ...).train()`,
  which itself does only this part: it takes old logprobs as given and never runs the reference.
mappa's side also hands freed memory back to the OS (`release_freed_memory()`) where its stages do:
once after the two logprob passes (the advantages stage) and once after the update.
The minimal side (`benchmarks/minimal_update.py`) is written out with nothing else: its own padding and
logprob code; fp32 master weights, bf16 autocast for the policy forward only where the CPU has native bf16.

How: each side runs in its own fresh subprocess per repeat, alternating mappa, minimal, mappa, ... for
`--repeats` rounds; a child loads its models, does one untimed warm-up step, then `--steps` timed steps.
Training tokens/s = response tokens per step / step seconds. Peak memory = the child's peak RSS
(`ru_maxrss`) after its steps; RSS after loading is shown too, so the step's own increase is visible.
Targets (the project's issue): mappa >= 0.95x the minimal loop's tokens/s; mappa's peak <= minimal's + 10%.
The warm-up step's loss and gradient norm are shown for both sides: same weights and data, so they should
agree (a check that both compute the same update).

Not covered: the Ray call and the parquet round trip around the update, the advantage computation (pure
tensor math, milliseconds), checkpoint writing, LoRA, DeepSpeed, several optimizer steps per update,
real (non-random) text.

TRL: when `trl` is importable (the optional `bench` extra), a third side runs TRL's own `GRPOTrainer` on
the same batch, interleaved with the other two (`benchmarks/trl_update.py` says how generation is taken
out and which settings are made equal). Target: mappa >= 1.25x TRL's training tokens/s. Without `trl`
the TRL figures are null and the script says so.

Full settings (SmolLM2-135M-Instruct):  python benchmarks/update.py
Smoke run on a tiny random model:       python benchmarks/update.py --tiny --actions 8 --prompt-tokens 32
                                        --response-tokens 32 --steps 1 --repeats 2
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402 - the environment above must be set before any hub import
import importlib.metadata  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

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

SPEED_TARGET = 0.95  # mappa's training tokens/s at least this share of the minimal loop's
MEMORY_TARGET = 1.10  # mappa's peak RSS at most this multiple of the minimal loop's
TRL_SPEED_TARGET = 1.25  # mappa's training tokens/s at least this multiple of TRL's
SIDES = ("mappa", "minimal", "trl")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="mappa's update (TorchTrainer: old/ref logprobs + train) vs a minimal hand-written "
        "REINFORCE step: training tokens/s and peak RSS, each side in fresh subprocesses, interleaved.",
    )
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--model", default="smollm2", help="model spec or HF folder (default: smollm2)")
    model.add_argument("--tiny", action="store_true", help="build a tiny random model in a temp folder")
    parser.add_argument("--actions", type=int, default=16, help="actions in the batch (default 16)")
    parser.add_argument("--prompt-tokens", type=int, default=128, help="mean prompt length (default 128)")
    parser.add_argument("--response-tokens", type=int, default=128, help="mean response length (128)")
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per child, after 1 warm-up")
    parser.add_argument("--repeats", type=int, default=3, help="children per side, alternating")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads, both sides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=default_out("update"), help="JSON result path")
    parser.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)  # internal: run one side
    parser.add_argument("--batch", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# ---------------------------------------------------------------- the batch (parent)


def build_batch(model_path: str, args: argparse.Namespace) -> dict[str, Any]:
    """Random token ids from the real vocabulary and random advantages, fixed by the seed."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rng = random.Random(args.seed)

    def length(mean: int) -> int:
        return max(1, rng.randint(mean - mean // 4, mean + mean // 4))

    def tokens(count: int) -> list[int]:
        return [rng.randrange(len(tokenizer)) for _ in range(count)]

    prompts = [tokens(length(args.prompt_tokens)) for _ in range(args.actions)]
    responses = [tokens(length(args.response_tokens)) for _ in range(args.actions)]
    advantages = [[rng.gauss(0.0, 1.0) for _ in r] for r in responses]
    return {"prompts": prompts, "responses": responses, "advantages": advantages, "pad_token_id": pad}


# ---------------------------------------------------------------- the two sides (children)


class MappaSide:
    """What mappa runs per agent and iteration: two `TorchTrainer.logprobs` calls, then `train`."""

    def __init__(self, model_path: str, batch: dict[str, Any], micro_batch_size: int) -> None:
        from mappa.config import AlgoConfig, TrainerConfig
        from mappa.trainer.torch_trainer import TorchTrainer

        self.batch = batch
        config = TrainerConfig(micro_batch_size=micro_batch_size)
        self.trainer = TorchTrainer(model_path, config, AlgoConfig(), batch["pad_token_id"], True, seed=0)

    def step(self) -> dict[str, float]:
        from mappa.cluster.memory import release_freed_memory
        from mappa.core.types import TrainSample

        prompts, responses = self.batch["prompts"], self.batch["responses"]
        started = time.perf_counter()
        old = self.trainer.logprobs(prompts, responses, "policy")
        self.trainer.logprobs(prompts, responses, "ref")  # feeds the KL rewards in mappa's advantages
        release_freed_memory()  # the advantages stage's end (`ModelWorker.release_memory`)
        forwards = time.perf_counter()
        samples = [TrainSample(*row) for row in zip(prompts, responses, old, self.batch["advantages"])]
        metrics = self.trainer.train(samples, seed=0)
        release_freed_memory()
        done = time.perf_counter()
        return {
            "forwards_s": forwards - started,
            "update_s": done - forwards,
            "loss": metrics["loss"],
            "grad_norm": metrics["grad_norm"],
        }


def run_steps(side, steps: int) -> tuple[dict[str, float], list[dict[str, float]]]:
    """One untimed warm-up step, then `steps` timed ones."""
    warm_up = side.step()
    timed = []
    for _ in range(steps):
        began = time.perf_counter()
        phases = side.step()
        timed.append({**phases, "step_s": time.perf_counter() - began})
    return warm_up, timed


def current_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_child(args: argparse.Namespace) -> None:
    """One side in this fresh process: load, warm up, timed steps; the result as JSON to `--result`."""
    import torch

    torch.set_num_threads(args.threads)
    batch = json.loads(Path(args.batch).read_text())
    started = time.perf_counter()
    if args.child == "mappa":
        side = MappaSide(args.model, batch, args.micro_batch_size)
    elif args.child == "trl":
        from trl_update import TrlSide

        side = TrlSide(args.model, batch, args.micro_batch_size, args.steps)
    else:
        from minimal_update import MinimalSide  # each child imports its own side only

        side = MinimalSide(args.model, batch, args.micro_batch_size)
    load_s = time.perf_counter() - started
    rss_after_load = current_rss_mb()
    warm_up, steps = side.run(args.steps) if args.child == "trl" else run_steps(side, args.steps)
    result = {
        "load_s": load_s,
        "rss_after_load_mb": rss_after_load,
        "peak_rss_mb": peak_rss_mb(),
        "warm_up": warm_up,
        "steps": steps,
        "response_tokens": sum(len(r) for r in batch["responses"]),
    }
    Path(args.result).write_text(json.dumps(result))


# ---------------------------------------------------------------- the comparison (parent)


def spawn(side: str, args: argparse.Namespace, model_path: str, batch_path: Path) -> dict[str, Any]:
    result_path = batch_path.with_name(f"result-{side}.json")
    command = [sys.executable, str(Path(__file__).resolve()), "--child", side, "--model", model_path]
    command += ["--batch", str(batch_path), "--result", str(result_path), "--threads", str(args.threads)]
    command += ["--micro-batch-size", str(args.micro_batch_size), "--steps", str(args.steps)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the {side} child failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(result_path.read_text())
    seconds = sum(s["step_s"] for s in result["steps"])
    result["tokens_per_s"] = result["response_tokens"] * len(result["steps"]) / max(seconds, 1e-9)
    return {"side": side, **result}


def trl_status() -> str | None:
    """TRL's version, or None when it is not installed."""
    if importlib.util.find_spec("trl") is None:
        return None
    return importlib.metadata.version("trl")


def compare(args: argparse.Namespace, model_path: str, scratch: Path) -> dict[str, Any]:
    trl = trl_status()
    print(f"trl {trl}: a third side" if trl else "trl not installed: the TRL side is skipped")
    sides = SIDES if trl else SIDES[:2]
    batch_path = scratch / "batch.json"
    batch_path.write_text(json.dumps(build_batch(model_path, args)))
    runs = []
    for repeat in range(args.repeats):
        for side in sides:
            run = {**spawn(side, args, model_path, batch_path), "repeat": repeat}
            runs.append(run)
            rate, peak = run["tokens_per_s"], run["peak_rss_mb"]
            print(f"repeat {repeat} {side}: {rate:.1f} tokens/s, peak RSS {peak:.0f} MB")
    return summarize(runs, args, model_path, trl)


def summarize(runs: list[dict[str, Any]], args, model_path: str, trl: str | None) -> dict[str, Any]:
    sides = [side for side in SIDES if any(r["side"] == side for r in runs)]
    speed = {side: median([r["tokens_per_s"] for r in runs if r["side"] == side]) for side in sides}
    peak = {side: median([r["peak_rss_mb"] for r in runs if r["side"] == side]) for side in sides}
    speed_ratio = speed["mappa"] / speed["minimal"]
    memory_ratio = peak["mappa"] / peak["minimal"]
    settings = {key: getattr(args, key) for key in ("actions", "prompt_tokens", "response_tokens")}
    settings.update(
        model=model_path,
        micro_batch_size=args.micro_batch_size,
        steps=args.steps,
        repeats=args.repeats,
        seed=args.seed,
        response_tokens_per_step=runs[0]["response_tokens"],
    )
    result = {
        "benchmark": "update",
        "settings": settings,
        "machine": machine_info(args.threads),
        "runs": runs,
        "median_tokens_per_s": speed,
        "median_peak_rss_mb": peak,
        "speed_ratio": speed_ratio,
        "speed_target": SPEED_TARGET,
        "speed_verdict": verdict(speed_ratio >= SPEED_TARGET),
        "memory_ratio": memory_ratio,
        "memory_target": MEMORY_TARGET,
        "memory_verdict": verdict(memory_ratio <= MEMORY_TARGET),
        "trl": None,
    }
    if trl:
        trl_ratio = speed["mappa"] / speed["trl"]
        result["trl"] = {
            "version": trl,
            "speed_ratio": trl_ratio,
            "speed_target": TRL_SPEED_TARGET,
            "speed_verdict": verdict(trl_ratio >= TRL_SPEED_TARGET),
            "memory_ratio": peak["mappa"] / peak["trl"],
        }
    return result


def report(result: dict[str, Any]) -> None:
    machine = result["machine"]
    facts = {**result["settings"], **machine}
    bf16 = machine["bf16_autocast"]
    facts["precision"] = "fp32 + bf16 autocast (native)" if bf16 else "fp32 (no native bf16)"
    print_facts("Update benchmark: settings and machine", facts)
    report_children(result["runs"])
    speed, peak = result["median_tokens_per_s"], result["median_peak_rss_mb"]
    sides = list(speed)
    warm = {side: next(r["warm_up"] for r in result["runs"] if r["side"] == side) for side in sides}
    trl = result["trl"]
    rows = [
        ("training tokens/s (median)", *(speed[side] for side in sides), result["speed_ratio"])
        + (f">= {SPEED_TARGET}", result["speed_verdict"]),
        ("peak RSS MB (median)", *(peak[side] for side in sides), result["memory_ratio"])
        + (f"<= {MEMORY_TARGET}", result["memory_verdict"]),
    ]
    if trl:
        rows.append(
            ("mappa / TRL tokens/s", *("" for _ in sides), trl["speed_ratio"])
            + (f">= {TRL_SPEED_TARGET}", trl["speed_verdict"])
        )
        rows.append(("mappa / TRL peak RSS", *("" for _ in sides), trl["memory_ratio"], "", ""))
    for figure in ("loss", "grad_norm"):  # mappa and minimal compute the same update; TRL's differs
        values = (f"{warm[side][figure]:.6g}" for side in sides)
        rows.append((f"check: warm-up {figure}", *values, "", "", ""))
    columns = ("figure", *sides, "ratio", "target", "verdict")
    print_table("Result (ratios: mappa / minimal unless named)", columns, rows)
    print(f"TRL {trl['version']} ran as a third side" if trl else "trl not installed: no TRL figures")


def report_children(runs: list[dict[str, Any]]) -> None:
    times, memory = [], []
    for r in runs:
        seconds = {key: median([s[key] for s in r["steps"]]) for key in ("forwards_s", "update_s", "step_s")}
        times.append((r["side"], r["repeat"], r["load_s"], *seconds.values(), r["tokens_per_s"]))
        increase = r["peak_rss_mb"] - r["rss_after_load_mb"]
        memory.append((r["side"], r["repeat"], r["rss_after_load_mb"], r["peak_rss_mb"], increase))
    print_table(
        "Time per child process (in run order; seconds are medians over its timed steps)",
        ("side", "repeat", "load s", "old+ref fwd s", "update s", "step s", "tokens/s"),
        times,
    )
    print_table(
        "Memory per child process (RSS after loading, peak RSS, the step's own increase)",
        ("side", "repeat", "loaded MB", "peak MB", "step's own MB"),
        memory,
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        run_child(args)
        return
    scratch = Path(tempfile.mkdtemp(prefix="mappa-bench-"))
    try:
        model_path = benchmark_model(args.model, args.tiny, scratch)
        print(f"model {model_path}; torch threads {args.threads} on both sides")
        result = compare(args, model_path, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report(result)
    print(f"wrote {write_json(args.out, result)}")


if __name__ == "__main__":
    main()
