"""The advantages stage: trajectories + scores -> experiences.parquet (REINFORCE++, `mappa.core.advantages`).

Reference logprobs are computed for every action of every trainable agent, and old logprobs (the policy
that sampled) either recomputed in fp32 by the agent's worker or taken from the rollout (`algo.old_logprobs`;
`auto` takes the rollout's where they are the same numbers: the HF engine on the trainer's fp32 weights).
When recomputed, the manifest's `logprob_mismatch` holds the per-agent gap to the rollout's logprobs.
At iteration 0 the policy is the reference (every worker serves the initial weights), so only one pass
runs there: the policy pass when old logprobs are recomputed, none when the rollout's logprobs are the
trainer's own numbers (`reference_pass` in the manifest says which).
The rollout's actions and the coach's scores are read back as typed `Action`s and `ActionScore`s
(`read_scores`) and paired once by action id (`mappa.core.experiences.align_scores`: every action needs
exactly one score). Then the pure core (`mappa.core.experiences`) turns scores and logprobs into KL, token
rewards, returns and whitened advantages (scope `agent`: per agent; `global`: all together), after subtracting
each action's baseline, from the estimator `algo.baseline` names (`mappa.core.baselines`; `siblings`: the mean
score of the same agent and turn across the samples of its problem). Actions of frozen agents are scored but
produce no experience. An action the coach left unscored (parse status `fallback`) keeps its experience row
with advantages exactly 0 and stays out of the whitening statistics; the manifest's `unscored` counts them per
trainable agent. Skipped when its manifest matches.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pandas as pd
import ray

from mappa.cluster.ray_cluster import agent_workers
from mappa.config import AlgoConfig, rollout_logprobs_are_trainers
from mappa.core import experiences as core
from mappa.core.baseline_registry import get_baseline
from mappa.core.types import UNSCORED, Action, ActionScore, Experience
from mappa.stages.stage import Stage, output_parts, register, write_manifest
from mappa.storage.frames import experiences_to_frame, frame_to_trajectories, read_scores
from mappa.storage.run import OUTPUTS, Run


def scored_actions(run: Run, iteration: int, trainable: list[str]) -> tuple[list[Action], list[ActionScore]]:
    """The `trainable` agents' non-empty actions of iteration `iteration`'s rollout, in rollout order, each
    with its coach score (every action of the rollout must have exactly one)."""
    trajectories = frame_to_trajectories(run.store.read_parquet(*output_parts(run, iteration, "rollout")))
    actions = [action for trajectory in trajectories for action in trajectory.actions]
    scores = core.align_scores(actions, read_scores(run, iteration))
    kept = [i for i, action in enumerate(actions) if action.agent in trainable and action.response_token_ids]
    return [actions[i] for i in kept], [scores[i] for i in kept]


def reference_pass(iteration: int, recompute_old: bool, rollout_exact: bool) -> str:
    """Which passes the reference logprobs need: `run` (a pass of the frozen reference), `policy` (the
    policy's recomputed old logprobs are the reference's: iteration 0 serves the initial weights) or
    `rollout` (iteration 0, and the rollout's logprobs are the trainer's own numbers: no pass at all)."""
    if iteration > 0:
        return "run"
    if recompute_old:
        return "policy"
    return "rollout" if rollout_exact else "run"


def positions_by_agent(actions: list[Action]) -> dict[str, list[int]]:
    """Each agent's positions in `actions`, agents in name order."""
    positions: dict[str, list[int]] = {}
    for i, action in enumerate(actions):
        positions.setdefault(action.agent, []).append(i)
    return dict(sorted(positions.items()))


def fetch_logprobs(
    run: Run, iteration: int, actions: list[Action], recompute_old: bool = True, reference: str = "run"
) -> dict[str, list[list[float]]]:
    """Old (policy) and reference logprobs per action, from each agent's worker, in order. Without
    `recompute_old` the old logprobs are the rollout's own (`Action.logprobs`); `reference` (see
    `reference_pass`) says whether the reference pass runs or equals the old logprobs."""
    workers = agent_workers(run, iteration, purpose=f"the advantages of iteration {iteration}")
    old: list[Any] = [None] * len(actions)
    ref: list[Any] = [None] * len(actions)
    for agent, positions in positions_by_agent(actions).items():
        prompts = [list(actions[p].prompt_token_ids) for p in positions]
        responses = [list(actions[p].response_token_ids) for p in positions]
        worker = workers[agent]
        passes = (["ref"] if reference == "run" else []) + (["policy"] if recompute_old else [])
        computed = dict(zip(passes, ray.get([worker.logprobs.remote(prompts, responses, w) for w in passes])))
        if passes:
            ray.get(worker.release_memory.remote())  # once both passes are done: the next agent needs it
        sampled = [list(actions[p].logprobs) for p in positions]
        old_rows = computed.get("policy", sampled)
        ref_rows = computed.get("ref", old_rows)
        for i, p in enumerate(positions):
            old[p], ref[p] = old_rows[i], ref_rows[i]
    return {"old": old, "ref": ref}


def logprob_mismatch(actions: list[Action], old: list[list[float]]) -> dict[str, dict[str, float]]:
    """Per agent, how far the rollout's sampling logprobs are from the recomputed old ones: mean and max
    absolute difference per token (verl's and prime-rl's rollout/trainer mismatch)."""
    out = {}
    for agent, positions in positions_by_agent(actions).items():
        pairs = (pair for p in positions for pair in zip(actions[p].logprobs, old[p], strict=True))
        diffs = [abs(float(a) - float(b)) for a, b in pairs]
        if diffs:
            out[str(agent)] = {"mean_abs": sum(diffs) / len(diffs), "max_abs": max(diffs)}
    return out


def compute_experiences(
    actions: list[Action], scores: list[ActionScore], old: list, ref: list, algo: AlgoConfig
) -> list[Experience]:
    """The REINFORCE++ experiences of `actions` (`mappa.core.experiences`) with the run's `algo` settings."""
    return core.compute_experiences(
        actions,
        scores,
        old,
        ref,
        beta=algo.beta,
        kl_estimator=algo.kl_estimator,
        reward_scale=algo.reward_scale,
        reward_clip=algo.reward_clip,
        whiten_groups=[action.agent for action in actions] if algo.whiten_scope == "agent" else None,
        baseline=get_baseline(algo.baseline),
    )


def compute_iteration_advantages(run: Run, iteration: int) -> dict[str, Any]:
    """Logprobs and REINFORCE++ advantages of iteration `iteration`; experiences.parquet and the manifest."""
    started = time.perf_counter()
    trainable = [name for name, agent in run.config.agents.items() if agent.trainable]
    actions, scores = scored_actions(run, iteration, trainable)
    config = run.config
    source = config.algo.resolved_old_logprobs(config.engine, config.trainer)
    recompute = source == "recompute"
    exact = rollout_logprobs_are_trainers(config.engine, config.trainer)
    reference = reference_pass(iteration, recompute, exact)
    logprobs = fetch_logprobs(run, iteration, actions, recompute_old=recompute, reference=reference)
    mismatch = logprob_mismatch(actions, logprobs["old"]) if source == "recompute" else None
    experiences = experiences_to_frame(
        compute_experiences(actions, scores, logprobs["old"], logprobs["ref"], config.algo)
    )
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
        unscored=unscored_by_agent(scores, trainable),
    )


def unscored_by_agent(scores: list[ActionScore], agents: list[str]) -> dict[str, int]:
    """How many of each trainable agent's actions the coach left unscored (masked out of the gradient)."""
    masked = Counter(score.agent for score in scores if score.parse_status == UNSCORED)
    return {agent: masked[agent] for agent in agents}


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
