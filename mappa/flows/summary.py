"""What a run did, read back from its manifests: the closing summary of the train flow and the CLI."""

from __future__ import annotations

from typing import Any

from mappa.stages import TRAINING, stage_complete
from mappa.storage.run import Run


def run_summary(run: Run) -> dict[str, Any]:
    """Per iteration: success rate and stage times; per agent and iteration: score, KL, loss."""
    iterations, agents = [], {}
    for iteration in range(run.config.iterations):
        if not stage_complete(run, iteration, "update"):
            break
        rollout = run.read_manifest(iteration, "rollout")
        times = {s: run.read_manifest(iteration, s)["timings"]["total_s"] for s in TRAINING}
        iterations.append({"iteration": iteration, "success_rate": rollout["success_rate"], "seconds": times})
        for agent, m in run.read_manifest(iteration, "update").get("agents", {}).items():
            agents.setdefault(agent, []).append(
                {
                    "iteration": iteration,
                    "mean_score": m["mean_score"],
                    "kl": m["kl"],
                    "loss": m["loss"],
                    "grad_norm": m["grad_norm"],
                }
            )
    return {
        "run_id": run.run_id,
        "url": run.store.url(run.run_id),
        "iterations": iterations,
        "agents": agents,
    }
