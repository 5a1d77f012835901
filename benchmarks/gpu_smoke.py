"""GPU smoke check: two agents, each a random-init ~0.5B model, HF generation and ZeRO-3 updates on one GPU.

What it does: for each agent it builds a random-init model of real shapes (Qwen2-0.5B's: hidden 896, 24
layers, 14 heads, 2 KV heads, vocabulary 151,936; about 494M parameters), starts mappa's
`DeepSpeedTrainer` on it (ZeRO-3, bf16, world size 1 on NCCL) and a separate bf16 copy for generation
(the engine); all agents stay resident together. Then for `--steps` iterations, agent after agent: HF
`generate` samples `--batch` continuations of random prompts on the engine copy; old and reference
logprobs; one REINFORCE++ optimizer step with random per-token advantages (mappa's loss and
micro-batching); the gathered weights go back to the engine copy. It prints generation tokens/s, training
tokens/s (response tokens per optimizer-step second, logprob passes included), the weight push time and
peak GPU memory, and writes JSON.

It needs only torch, transformers, DeepSpeed (and pydantic, which DeepSpeed itself requires), with this
repository on the Python path: no tokenizer, no downloads, no Ray or Prefect. Expected time on one modern
GPU: a few minutes (model building and DeepSpeed's start dominate).

    python benchmarks/gpu_smoke.py                 # on a GPU machine, from the repository root
    python benchmarks/gpu_smoke.py --tiny          # the same path on CPU with a tiny model (a smoke check)

Not covered: vLLM engines, several ranks per agent, Ray placement (issue 4's other parts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, without installing it

from mappa.config import AlgoConfig, TrainerConfig  # noqa: E402
from mappa.core.types import TrainSample  # noqa: E402
from mappa.trainer.deepspeed_trainer import DeepSpeedTrainer  # noqa: E402

QWEN2_05B = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
)
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=1024,
    max_position_embeddings=512,
    tie_word_embeddings=True,
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny model on CPU: checks the path only")
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3, help="iterations per agent (generate + update)")
    parser.add_argument("--batch", type=int, default=32, help="sequences generated and trained per step")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--micro-batch-size", type=int, default=8)
    parser.add_argument("--out", default="benchmarks/results/gpu_smoke.json")
    return parser.parse_args()


def build_model(folder: Path, shapes: dict, dtype: torch.dtype) -> int:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(**shapes, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = Qwen2ForCausalLM(config).to(dtype)
    model.save_pretrained(folder, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


class SmokeAgent:
    """One agent: mappa's `DeepSpeedTrainer` (ZeRO-3) and a separate bf16 engine copy for generation."""

    def __init__(self, name: str, args: argparse.Namespace, shapes: dict, device: torch.device) -> None:
        from transformers import AutoModelForCausalLM

        self.name, self.args, self.shapes, self.device = name, args, shapes, device
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        # The folder lives as long as the agent: the trainer loads its reference model from it lazily.
        self.folder = tempfile.TemporaryDirectory(prefix=f"mappa-gpu-smoke-{name}-")
        folder = self.folder.name
        self.parameters = build_model(Path(folder), shapes, dtype)
        started = time.perf_counter()
        config = TrainerConfig(
            type="deepspeed",
            zero_stage=3,
            bf16_autocast=device.type == "cuda",
            lr=1e-6,
            micro_batch_size=args.micro_batch_size,
        )
        self.trainer = DeepSpeedTrainer(folder, config, AlgoConfig(), pad_token_id=0, seed=0)
        self.engine = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device).eval()
        self.start_s = time.perf_counter() - started
        self.generator = torch.Generator(device="cpu").manual_seed(len(name))
        self.steps: list[dict] = []

    def step(self) -> None:
        """Generate a batch on the engine copy, one optimizer step on it, push the weights back."""
        args, device = self.args, self.device
        size = (args.batch, args.prompt_tokens)
        prompts = torch.randint(3, self.shapes["vocab_size"], size, generator=self.generator)
        synchronize(device)
        began = time.perf_counter()
        with torch.no_grad():
            output = self.engine.generate(
                input_ids=prompts.to(device),
                attention_mask=torch.ones_like(prompts, device=device),
                do_sample=True,
                temperature=1.0,
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                pad_token_id=0,
            )
        synchronize(device)
        generate_s = time.perf_counter() - began
        responses = output[:, args.prompt_tokens :].tolist()
        prompt_rows = prompts.tolist()
        began = time.perf_counter()
        old = self.trainer.logprobs(prompt_rows, responses, "policy")
        self.trainer.logprobs(prompt_rows, responses, "ref")
        advantages = [torch.randn(len(r), generator=self.generator).tolist() for r in responses]
        samples = [TrainSample(*row) for row in zip(prompt_rows, responses, old, advantages)]
        metrics = self.trainer.train(samples, seed=len(self.steps))
        synchronize(device)
        train_s = time.perf_counter() - began
        began = time.perf_counter()
        self.engine.load_state_dict(self.trainer.full_state_dict(), strict=False)  # serve the new weights
        synchronize(device)
        push_s = time.perf_counter() - began
        tokens = sum(len(r) for r in responses)
        record = {
            "generate_tokens_per_s": tokens / generate_s,
            "train_tokens_per_s": tokens / train_s,
            "train_s": train_s,
            "weight_push_s": push_s,
            "loss": metrics["loss"],
            "grad_norm": metrics["grad_norm"],
        }
        self.steps.append(record)
        print(
            f"{self.name} step {len(self.steps) - 1}: generate {record['generate_tokens_per_s']:,.0f} "
            f"tokens/s, train {record['train_tokens_per_s']:,.0f} tokens/s ({train_s:.1f} s), push "
            f"{push_s:.2f} s, grad norm {metrics['grad_norm']:.3g}",
            flush=True,
        )

    def record(self) -> dict:
        fields = ("parameters", "start_s", "steps")
        return {"agent": self.name, **{field: getattr(self, field) for field in fields}}


def main() -> None:
    args = parse_args()
    if not args.tiny and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: run it on a GPU machine, or pass --tiny for the CPU path check")
    device = torch.device("cpu" if args.tiny else "cuda")
    shapes = TINY if args.tiny else QWEN2_05B
    if args.tiny:
        args.batch, args.prompt_tokens, args.new_tokens = min(args.batch, 4), 16, 16
        args.micro_batch_size = 2
    began = time.perf_counter()
    team = [SmokeAgent(f"agent{k}", args, shapes, device) for k in range(args.agents)]  # all resident
    for _ in range(args.steps):
        for agent in team:
            agent.step()
    agents = [agent.record() for agent in team]
    peak_gb = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
    timed = [s for a in agents for s in a["steps"][1:]] or [s for a in agents for s in a["steps"]]
    result = {
        "benchmark": "gpu_smoke",
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu (--tiny)",
        "torch": torch.__version__,
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "agents": agents,
        "median_generate_tokens_per_s": sorted(s["generate_tokens_per_s"] for s in timed)[len(timed) // 2],
        "median_train_tokens_per_s": sorted(s["train_tokens_per_s"] for s in timed)[len(timed) // 2],
        "peak_gpu_memory_gb": peak_gb,
        "wall_s": time.perf_counter() - began,
    }
    print(
        f"\n{result['device']}: {len(agents)} agents x {agents[0]['parameters'] / 1e6:.0f}M parameters; "
        f"generation {result['median_generate_tokens_per_s']:,.0f} tokens/s, "
        f"training {result['median_train_tokens_per_s']:,.0f} tokens/s (medians after each agent's first "
        f"step), peak GPU memory {peak_gb if peak_gb is None else round(peak_gb, 1)} GB, "
        f"{result['wall_s']:.0f} s in all"
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
