"""What a run did, read back from its manifests: one progress line per stage and the closing summary."""

from __future__ import annotations

from typing import Any

from mappa.storage.run import Run


def describe_stage(stage: str, iteration: int, manifest: dict[str, Any]) -> str:
    seconds = manifest.get("timings", {}).get("total_s", 0.0)
    head = f"iter {iteration} {stage:<10}" + (
        " skipped (already complete)" if manifest.get("skipped") else ""
    )
    if stage == "rollout":
        detail = (
            f"{manifest['trajectories']} trajectories, {manifest['rows']} actions, "
            f"success {manifest['success_rate']:.0%}, {manifest['tokens_per_s']:.0f} tokens/s"
        )
    elif stage == "score":
        coach, parse = manifest["coach_model"], manifest["parse_status"]
        detail = f"{manifest['rows']} actions scored by {coach}, parse {parse}"
    elif stage == "advantages":
        kl = ", ".join(f"{a} {v:.4f}" for a, v in manifest.get("mean_kl", {}).items())
        detail = f"{manifest['rows']} experiences, KL {kl}"
    elif stage == "evaluate":
        detail = (
            f"{manifest['label']}: {manifest['correct']}/{manifest['problems']} held-out problems correct "
            f"({manifest['success_rate']:.0%})"
        )
    else:
        detail = ", ".join(
            f"{a}: loss {m['loss']:.4f} score {m['mean_score']:.2f}"
            for a, m in manifest.get("agents", {}).items()
        )
    return f"{head} {detail} ({seconds:.1f} s)"


def run_summary(run: Run) -> dict[str, Any]:
    """Per iteration: success rate and stage times; per agent and iteration: score, KL, loss."""
    iterations, agents = [], {}
    for iteration in range(run.config.iterations):
        if not run.stage_complete(iteration, "update"):
            break
        rollout = run.read_manifest(iteration, "rollout")
        times = {
            s: run.read_manifest(iteration, s)["timings"]["total_s"]
            for s in ("rollout", "score", "advantages", "update")
        }
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
