"""The update stage: experiences.parquet -> new weights per agent, a checkpoint each, and metrics.json.

Each trainable agent's worker runs its REINFORCE++ update on that agent's experiences only (its own
weights), serves the new weights, and saves a checkpoint. Agents are updated one after another: on a
small machine they share the cores. An agent whose checkpoint and metrics for this iteration already exist
is not trained again (an interrupted stage resumes with the agents it had not finished). Before an agent
trains, the storage root must have room for its checkpoint (`mappa.resources`): a full disk fails the
stage before anything is written, with the finished agents kept. An agent whose advantages are all
exactly zero has no gradient and is not trained (`skipped` in its metrics); it is still checkpointed.
Actions whose advantages are all zero (those the coach left unscored) are left out of the batch.
Skipped when its manifest matches.
"""

from __future__ import annotations

import time
from typing import Any

import ray

from mappa.cluster.handles import WorkerHandle
from mappa.cluster.ray_cluster import agent_workers
from mappa.core.types import Experience, TrainSample
from mappa.reporting.progress import StageProgress
from mappa.resources import agent_sizes, check_disk_for_checkpoint, state_bytes
from mappa.stages.stage import Stage, output_parts, register, write_manifest
from mappa.storage.checkpoints import TRAINER_STATE
from mappa.storage.frames import frame_to_experiences
from mappa.storage.run import OUTPUTS, Run


def agent_result_parts(run: Run, iteration: int, agent: str) -> tuple[str, ...]:
    """Where a trained agent's metrics are kept until the stage finishes (a resumed update skips it)."""
    return run.parts(iteration, "update", f"agents/{agent}.json")


def update_agent(
    run: Run, iteration: int, agent: str, worker: WorkerHandle, experiences: list[Experience]
) -> dict[str, Any]:
    """Train one agent on its experiences and checkpoint it; reuses a finished agent's result."""
    done = agent_result_parts(run, iteration, agent)
    if run.store.exists(*done):
        metrics = run.store.read_json(*done)
        ray.get(
            worker.load_checkpoint.remote(
                run.config.storage.root, list(run.checkpoint_parts(agent, iteration))
            )
        )
        return metrics
    check_disk_for_checkpoint(run.config, agent, checkpoint_bytes(run, agent, iteration))
    rows = [e for e in experiences if e.agent == agent]
    samples = training_samples(rows)
    if not samples:
        metrics = no_gradient_metrics(len(rows))  # nothing to learn: no forward, backward or step
    else:
        try:
            metrics = ray.get(worker.train.remote(samples, run.config.seed * 7919 + iteration))
        except ray.exceptions.OutOfMemoryError as exc:
            raise MemoryError(out_of_memory_hint(run, agent, rows)) from exc
    position = {"problems_drawn": (iteration + 1) * run.config.rollout.problems_per_iteration}
    parts = list(run.checkpoint_parts(agent, iteration))
    ray.get(worker.save_checkpoint.remote(run.config.storage.root, parts, iteration, position))
    kl_tokens = [x for e in rows for x in e.kl]
    metrics.update(
        kl=float(sum(kl_tokens) / max(len(kl_tokens), 1)),
        mean_score=float(sum(e.score for e in rows) / len(rows)) if rows else 0.0,
        actions=len(rows),
        checkpoint=run.store.url(*run.checkpoint_parts(agent, iteration)),
    )
    run.store.write_json(metrics, *done)
    run.record_event(iteration, "update", "agent-finished", agent=agent)
    return metrics


def training_samples(rows: list[Experience]) -> list[TrainSample]:
    """What the trainer gets: the experiences with some non-zero advantage. A row whose advantages are all
    exactly zero (an action the coach left unscored) adds no gradient, and would only dilute the loss's
    token mean, so it is left out."""
    return [e.train_sample() for e in rows if any(a != 0.0 for a in e.advantages)]


def checkpoint_bytes(run: Run, agent: str, iteration: int) -> float:
    """What `agent`'s checkpoint of `iteration` will take: its previous one's size, else an estimate."""
    if iteration > 0 and run.store.exists(*run.checkpoint_parts(agent, iteration - 1), TRAINER_STATE):
        return run.store.size(*run.checkpoint_parts(agent, iteration - 1))
    size = next((s for s in agent_sizes(run.config) if s.name == agent), None)
    return state_bytes(size, run.config.trainer.type == "deepspeed") if size else 0.0


def no_gradient_metrics(actions: int) -> dict[str, Any]:
    """The metrics of an update skipped because every advantage was exactly zero (e.g. outcome-only reward
    with no success in the batch, and no KL yet): the loss and its gradient are zero, so the weights and
    the optimizer state stay as they are (an optimizer step would only have replayed Adam's momentum)."""
    zero = {"loss": 0.0, "clip_fraction": 0.0, "grad_norm": 0.0, "approx_kl": 0.0}
    return {
        **zero,
        "tokens": 0,
        "tokens_per_s": 0.0,
        "steps": 0,
        "seconds": 0.0,
        "skipped": "zero advantages",
    }


def out_of_memory_hint(run: Run, agent: str, rows: list[Experience]) -> str:
    """What to do when an agent's update ran the machine out of memory (Ray killed its worker)."""
    longest = max((len(e.prompt_token_ids) + len(e.response_token_ids) for e in rows), default=0)
    micro = run.config.trainer.micro_batch_size
    return (
        f"the update of agent `{agent}` ran the machine out of memory (micro-batches of {micro} sequences, "
        f"the longest {longest} tokens). `mappa resume {run.run_id}` keeps the agents already trained and "
        f"restarts the workers, which frees what idle workers held; if it fails again, start a new run with "
        f"a smaller trainer.micro_batch_size or shorter prompts (rollout.max_new_tokens or a seat's own, "
        f"the env's turns)"
    )


def update_agents(run: Run, iteration: int) -> dict[str, Any]:
    """Train every trainable agent on iteration `iteration`'s experiences; metrics.json and the manifest."""
    started = time.perf_counter()
    experiences = frame_to_experiences(run.store.read_parquet(*output_parts(run, iteration, "advantages")))
    trainable = [agent for agent, config in run.config.agents.items() if config.trainable]
    first = next((a for a in trainable if not run.store.exists(*agent_result_parts(run, iteration, a))), None)
    if first:  # a full disk is named before any worker loads a model (minutes on a large model), not after
        check_disk_for_checkpoint(run.config, first, checkpoint_bytes(run, first, iteration))
    workers = agent_workers(run, iteration, purpose=f"the update of iteration {iteration}")
    metrics = {}
    progress = StageProgress("update", iteration, len(trainable), "agents trained")
    for agent in trainable:
        metrics[agent] = update_agent(run, iteration, agent, workers[agent], experiences)
        progress.advance()
    run.store.write_json(metrics, *output_parts(run, iteration, "update"))
    return write_manifest(
        run,
        iteration,
        "update",
        rows=len(metrics),
        timings={"total_s": time.perf_counter() - started},
        agents=metrics,
    )


def describe(manifest: dict[str, Any]) -> str:
    agents = manifest.get("agents", {}).items()
    return ", ".join(f"{a}: loss {m['loss']:.4f} score {m['mean_score']:.2f}" for a, m in agents)


STAGE = register(Stage("update", OUTPUTS["update"], update_agents, describe, inputs=("advantages",)))
