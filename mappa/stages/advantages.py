"""The advantages stage: trajectories + scores -> experiences.parquet (REINFORCE++, `mappa.core.advantages`).

Reference logprobs are computed for every action of every trainable agent, and old logprobs (the policy
that sampled) either recomputed in fp32 by the agent's worker or taken from the rollout (`algo.old_logprobs`;
`auto` takes the rollout's where they are the same numbers: the HF engine on the trainer's fp32 weights).
When recomputed, the manifest's `logprob_mismatch` holds the per-agent gap to the rollout's logprobs.
At iteration 0 the policy is the reference (every worker serves the initial weights), so only one pass
runs there: the policy pass when old logprobs are recomputed, none when the rollout's logprobs are the
trainer's own numbers (`reference_pass` in the manifest says which).
Then the pure core turns scores and logprobs into KL, token rewards, returns and whitened advantages
(scope `agent`: per agent; `global`: all together), after subtracting each action's sibling mean score
with `algo.baseline=siblings` (the same agent and turn across the samples of its problem). Actions of
frozen agents are scored but produce no experience. An action the coach left unscored (parse status
`fallback`) keeps its experience row with advantages exactly 0 and stays out of the whitening statistics;
the manifest's `unscored` counts them per trainable agent. Skipped when its manifest matches.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
import ray
import torch

from mappa.cluster.ray_cluster import agent_workers
from mappa.config import rollout_logprobs_are_trainers
from mappa.core.advantages import compute_reinforce_pp_advantages, pad_sequences
from mappa.core.types import UNSCORED, Experience
from mappa.stages.stage import Stage, output_parts, register, write_manifest
from mappa.storage.frames import action_ids, experiences_to_frame
from mappa.storage.run import OUTPUTS, Run


def join_scores(actions: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """Actions with their scores and parse statuses; every action must have exactly one score."""
    actions = actions.assign(action_id=action_ids(actions))
    if "parse_status" not in scores:  # (a scores file written by hand may lack it)
        scores = scores.assign(parse_status="ok")
    columns = ["action_id", "score", "parse_status"]
    merged = actions.merge(scores[columns], on="action_id", how="left", validate="one_to_one")
    missing = merged["score"].isna().sum()
    if missing:
        raise ValueError(f"{missing} actions have no coach score; re-run the score stage of this iteration")
    return merged


def reference_pass(iteration: int, recompute_old: bool, rollout_exact: bool) -> str:
    """Which passes the reference logprobs need: `run` (a pass of the frozen reference), `policy` (the
    policy's recomputed old logprobs are the reference's: iteration 0 serves the initial weights) or
    `rollout` (iteration 0, and the rollout's logprobs are the trainer's own numbers: no pass at all)."""
    if iteration > 0:
        return "run"
    if recompute_old:
        return "policy"
    return "rollout" if rollout_exact else "run"


def fetch_logprobs(
    run: Run, iteration: int, frame: pd.DataFrame, recompute_old: bool = True, reference: str = "run"
) -> dict[str, list[list[float]]]:
    """Old (policy) and reference logprobs per row, from each agent's worker, in frame order. Without
    `recompute_old` the old logprobs are the rollout's own (`frame["logprobs"]`); `reference` (see
    `reference_pass`) says whether the reference pass runs or equals the old logprobs."""
    workers = agent_workers(run, iteration, purpose=f"the advantages of iteration {iteration}")
    old: list[Any] = [None] * len(frame)
    ref: list[Any] = [None] * len(frame)
    for agent, rows in frame.groupby("agent").groups.items():
        positions = [frame.index.get_loc(r) for r in rows]
        prompts = [list(map(int, frame.iloc[p]["prompt_token_ids"])) for p in positions]
        responses = [list(map(int, frame.iloc[p]["response_token_ids"])) for p in positions]
        worker = workers[agent]
        passes = (["ref"] if reference == "run" else []) + (["policy"] if recompute_old else [])
        computed = dict(zip(passes, ray.get([worker.logprobs.remote(prompts, responses, w) for w in passes])))
        if passes:
            ray.get(worker.release_memory.remote())  # once both passes are done: the next agent needs it
        sampled = [list(map(float, frame.iloc[p]["logprobs"])) for p in positions]
        old_rows = computed.get("policy", sampled)
        ref_rows = computed.get("ref", old_rows)
        for i, p in enumerate(positions):
            old[p], ref[p] = old_rows[i], ref_rows[i]
    return {"old": old, "ref": ref}


def logprob_mismatch(frame: pd.DataFrame, old: list[list[float]]) -> dict[str, dict[str, float]]:
    """Per agent, how far the rollout's sampling logprobs are from the recomputed old ones: mean and max
    absolute difference per token (verl's and prime-rl's rollout/trainer mismatch)."""
    out = {}
    for agent, rows in frame.groupby("agent").groups.items():
        diffs = [
            abs(float(a) - float(b))
            for r in rows
            for a, b in zip(frame.loc[r, "logprobs"], old[frame.index.get_loc(r)], strict=True)
        ]
        if diffs:
            out[str(agent)] = {"mean_abs": sum(diffs) / len(diffs), "max_abs": max(diffs)}
    return out


def sibling_groups(frame: pd.DataFrame) -> list[str]:
    """Each action's sibling group for `algo.baseline=siblings`: the same agent at the same turn of the
    samples of one problem."""
    keys = zip(frame["problem_id"], frame["agent"], frame["turn"], strict=True)
    return [f"{problem}/{agent}/{turn}" for problem, agent, turn in keys]


def compute_experiences(frame: pd.DataFrame, old: list, ref: list, run: Run) -> pd.DataFrame:
    algo = run.config.algo
    old_t, mask = pad_sequences(old)
    ref_t, _ = pad_sequences(ref)
    scores = torch.tensor(frame["score"].astype(float).tolist())
    groups = frame["agent"].tolist() if algo.whiten_scope == "agent" else None
    scored = torch.tensor((frame["parse_status"] != UNSCORED).tolist(), dtype=torch.bool)
    out = compute_reinforce_pp_advantages(
        old_t,
        ref_t,
        scores,
        mask,
        beta=algo.beta,
        kl_estimator=algo.kl_estimator,
        reward_scale=algo.reward_scale,
        reward_clip=algo.reward_clip,
        groups=groups,
        scored=scored,
        baseline_groups=sibling_groups(frame) if algo.baseline == "siblings" else None,
    )
    lengths = mask.sum(dim=1).long().tolist()

    def row(t: torch.Tensor, i: int) -> tuple[float, ...]:
        return tuple(t[i, : lengths[i]].tolist())

    experiences = [
        Experience(
            action_id=str(record["action_id"]),
            agent=str(record["agent"]),
            prompt_token_ids=tuple(int(x) for x in record["prompt_token_ids"]),
            response_token_ids=tuple(int(x) for x in record["response_token_ids"]),
            old_logprobs=tuple(float(x) for x in old[i]),
            ref_logprobs=tuple(float(x) for x in ref[i]),
            kl=row(out["kl"], i),
            rewards=row(out["rewards"], i),
            returns=row(out["returns"], i),
            advantages=row(out["advantages"], i),
            score=float(record["score"]),
        )
        for i, record in enumerate(frame.to_dict("records"))
    ]
    return experiences_to_frame(experiences)


def compute_iteration_advantages(run: Run, iteration: int) -> dict[str, Any]:
    """Logprobs and REINFORCE++ advantages of iteration `iteration`; experiences.parquet and the manifest."""
    started = time.perf_counter()
    actions = run.store.read_parquet(*output_parts(run, iteration, "rollout"))
    scores = run.store.read_parquet(*output_parts(run, iteration, "score"))
    trainable = [name for name, agent in run.config.agents.items() if agent.trainable]
    frame = join_scores(actions, scores)
    frame = frame[frame["agent"].isin(trainable) & (frame["response_token_ids"].map(len) > 0)]
    frame = frame.reset_index(drop=True)
    config = run.config
    source = config.algo.resolved_old_logprobs(config.engine, config.trainer)
    recompute = source == "recompute"
    exact = rollout_logprobs_are_trainers(config.engine, config.trainer)
    reference = reference_pass(iteration, recompute, exact)
    logprobs = fetch_logprobs(run, iteration, frame, recompute_old=recompute, reference=reference)
    mismatch = logprob_mismatch(frame, logprobs["old"]) if source == "recompute" else None
    experiences = compute_experiences(frame, logprobs["old"], logprobs["ref"], run)
    run.store.write_parquet(experiences, *output_parts(run, iteration, "advantages"))
    kl = experiences.groupby("agent")["kl"].apply(
        lambda s: float(pd.Series([x for r in s for x in r]).mean())
    )
    return write_manifest(
        run,
        iteration,
        "advantages",
        rows=len(experiences),
        timings={"total_s": time.perf_counter() - started},
        mean_kl=kl.to_dict(),
        old_logprobs=source,
        reference_pass=reference,
        baseline=config.algo.baseline,
        logprob_mismatch=mismatch,
        unscored=unscored_by_agent(frame, trainable),
    )


def unscored_by_agent(frame: pd.DataFrame, agents: list[str]) -> dict[str, int]:
    """How many of each trainable agent's actions the coach left unscored (masked out of the gradient)."""
    masked = frame.loc[frame["parse_status"] == UNSCORED, "agent"].value_counts()
    return {agent: int(masked.get(agent, 0)) for agent in agents}


def describe(manifest: dict[str, Any]) -> str:
    kl = ", ".join(f"{a} {v:.4f}" for a, v in manifest.get("mean_kl", {}).items())
    unscored = sum((manifest.get("unscored") or {}).values())
    masked = f", {unscored} unscored (no advantage)" if unscored else ""
    return f"{manifest['rows']} experiences, KL {kl}{masked}"


STAGE = register(
    Stage(
        "advantages",
        OUTPUTS["advantages"],
        compute_iteration_advantages,
        describe,
        inputs=("rollout", "score"),
    )
)
