"""The rollout stage: an iteration's problems -> trajectories.parquet, with every agent on its own worker.

Problems are drawn from the training set by a seeded permutation, `problems_per_iteration` at a time, so
iteration k always sees the same problems (a resumed run rolls out what the uninterrupted one would
have). Each problem is rolled out `samples_per_problem` times. Skipped when its manifest matches.
`roll_out` (the env over given problems with a given iteration's weights) also serves the evaluate stage.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from typing import Any

from mappa.agents.agent import Agent, Chat
from mappa.cluster.handles import WorkerHandle
from mappa.cluster.rank_group import split_evenly
from mappa.cluster.ray_cluster import agent_workers
from mappa.core.types import Problem, Trajectory
from mappa.envs.outcome_summary import summarize_by_kind
from mappa.envs.spec import EnvSpec
from mappa.inference.engine import Generation, SamplingParams
from mappa.reporting.progress import StageProgress
from mappa.sandbox import SandboxLimits
from mappa.stages.stage import Stage, output_parts, register, write_manifest
from mappa.storage.checkpoints import Holds
from mappa.storage.frames import trajectories_to_frame
from mappa.storage.run import OUTPUTS, Run, iteration_name


def select_problems(problems: list[Problem], count: int, seed: int, iteration: int) -> list[Problem]:
    """The `count` problems of iteration `iteration`: consecutive slices of per-epoch seeded shuffles."""
    if not problems:
        raise ValueError("the training data set holds no problems")
    chosen: list[Problem] = []
    position = iteration * count
    while len(chosen) < count:
        epoch, offset = divmod(position, len(problems))
        order = list(range(len(problems)))
        random.Random(seed * 100_003 + epoch).shuffle(order)
        take = min(count - len(chosen), len(problems) - offset)
        chosen.extend(problems[i] for i in order[offset : offset + take])
        position += take
    return chosen


def remote_chat(worker: WorkerHandle):
    """An `Agent.chat` function that asks a Ray worker."""

    async def chat(chats: list[Chat], params: SamplingParams) -> list[tuple[str, Generation, float]]:
        answers = await worker.chat.remote(chats, params.to_fields())
        return [(prompt, Generation.from_fields(gen), s) for prompt, gen, s in answers]

    return chat


def seat_params(run: Run, spec: EnvSpec, name: str, params: SamplingParams) -> SamplingParams:
    """`params` for seat `name`: with the env's stop strings for the seat (`EnvSpec.stops`) and the seat's
    own token limit (`agents.NAME.max_new_tokens`) where it sets one."""
    limit = run.config.agents[name].max_new_tokens or params.max_new_tokens
    return dataclasses.replace(params, stop=params.stop + spec.stops.get(name, ()), max_new_tokens=limit)


def build_agents(run: Run, workers: dict[str, Any], params: SamplingParams) -> dict[str, Agent]:
    """One agent per seat, each with its seat's sampling settings (`seat_params`)."""
    spec = run.config.env_spec
    return {
        name: Agent(name, spec.roles[name], remote_chat(workers[name]), seat_params(run, spec, name, params))
        for name in spec.seats
    }


def sandbox_limits(run: Run) -> SandboxLimits:
    box = run.config.sandbox
    return SandboxLimits(
        timeout_s=box.timeout_s,
        memory_mb=box.memory_mb,
        cpu_s=box.cpu_s,
        max_output_chars=box.max_output_chars,
        isolation=box.isolation,
    )


def roll_out(
    run: Run,
    problems: list[tuple[str, Problem]],
    iteration: int,
    params: SamplingParams,
    progress: StageProgress | None = None,
    need: Holds = "full",
    purpose: str | None = None,
) -> list[Trajectory]:
    """Run the env over (trajectory id, problem) pairs with the weights iteration `iteration` rolls out
    with; `progress` (default: this rollout's) counts the finished trajectories. `need` and `purpose`: what
    of the checkpoint the workers load, and who asks (`agent_workers`)."""
    workers = agent_workers(run, iteration, need, purpose or f"the rollout of iteration {iteration}")
    agents = build_agents(run, workers, params)
    spec = run.config.env_spec

    progress = progress or StageProgress("rollout", iteration, len(problems), "trajectories")

    async def run_batch(batch: list[tuple[str, Problem]]):
        trajectories = await spec.run(batch, agents, sandbox_limits(run), run.config.env)
        progress.advance(len(batch))
        return trajectories

    return asyncio.run(run_batches(run_batch, problems, run.config.rollout.concurrent_batches))


async def run_batches(run_batch, problems: list, batches: int) -> list[Trajectory]:
    """`run_batch` over `batches` contiguous slices of `problems` at once; trajectories in problem order.
    Each batch walks the env's chain by itself, so different agents serve different batches at a time."""
    slices = [part for part in split_evenly(problems, batches) if part]
    results = await asyncio.gather(*(run_batch(part) for part in slices))
    return [trajectory for result in results for trajectory in result]


def roll_out_iteration(run: Run, iteration: int) -> dict[str, Any]:
    """Roll out iteration `iteration`'s training problems; write trajectories.parquet and the manifest."""
    started = time.perf_counter()
    config = run.config
    train = config.env_spec.load_problems(config.env.train_data)
    chosen = select_problems(train, config.rollout.problems_per_iteration, config.seed, iteration)
    pairs = [
        (f"{iteration_name(iteration)}-{p.id}-s{s}", p)
        for p in chosen
        for s in range(config.rollout.samples_per_problem)
    ]
    params = SamplingParams(
        temperature=config.rollout.temperature,
        top_p=config.rollout.top_p,
        max_new_tokens=config.rollout.max_new_tokens,
        seed=config.seed * 1_000 + iteration,
    )
    trajectories = roll_out(run, pairs, iteration, params)
    frame = trajectories_to_frame(trajectories, iteration)
    run.store.write_parquet(frame, *output_parts(run, iteration, "rollout"))
    tokens = int(frame["response_token_ids"].map(len).sum())
    seconds = time.perf_counter() - started
    success = float(sum(t.correct for t in trajectories) / len(trajectories))
    return write_manifest(
        run,
        iteration,
        "rollout",
        rows=len(frame),
        timings={"total_s": seconds},
        trajectories=len(trajectories),
        sandbox_isolation="none" if config.sandbox.isolation == "none" else "bwrap",
        success_rate=success,
        by_kind=summarize_by_kind(trajectories),
        generated_tokens=tokens,
        tokens_per_s=tokens / max(seconds, 1e-9),
    )


def describe(manifest: dict[str, Any]) -> str:
    return (
        f"{manifest['trajectories']} trajectories, {manifest['rows']} actions, "
        f"success {manifest['success_rate']:.0%}, {manifest['tokens_per_s']:.0f} tokens/s"
    )


STAGE = register(
    Stage(
        "rollout",
        OUTPUTS["rollout"],
        roll_out_iteration,
        describe,
        previous=("update",),  # the weights it rolls out with
    )
)
