"""How well does a local LLM coach order actions as the rubric does? Scoring methods against the rubric.

Reads the trajectories of finished runs (`--runs RUN [RUN ...]` under `--root`: every iteration's
`rollout/trajectories.parquet`, or with `--stage evaluate` every evaluation's trajectories), scores every
action with the rubric coach with ground truth (the reference) and with each local-model scoring method in
this process (HF, fp32, no Ray), through `--template`:

    criteria   10 x mean P(Yes) over the template's yes/no questions for the seat (`mappa.coach.criteria`);
               `mathchat-facts` asks one fact per question with the reference answer written in it
    expected   probability-weighted score tokens after "PROCESS_SCORE: " (`mappa.coach.expected`)

and reports per run, agent and method: the pairwise AUC against the rubric (the share of action pairs
with different rubric scores that the method orders the same way, ties counting half: 1.0 orders every
such pair as the rubric, 0.5 is chance), the AUC of telling the rubric's high (>= 5) from its low (< 5)
actions, Spearman's rank correlation, and the seconds per action. Prints a table and writes JSON (`--out`).

Not covered: coaches behind an endpoint (score a run with `coach.type=openai` and read its score
manifest's `rubric_agreement`), envs other than MathChat.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import time
from pathlib import Path

from mappa.stages import output_parts, stage_complete

REPO = Path(__file__).resolve().parents[1]
METHODS = ("criteria", "expected")
HIGH = 5.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(REPO / "benchmarks" / "runs" / "learning"))
    parser.add_argument("--runs", nargs="+", required=True, help="run ids whose actions to score")
    parser.add_argument("--stage", choices=("rollout", "evaluate"), default="rollout")
    parser.add_argument("--methods", nargs="+", default=["criteria"], choices=METHODS)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="the coach model")
    parser.add_argument("--template", default="mathchat-facts")
    parser.add_argument("--max-actions", type=int, default=192, help="at most this many actions per run")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "coach_signal.json"))
    return parser.parse_args()


def load_trajectories(root: str, run_id: str, stage: str, max_actions: int) -> list:
    """Whole trajectories of one run, in order, up to `max_actions` actions."""
    from mappa.stages.evaluate import evaluation_complete, evaluation_parts
    from mappa.storage.frames import frame_to_trajectories
    from mappa.storage.run import Run

    run = Run.open(root, run_id)
    frames = []
    for iteration in range(-1 if stage == "evaluate" else 0, run.config.iterations):
        if stage == "rollout" and stage_complete(run, iteration, "rollout"):
            frames.append(run.store.read_parquet(*output_parts(run, iteration, "rollout")))
        elif stage == "evaluate" and evaluation_complete(run, iteration):
            frames.append(run.store.read_parquet(*evaluation_parts(run, iteration, "trajectories.parquet")))
    kept, count = [], 0
    for trajectory in (t for frame in frames for t in frame_to_trajectories(frame)):
        if count + len(trajectory.actions) > max_actions:
            break
        kept.append(_named_by_run(trajectory, run_id))
        count += len(trajectory.actions)
    if not kept:
        raise SystemExit(f"no finished {stage} in run {run_id} under {root}")
    return kept


def _named_by_run(trajectory, run_id: str):
    """The trajectory with its id (and so its actions' ids) prefixed by its run's: runs of one seed share
    trajectory ids (`iter-0000-<problem>-s0`), and scores are matched to actions by id."""
    tid = f"{run_id}:{trajectory.id}"
    actions = tuple(dataclasses.replace(a, trajectory_id=tid) for a in trajectory.actions)
    return dataclasses.replace(trajectory, id=tid, actions=actions)


def pairwise_auc(scores: list[float], truth: list[float]) -> float | None:
    """The share of pairs with different `truth` that `scores` orders the same way, ties counting half."""
    wins = pairs = 0.0
    for i in range(len(truth)):
        for j in range(len(truth)):
            if truth[i] > truth[j]:
                pairs += 1
                wins += (scores[i] > scores[j]) + 0.5 * (scores[i] == scores[j])
    return wins / pairs if pairs else None


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
    from mappa.models.prepare import resolve_model

    path = resolve_model(model_name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    # as the run's coach worker does (bf16 autocast where the CPU has it: fp32 ordered these actions no
    # better, at twice the time)
    engine = HFEngine(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), tokenizer)

    def render(chat, prefix=""):
        return tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) + prefix

    async def logprobs(chats, prefix, candidates, positions):
        return engine.next_token_logprobs([render(c, prefix) for c in chats], candidates, positions)

    async def grouped(groups, candidates):
        return engine.grouped_next_token_logprobs([[render(c) for c in g] for g in groups], candidates)

    return logprobs, grouped


def score_all(trajectories, methods: list[str], model: str, template: str) -> tuple[dict[str, list], dict]:
    from mappa.coach.build import build_coach
    from mappa.coach.score import score_trajectories
    from mappa.config import CoachConfig
    from mappa.envs.mathchat.team import ROLES, SPEC

    rubric = CoachConfig(type="rubric", use_ground_truth=True)
    rules = build_coach(rubric, env=SPEC)
    scored = {"rubric": asyncio.run(score_trajectories(rules, trajectories, ROLES, rubric))}
    logprob_fn, grouped_fn = local_logprob_fn(model)
    seconds = {}
    for method in methods:
        config = CoachConfig(
            type="local", scoring=method, model=model, template=template, use_ground_truth=True
        )
        coach = build_coach(config, logprob_fn=logprob_fn, grouped_logprob_fn=grouped_fn)
        started = time.perf_counter()
        scored[method] = asyncio.run(score_trajectories(coach, trajectories, ROLES, config))
        seconds[method] = time.perf_counter() - started
        print(f"{method}: {len(scored[method])} actions in {seconds[method]:.0f} s", flush=True)
    return scored, seconds


def separation(scored: dict[str, list], methods: list[str], runs: list[str], seconds: dict) -> list[dict]:
    """One row per run (and `all`), agent and method."""
    rubric = scored["rubric"]
    rows = []
    for run in [*sorted(set(runs)), "all"]:
        for agent in sorted({s.agent for s in rubric}):
            index = [i for i, s in enumerate(rubric) if s.agent == agent and run in ("all", runs[i])]
            truth = [rubric[i].score for i in index]
            for method in methods:
                values = [scored[method][i].score for i in index]
                rows.append(
                    {
                        "run": run,
                        "agent": agent,
                        "method": method,
                        "actions": len(index),
                        "rubric_levels": sorted(set(truth)),
                        "auc": pairwise_auc(values, truth),
                        "auc_high_low": auc(values, [t >= HIGH for t in truth]),
                        "spearman": spearman(values, truth),
                        "mean_score": sum(values) / len(values),
                        "seconds_per_action": seconds[method] / len(rubric),
                        "per_question": per_question(scored[method], index, truth),
                    }
                )
    return rows


def per_question(scores: list, index: list[int], truth: list[float]) -> dict[str, float | None]:
    """The pairwise AUC of each criteria question's credit alone (P(Yes), or P(No) for a question marked
    `(no)`; criteria scoring only)."""
    from mappa.coach.criteria import credit

    asked = [scores[i].criteria or {} for i in index]
    questions = sorted({q for answers in asked for q in answers})
    return {q: pairwise_auc([credit(q, answers.get(q, 0.5)) for answers in asked], truth) for q in questions}


def print_rows(rows: list[dict]) -> None:
    print(
        "\nrun                 agent     method    actions  AUC (pairs)  AUC (>=5 vs <5)  Spearman  s/action"
    )
    for r in rows:
        cells = ["   -" if r[k] is None else f"{r[k]:.2f}" for k in ("auc", "auc_high_low", "spearman")]
        print(
            f"{r['run']:<19} {r['agent']:<9} {r['method']:<9} {r['actions']:>7}  {cells[0]:>11}"
            f"  {cells[1]:>15}  {cells[2]:>8}  {r['seconds_per_action']:5.2f}"
        )
        for question, value in r["per_question"].items() if r["run"] == "all" else ():
            print(f"{'':<30} {'-' if value is None else f'{value:.2f}':>5}  {question}")


def main() -> int:
    args = parse_args()
    trajectories, runs = [], []
    for run_id in args.runs:
        found = load_trajectories(args.root, run_id, args.stage, args.max_actions)
        trajectories += found
        runs += [run_id] * sum(len(t.actions) for t in found)
    print(f"{len(trajectories)} trajectories, {len(runs)} actions from {args.runs}", flush=True)
    scored, seconds = score_all(trajectories, args.methods, args.model, args.template)
    rows = separation(scored, args.methods, runs, seconds)
    print_rows(rows)
    report = {
        "benchmark": "coach_signal",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cores": os.cpu_count()},
        "settings": vars(args),
        "trajectories": len(trajectories),
        "actions": len(runs),
        "seconds": seconds,
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
