"""How well does the local LLM coach separate good actions from bad ones? Scoring methods against the rubric.

Reads the trajectories of finished rollouts (`--runs RUN [RUN ...]` under `--root`, every iteration's
`rollout/trajectories.parquet`), scores every action with the rubric coach with ground truth (the
reference) and with each local-model scoring method in this process (HF, fp32, no Ray):

    expected   probability-weighted score tokens after "PROCESS_SCORE: " (`mappa.coach.expected`)
    criteria   10 x mean P(Yes) over the template's yes/no questions for the seat (`mappa.coach.criteria`)

and reports per agent and method: the AUC of the method's score for telling actions the rubric scores
high (>= 7) from those it scores low (<= 3), and Spearman's rank correlation with the rubric over all
actions. An AUC of 0.5 is chance. Prints a table and writes JSON (`--out`).

Not covered: coaches behind an endpoint (score a run with `coach.type=openai` and read its score
manifest's `rubric_agreement`), envs other than MathChat's template.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

from mappa.stages import output_parts, stage_complete

REPO = Path(__file__).resolve().parents[1]
METHODS = ("expected", "criteria")
HIGH, LOW = 7.0, 3.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(REPO / "benchmarks" / "runs" / "learning"))
    parser.add_argument("--runs", nargs="+", required=True, help="run ids whose rollouts to score")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--model", default="smollm2", help="the coach model")
    parser.add_argument("--max-actions", type=int, default=192, help="at most this many actions in all")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "coach_signal.json"))
    return parser.parse_args()


def load_trajectories(root: str, run_ids: list[str]) -> list:
    from mappa.storage.frames import frame_to_trajectories
    from mappa.storage.run import Run

    trajectories = []
    for run_id in run_ids:
        run = Run.open(root, run_id)
        for iteration in range(run.config.iterations):
            if stage_complete(run, iteration, "rollout"):
                frame = run.store.read_parquet(*output_parts(run, iteration, "rollout"))
                trajectories.extend(frame_to_trajectories(frame))
    if not trajectories:
        raise SystemExit(f"no finished rollout in runs {run_ids} under {root}")
    return trajectories


def auc(scores: list[float], labels: list[bool]) -> float | None:
    """P(score of a random positive > score of a random negative), ties counting half; None if one class
    is empty."""
    positives = [s for s, y in zip(scores, labels) if y]
    negatives = [s for s, y in zip(scores, labels) if not y]
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def spearman(a: list[float], b: list[float]) -> float | None:
    import pandas as pd

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(pd.Series(a).corr(pd.Series(b), method="spearman"))


def local_logprob_fn(model_name: str):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mappa.inference.hf import HFEngine
    from mappa.inference.prepare import resolve_model

    path = resolve_model(model_name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    engine = HFEngine(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), tokenizer)

    def render(chat, prefix=""):
        return tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) + prefix

    async def logprobs(chats, prefix, candidates, positions):
        return engine.next_token_logprobs([render(c, prefix) for c in chats], candidates, positions)

    async def grouped(groups, candidates):
        return engine.grouped_next_token_logprobs([[render(c) for c in g] for g in groups], candidates)

    return logprobs, grouped


def score_all(trajectories, methods: list[str], model: str) -> tuple[dict[str, list], float]:
    from mappa.coach.build import build_coach
    from mappa.coach.score import score_trajectories
    from mappa.config import CoachConfig
    from mappa.envs.mathchat import ROLES

    rubric = CoachConfig(type="rubric", use_ground_truth=True)
    scored = {"rubric": asyncio.run(score_trajectories(build_coach(rubric), trajectories, ROLES, rubric))}
    logprob_fn, grouped_fn = local_logprob_fn(model)
    seconds = {}
    for method in methods:
        config = CoachConfig(type="local", scoring=method, model=model, use_ground_truth=True)
        coach = build_coach(config, logprob_fn=logprob_fn, grouped_logprob_fn=grouped_fn)
        started = time.perf_counter()
        scored[method] = asyncio.run(score_trajectories(coach, trajectories, ROLES, config))
        seconds[method] = time.perf_counter() - started
        print(f"{method}: {len(scored[method])} actions in {seconds[method]:.0f} s", flush=True)
    return scored, seconds


def separation(scored: dict[str, list], methods: list[str]) -> list[dict]:
    rows = []
    rubric = scored["rubric"]
    for agent in sorted({s.agent for s in rubric}):
        index = [i for i, s in enumerate(rubric) if s.agent == agent]
        truth = [rubric[i].score for i in index]
        extreme = [i for i, t in zip(index, truth) if t >= HIGH or t <= LOW]
        for method in methods:
            values = [scored[method][i].score for i in index]
            rows.append(
                {
                    "agent": agent,
                    "method": method,
                    "actions": len(index),
                    "high": sum(t >= HIGH for t in truth),
                    "low": sum(t <= LOW for t in truth),
                    "auc": auc(
                        [scored[method][i].score for i in extreme], [rubric[i].score >= HIGH for i in extreme]
                    ),
                    "spearman": spearman(values, truth),
                    "mean_score": sum(values) / len(values),
                }
            )
    return rows


def main() -> int:
    args = parse_args()
    trajectories = load_trajectories(args.root, args.runs)
    kept, count = [], 0
    for trajectory in trajectories:  # whole trajectories, up to the action budget
        if count + len(trajectory.actions) > args.max_actions:
            break
        kept.append(trajectory)
        count += len(trajectory.actions)
    print(f"{len(kept)} trajectories, {count} actions from {args.runs}", flush=True)
    scored, seconds = score_all(kept, args.methods, args.model)
    rows = separation(scored, args.methods)
    print("\nagent     method    actions  high  low   AUC (high vs low)  Spearman  mean score")
    for r in rows:
        auc_text = "   -" if r["auc"] is None else f"{r['auc']:.2f}"
        rho = "   -" if r["spearman"] is None else f"{r['spearman']:+.2f}"
        print(
            f"{r['agent']:<9} {r['method']:<9} {r['actions']:>7} {r['high']:>5} {r['low']:>4}"
            f"   {auc_text:>16}  {rho:>8}  {r['mean_score']:10.2f}"
        )
    report = {
        "benchmark": "coach_signal",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cores": os.cpu_count()},
        "settings": vars(args),
        "trajectories": len(kept),
        "actions": count,
        "seconds": seconds,
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
