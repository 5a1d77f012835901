"""Replays with the run's own agents: trajectories again, one action forced, later actions generated anew.

`run_replays(run, weights, plans)` runs every plan (`id`, `trajectory`, `index`, forced `text`) through
`mappa.envs.replay.replay`, concurrently, the later seats greedy with the weights iteration `weights` rolls
out with; their calls are gathered into one batch per seat (`coalescing_agents`). The blame check
(`mappa.blame.check`) and the learning coach's update (`mappa.stages.coach_update`) replay this way.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mappa.cluster.ray_cluster import agent_workers
from mappa.core.types import Trajectory
from mappa.envs.replay import coalescing_agents, replay
from mappa.inference.engine import SamplingParams
from mappa.stages.rollout import build_agents, sandbox_limits
from mappa.storage.run import Run


def run_replays(run: Run, weights: int, plans: list[dict[str, Any]]) -> list[Trajectory]:
    """Every planned replay, concurrently, downstream agents greedy with the weights iteration `weights`
    rolls out with."""
    spec = run.config.env_spec
    purpose = f"replays (the weights of iteration {weights}'s rollout)"
    workers = agent_workers(run, weights, "weights", purpose)
    params = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=run.config.rollout.max_new_tokens)
    agents = coalescing_agents(build_agents(run, workers, params))
    limits = sandbox_limits(run)

    async def all_replays() -> list[Trajectory]:
        return await asyncio.gather(
            *(
                replay(spec, p["trajectory"], p["index"], p["text"], agents, limits, run.config.env, p["id"])
                for p in plans
            )
        )

    return asyncio.run(all_replays())
