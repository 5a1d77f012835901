"""The deployments users drive from the Prefect UI: `mappa-train` and `mappa-evaluate`.

Two ways to run them:
- `mappa serve` (here): one long-lived process on this machine registers both deployments with the
  Prefect server at PREFECT_API_URL and runs their flow runs itself; no work pool or worker needed.
- `deployments/prefect.yaml`: the same two deployments on a `process` work pool, for `prefect deploy`
  and `prefect worker start` (flow runs then execute wherever the pool's workers run).

Either way the UI's "Run" (custom parameters: config path, overrides, run id, iterations), "Retry" of a
failed run, and schedules all go through the same flows, and finished stages are never redone.

Not covered: creating the work pool or the server (docs/prefect-ui.md).
"""

from __future__ import annotations

from prefect import serve

from mappa.flows.evaluate import evaluate
from mappa.flows.train import train

TRAIN_DEFAULTS = {
    "config_path": "configs/mathchat-cpu.yaml",
    "overrides": [],
    "run_id": None,
    "iterations": None,
}


def serve_deployments(cron: str | None = None, limit: int | None = None) -> None:
    """Serve `mappa-train/mappa-train` and `mappa-evaluate/mappa-evaluate` until interrupted.

    `cron` schedules training (e.g. "0 2 * * *": a run every night at 02:00 UTC, continuing the
    run id given in its parameters); `limit` caps concurrent flow runs (default: unlimited).
    """
    train_deployment = train.to_deployment(
        name="mappa-train",
        parameters=TRAIN_DEFAULTS,
        cron=cron,
        description="Train a multi-agent run: rollout -> score -> advantages -> update per iteration.",
        tags=["mappa"],
    )
    evaluate_deployment = evaluate.to_deployment(
        name="mappa-evaluate",
        description="Evaluate a run's checkpoint on held-out problems (greedy).",
        tags=["mappa"],
    )
    serve(train_deployment, evaluate_deployment, limit=limit)
