"""How hard is each built-in MathChat level for the base team? Held-out success and what each seat does.

For each difficulty level (`builtin:eval-level<N>`) and each temperature (greedy and the training
temperature), the base model (SmolLM2-135M-Instruct in all three seats, HF engine, in this process: no
Ray, no Prefect; 64 new tokens and one executor turn, as `configs/mathchat-cpu-learn.yaml`) runs the
MathChat team on the first `--problems` held-out problems and reports:

    strict       the verifier's \\boxed{} answer is right (the team's success, as the trainer grades it)
    flexible     the verifier's boxed answer, or else its last number, is right (lm-eval's GSM8K
                 "flexible-extract")
    ran          the executor's last program ran and printed something
    printed      the executor's last output states the right answer
    boxed        the verifier wrote a non-empty \\boxed{}
    placeholder  the verifier boxed no number (e.g. `\\boxed{answer}`, copied from a prompt)

It prints a table and writes JSON (`--out`). Numbers for BENCHMARKS.md's calibration table.
Not covered: trained checkpoints (use `mappa evaluate RUN --iteration K`), other envs.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.7])
    parser.add_argument("--problems", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--executor-turns", type=int, default=1)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "calibration.json"))
    return parser.parse_args()


def make_agents(model_name: str, temperature: float, max_new_tokens: int) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mappa.agents.agent import Agent
    from mappa.envs.mathchat.team import ROLES, STOPS
    from mappa.inference.engine import SamplingParams
    from mappa.inference.hf import HFEngine
    from mappa.models.prepare import resolve_model

    path = resolve_model(model_name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    engine = HFEngine(model, tokenizer, batch_size=32, bf16_autocast="auto")

    async def chat(chats, params):
        prompts = [
            tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats
        ]
        started = time.perf_counter()
        generations = engine.generate(prompts, params)
        seconds = (time.perf_counter() - started) / max(len(prompts), 1)
        return [(p, g, seconds) for p, g in zip(prompts, generations)]

    params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, seed=0)
    return {
        seat: Agent(seat, role, chat, dataclasses.replace(params, stop=STOPS.get(seat, ())))
        for seat, role in ROLES.items()
    }


def seat_figures(trajectories) -> dict[str, float]:
    from mappa.envs.mathchat.grading import extract_flexible, grade_answer
    from mappa.envs.mathchat.rubric import is_placeholder, last_boxed, states_answer

    rows = []
    for t in trajectories:
        executor = [a for a in t.actions if a.agent == "executor"][-1]
        verifier = t.actions[-1]
        result = executor.tool_result
        ran = result is not None and result.ok and bool(result.stdout.strip())
        boxed = last_boxed(verifier.response)
        flexible = extract_flexible(verifier.response)
        rows.append(
            {
                "strict": bool(t.correct),
                "flexible": flexible is not None and grade_answer(flexible, t.problem.answer),
                "ran": ran,
                "printed": ran and states_answer(result.stdout, t.problem.answer),
                "boxed": boxed is not None and bool(boxed.strip()),
                "placeholder": boxed is not None and is_placeholder(boxed, t.problem.answer),
            }
        )
    return {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}


def main() -> int:
    from mappa.envs.mathchat.levels import load_builtin_source
    from mappa.envs.mathchat.team import run_mathchat
    from mappa.sandbox import SandboxLimits

    args = parse_args()
    torch.manual_seed(0)
    results = []
    for temperature in args.temperatures:
        agents = make_agents(args.model, temperature, args.max_new_tokens)
        for level in args.levels:
            problems = load_builtin_source(f"builtin:eval-level{level}")[: args.problems]
            started = time.perf_counter()
            pairs = [(f"cal-{level}-{p.id}", p) for p in problems]
            limits = SandboxLimits(timeout_s=10)
            trajectories = asyncio.run(run_mathchat(pairs, agents, limits, args.executor_turns))
            figures = seat_figures(trajectories)
            row = {"level": level, "temperature": temperature, "problems": len(problems), **figures}
            row["seconds"] = time.perf_counter() - started
            results.append(row)
            print(json.dumps(row), flush=True)
            sample = trajectories[0]
            print(
                "  e.g.", sample.problem.question, "->", repr(sample.actions[-1].response[:160]), flush=True
            )
    print("\nlevel  temp  strict  flexible  exec ran  exec right  verifier boxed  placeholder")
    for r in results:
        print(
            f"{r['level']:>5}  {r['temperature']:.1f}  {r['strict']:6.0%}  {r['flexible']:8.0%}  "
            f"{r['ran']:8.0%}  {r['printed']:10.0%}  {r['boxed']:14.0%}  {r['placeholder']:11.0%}"
        )
    report = {
        "benchmark": "calibration",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cores": os.cpu_count()},
        "settings": vars(args),
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
