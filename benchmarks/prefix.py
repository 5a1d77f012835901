"""Does running a batch's common prompt prefix once pay off? `mappa.inference.prefix` on and off.

What it measures: SmolLM2-135M-Instruct (this machine's precision and thread count) on MathChat seat prompts
built as the env builds them (each seat's system prompt from `mappa.envs.mathchat.team.ROLES`, then a training
problem, and for the executor and verifier filler standing in for the solver's reasoning and the program,
to about 150 and 260 tokens like theirs), `--problems` prompts per seat:

    generate   the HF engine's batched greedy generation, `--max-new-tokens` (the same tokens both ways:
               checked)
    train      the torch trainer's forward and backward over prompt + generated response, micro-batches of
               4 (`batch_response_logprobs`), as an update runs them

each once with the common prefix run once (`shared`, as shipped) and once with it computed per row
(`plain`: `MIN_SHARED` set out of reach), interleaved (shared, plain, shared, ...) for `--repeats` rounds;
the median seconds of each and the ratio. PASS where the shared side is not slower (within 5%) anywhere.

    python benchmarks/prefix.py     # about 3 minutes on a 2-core machine

Not covered: the coach's batches (Qwen-0.5B; measured on stored actions in BENCHMARKS.md), DeepSpeed (which
keeps the plain batch), vLLM (its own prefix caching), GPUs.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import json  # noqa: E402
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
from engine import DATA  # noqa: E402

SIDES = ("shared", "plain")
FILLER = {  # stands in for what the seat reads after the problem: the solver's reasoning, the program
    "solver": 0,
    "executor": 3,
    "verifier": 9,
}
SENTENCE = (
    "The Problem Solver wrote its reasoning and the Code Executor ran a program that printed a number. "
)
SLOWER = 0.05  # the shared side may be this much slower and still pass (timing noise)
MICRO_BATCH = 4


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out", default=default_out("prefix"))
    return parser.parse_args()


def seat_prompts(tokenizer, seat: str, count: int) -> list[str]:
    """`count` chat prompts of `seat`: its system prompt, then a training problem (and filler)."""
    from mappa.envs.mathchat.team import ROLES

    rows = [json.loads(line) for line in DATA.read_text().splitlines()[:count]]
    chats = [
        [
            {"role": "system", "content": ROLES[seat]},
            {"role": "user", "content": f"Problem: {row['problem']}\n\n" + SENTENCE * FILLER[seat]},
        ]
        for row in rows
    ]
    return [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]


def train_pass(model, prompts: list[list[int]], responses: list[list[int]], pad: int) -> None:
    from mappa.trainer.logprobs import batch_response_logprobs

    model.zero_grad(set_to_none=True)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]) + len(responses[i]))
    for start in range(0, len(order), MICRO_BATCH):
        chunk = order[start : start + MICRO_BATCH]
        logprobs, mask = batch_response_logprobs(
            model, [prompts[i] for i in chunk], [responses[i] for i in chunk], pad
        )
        (logprobs * mask).sum().backward()
    model.zero_grad(set_to_none=True)


def main() -> None:
    args = parse_args()
    tokenizer, model = load_causal_lm("smollm2", args.threads)
    from mappa.inference import prefix
    from mappa.inference.engine import SamplingParams
    from mappa.inference.hf import HFEngine
    from mappa.inference.precision import resolve_bf16

    bf16 = resolve_bf16("auto")
    engine = HFEngine(model, tokenizer, args.problems, bf16)
    params = SamplingParams(temperature=0.0, max_new_tokens=args.max_new_tokens)
    reach = prefix.MIN_SHARED
    table, rows, same, not_slower = [], {}, True, True
    for seat in FILLER:
        prompts = seat_prompts(tokenizer, seat, args.problems)
        ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        shared_tokens = prefix.common_prefix_length(ids)
        seconds = {(work, side): [] for work in ("generate", "train") for side in SIDES}
        outputs: dict[str, list[list[int]]] = {}
        for repeat in range(args.repeats):
            for side in SIDES:
                prefix.MIN_SHARED = reach if side == "shared" else 10**9
                try:
                    began = time.perf_counter()
                    generations = engine.generate(prompts, params)
                    seconds["generate", side].append(time.perf_counter() - began)
                    outputs[side] = [list(g.token_ids) for g in generations]
                    began = time.perf_counter()
                    train_pass(model, ids, outputs[side], tokenizer.pad_token_id)
                    seconds["train", side].append(time.perf_counter() - began)
                finally:
                    prefix.MIN_SHARED = reach
                print(
                    f"{seat} {repeat} {side}: generate {seconds['generate', side][-1]:.1f} s, "
                    f"train {seconds['train', side][-1]:.1f} s",
                    flush=True,
                )
        same &= outputs["shared"] == outputs["plain"]
        mean_prompt = sum(map(len, ids)) / len(ids)
        rows[seat] = {"prompt_tokens": mean_prompt, "shared_tokens": shared_tokens}
        for work in ("generate", "train"):
            fast, slow = median(seconds[work, "shared"]), median(seconds[work, "plain"])
            not_slower &= fast <= slow * (1 + SLOWER)
            rows[seat][work] = {"shared": fast, "plain": slow}
            table.append(
                (
                    seat,
                    work,
                    round(mean_prompt),
                    shared_tokens,
                    round(slow, 1),
                    round(fast, 1),
                    round(slow / fast, 2),
                )
            )
    result = {
        "benchmark": "prefix",
        "settings": {k: v for k, v in vars(args).items() if k != "out"} | {"bf16": bf16},
        "machine": machine_info(args.threads),
        "seconds": rows,
        "same_tokens": same,
        "verdict": verdict(same and not_slower),
    }
    print_facts("Shared prefix benchmark: settings", result["settings"])
    print_table(
        "Result (seconds per batch, median)",
        ("seat", "work", "prompt tokens", "shared tokens", "plain", "shared", "speed-up"),
        table,
    )
    print(f"same tokens both ways: {same}")
    print(f"verdict: {result['verdict']}")
    print(f"wrote {write_json(args.out, result)}")


if __name__ == "__main__":
    main()
