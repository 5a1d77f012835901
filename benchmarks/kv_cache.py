"""Does reserving the KV cache's room pay off? mappa's decoding loop with a growing against a reserved cache.

What it measures: mappa's HF engine (`mappa.inference.hf.HFEngine`, SmolLM2-135M-Instruct, this machine's
precision and thread count) generating one batch of `--problems` prompts, greedy, `--max-new-tokens`, at
three prompt lengths like the MathChat seats' (solver, executor and verifier prompts of about 80, 150 and
260 tokens: MathChat training problems after a filler context), once with the cache as shipped
(`mappa.inference.decode.ReservedLayer`: each step written into room reserved after the prefill) and once
with transformers' growing `DynamicLayer` (a concatenation, so a copy of every layer's cache, at every
step). Interleaved (reserved, growing, reserved, ...) for `--repeats` rounds; the median seconds per
batch of each and the ratio. Greedy decoding gives both sides the same tokens (checked), so they do the
same work. The verdict is PASS where the reserved cache is not slower (within 5%) at every length.

    python benchmarks/kv_cache.py     # about 4 minutes on a 2-core machine

Not covered: sampling at temperature > 0 (the same loop), vLLM (its own paged cache), GPUs.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import time  # noqa: E402

from comparison import (  # noqa: E402
    default_out,
    load_causal_lm,
    machine_info,
    median,
    print_facts,
    print_table,
    verdict,
    write_json,
)
from engine import prompts_for  # noqa: E402

SIDES = ("reserved", "growing")
LENGTHS = {"solver-like": 80, "executor-like": 150, "verifier-like": 260}  # prompt tokens, about
FILLER = "The Problem Solver wrote its reasoning and the Code Executor ran a program that printed a number. "
SLOWER = 0.05  # the reserved side may be this much slower and still pass (timing noise)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out", default=default_out("kv_cache"))
    return parser.parse_args()


def prompts_near(tokenizer, count: int, tokens: int) -> list[str]:
    """`count` chat prompts of about `tokens` tokens: filler sentences, then a training problem."""
    bare = prompts_for(tokenizer, count)
    short = min(len(tokenizer(p)["input_ids"]) for p in bare)
    repeats = max(0, round((tokens - short) / len(tokenizer(FILLER)["input_ids"])))
    return prompts_for(tokenizer, count, FILLER * repeats + "Solve step by step: ")


def main() -> None:
    args = parse_args()
    tokenizer, model = load_causal_lm("smollm2", args.threads)
    from mappa.inference import decode as decoding
    from mappa.inference.engine import SamplingParams
    from mappa.inference.hf import HFEngine
    from mappa.inference.precision import resolve_bf16

    bf16 = resolve_bf16("auto")
    engine = HFEngine(model, tokenizer, args.problems, bf16)
    params = SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens)
    reserve = decoding.reserve_room
    table, rows, same, not_slower = [], {}, True, True
    for name, tokens in LENGTHS.items():
        prompts = prompts_near(tokenizer, args.problems, tokens)
        mean_prompt = sum(len(tokenizer(p)["input_ids"]) for p in prompts) / len(prompts)
        seconds: dict[str, list[float]] = {side: [] for side in SIDES}
        outputs: dict[str, list[list[int]]] = {}
        for repeat in range(args.repeats):
            for side in SIDES:
                decoding.reserve_room = reserve if side == "reserved" else (lambda cache, room: cache)
                try:
                    began = time.perf_counter()
                    generations = engine.generate(prompts, params)
                    seconds[side].append(time.perf_counter() - began)
                finally:
                    decoding.reserve_room = reserve
                outputs[side] = [list(g.token_ids) for g in generations]
                print(f"{name} {repeat} {side}: {seconds[side][-1]:.1f} s", flush=True)
        same &= outputs["reserved"] == outputs["growing"]
        fast, slow = median(seconds["reserved"]), median(seconds["growing"])
        not_slower &= fast <= slow * (1 + SLOWER)
        new_tokens = sum(len(t) for t in outputs["reserved"])
        rows[name] = {
            "prompt_tokens": mean_prompt,
            "new_tokens": new_tokens,
            "seconds": {"reserved": fast, "growing": slow},
        }
        speedup = round(slow / fast, 2)
        table.append((name, round(mean_prompt), new_tokens, round(slow, 1), round(fast, 1), speedup))
    result = {
        "benchmark": "kv_cache",
        "settings": {k: v for k, v in vars(args).items() if k != "out"} | {"bf16_prefill": bf16},
        "machine": machine_info(args.threads),
        "seconds_per_batch": rows,
        "same_tokens": same,
        "verdict": verdict(same and not_slower),
    }
    print_facts("KV cache benchmark: settings", result["settings"])
    print_table(
        "Result (seconds per batch, median)",
        ("prompts", "prompt tokens", "new tokens", "growing", "reserved", "speed-up"),
        table,
    )
    print(f"same tokens both ways: {same}")
    print(f"verdict: {result['verdict']}")
    print(f"wrote {write_json(args.out, result)}")


if __name__ == "__main__":
    main()
