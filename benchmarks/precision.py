"""Does bf16 autocast pay off on this CPU? fp32 against bf16 autocast for the three things a CPU run does.

What it measures, each side by side in one process (fp32, bf16, fp32, bf16, ... for `--repeats` rounds,
the median of each), with this machine's thread count:

    generate   SmolLM2-135M-Instruct, mappa's HF engine: `--problems` chat prompts, `--max-new-tokens`,
               temperature 0.7 (a rollout batch): sampled tokens per second
    train      SmolLM2-135M-Instruct: forward and backward of the rollout's sequences in micro-batches of 4
               (the torch trainer's policy pass): padded tokens per second
    judge      the coach, Qwen2.5-Coder-0.5B-Instruct (`mappa models prepare qwen2.5-coder-0.5b`; skipped
               with `--no-coach` or when it is not prepared): next-token logprobs of Yes/No after
               `--problems` prompts of about 400 tokens (the criteria coach's call): prompts per second

and what `bf16_autocast: auto` picks here (`mappa.inference.precision`: bf16 where the CPU reports native
bf16). The verdict is PASS where `auto` picks the faster side of every row (a row within 10% counts as a
tie).

    python benchmarks/precision.py             # about 5 minutes on a 2-core machine
    python benchmarks/precision.py --no-coach  # the agents' model only

Not covered: GPUs (bf16 is native there), vLLM (its own dtype), DeepSpeed's bf16 mode.
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

TIE = 0.10  # sides within 10% of each other: either choice is fine
SIDES = ("fp32", "bf16")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-coach", action="store_true", help="skip the coach's row")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out", default=default_out("precision"))
    return parser.parse_args()


def interleaved(name: str, repeats: int, measure) -> dict[str, float]:
    """`measure(side)` -> (seconds, units), alternating the sides; the median units per second of each."""
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    for repeat in range(repeats):
        for side in SIDES:
            seconds, units = measure(side)
            rates[side].append(units / seconds)
            print(f"{name} {repeat} {side}: {units} in {seconds:.1f} s, {units / seconds:.1f}/s", flush=True)
    return {side: median(values) for side, values in rates.items()}


def generate_row(model, tokenizer, args) -> dict[str, float]:
    from mappa.inference.engine import SamplingParams
    from mappa.inference.hf import HFEngine

    prompts = prompts_for(tokenizer, args.problems)
    engines = {side: HFEngine(model, tokenizer, args.problems, side == "bf16") for side in SIDES}

    def measure(side: str) -> tuple[float, int]:
        params = SamplingParams(temperature=0.7, max_new_tokens=args.max_new_tokens, seed=0)
        began = time.perf_counter()
        generations = engines[side].generate(prompts, params)
        return time.perf_counter() - began, sum(len(g.token_ids) for g in generations)

    return interleaved("generate", args.repeats, measure)


def train_row(model, tokenizer, args) -> dict[str, float]:
    import torch

    from mappa.inference.precision import cpu_autocast

    texts = [p + "Let me work it out. " * 8 for p in prompts_for(tokenizer, args.problems)]
    model.train()

    def measure(side: str) -> tuple[float, int]:
        began, tokens = time.perf_counter(), 0
        for start in range(0, len(texts), 4):
            batch = tokenizer(texts[start : start + 4], return_tensors="pt", padding=True)
            with cpu_autocast(side == "bf16"):
                logits = model(**batch).logits.float()
            logprobs = torch.log_softmax(logits[:, :-1], -1).gather(-1, batch["input_ids"][:, 1:, None])
            (-(logprobs.squeeze(-1) * batch["attention_mask"][:, 1:]).mean()).backward()
            tokens += batch["input_ids"].numel()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - began, tokens

    result = interleaved("train", args.repeats, measure)
    model.eval()
    return result


def judge_row(args) -> dict[str, float] | None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mappa.inference.hf import HFEngine
    from mappa.models.prepare import resolve_model

    try:
        path = resolve_model("qwen2.5-coder-0.5b")
    except ValueError as error:  # not prepared: the message names the command
        print(f"judge: skipped ({error})")
        return None
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    story = "The program printed 42 and the solver wrote that the answer is 42. " * 12
    prompts = prompts_for(tokenizer, args.problems, f"{story}Answer Yes or No. Is this right? ")
    engines = {side: HFEngine(model, tokenizer, args.problems, side == "bf16") for side in SIDES}

    def measure(side: str) -> tuple[float, int]:
        began = time.perf_counter()
        engines[side].next_token_logprobs(prompts, ["Yes", "No"])
        return time.perf_counter() - began, len(prompts)

    return interleaved("judge", args.repeats, measure)


def main() -> None:
    args = parse_args()
    tokenizer, model = load_causal_lm("smollm2", args.threads)
    from mappa.inference.precision import resolve_bf16

    rows = {"generate": generate_row(model, tokenizer, args), "train": train_row(model, tokenizer, args)}
    if not args.no_coach and (judge := judge_row(args)) is not None:
        rows["judge"] = judge
    auto = "bf16" if resolve_bf16("auto") else "fp32"
    table, picks_faster = [], True
    for name, rate in rows.items():
        ratio = rate["bf16"] / rate["fp32"]
        faster = "tie" if abs(ratio - 1) <= TIE else ("bf16" if ratio > 1 else "fp32")
        picks_faster &= faster in ("tie", auto)
        table.append((name, round(rate["fp32"], 1), round(rate["bf16"], 1), round(ratio, 2), faster))
    result = {
        "benchmark": "precision",
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "machine": machine_info(args.threads),
        "per_second": rows,
        "auto_picks": auto,
        "verdict": verdict(picks_faster),
    }
    print_facts("Precision benchmark: settings", {**result["settings"], "auto picks": auto})
    print_table("Result (per second, median)", ("row", "fp32", "bf16 autocast", "bf16/fp32", "faster"), table)
    print(f"verdict: {result['verdict']} (auto picks {auto})")
    print(f"wrote {write_json(args.out, result)}")


if __name__ == "__main__":
    main()
