"""The `coach-check` flow: does each coach blame the agent that caused a failure? (`mappa coach-check`)

A readable sequence: the blame check of one iteration's stored trajectories (`mappa.blame.check`:
corrupt, replay, score with each coach, compare), the run's Ray workers freed, and the table published as
a Prefect artifact beside the run's others. The report itself is stored under the run
(`RUN/coach-check/iter-K/report.json`).
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.artifacts import create_table_artifact

from mappa.blame.check import check_blame
from mappa.cluster.ray_cluster import HOST, release_workers
from mappa.stages.report import artifact_key, create_artifact
from mappa.storage.run import Run


@flow(name="mappa-coach-check", flow_run_name="{run_id}-coach-check", log_prints=True)
def coach_check(
    run_id: str,
    root: str,
    iteration: int,
    coaches: dict[str, list[str]],
    seats: list[str],
    problems: int,
    evaluated: bool = False,
    team: str = "policy",
) -> dict[str, Any]:
    """Blame-check iteration `iteration` of run `run_id` with `coaches` ({name: coach.* overrides}) on the
    last actions of `seats` in `problems` trajectories; returns the report.

    Args:
        run_id: The run.
        root: Its storage root.
        iteration: Whose stored rollout to corrupt and replay (its weights replay the downstream agents).
        coaches: Each coach's name and its `coach.*` overrides of the run's config ([]: the run's own).
        seats: The seats whose last action is corrupted.
        problems: How many trajectories (one per problem).
        evaluated: Check the held-out evaluation of checkpoint `iteration` (-1: the base team) instead of
            the iteration's rollout.
        team: "policy" (the run's trajectories, later seats replayed by its weights) or "reference"
            (the env's reference team on the first held-out problems: `EnvSpec.reference_team`).
    """
    run = Run.open(root, run_id)
    try:
        report = check_blame(run, iteration, coaches, seats, problems, evaluated, team)
    finally:
        release_workers(run_id, [*run.config.agents, HOST, *(f"coach-check-{name}" for name in coaches)])
    rows = [{k: v for k, v in row.items() if k != "corruptions"} for row in report["rows"]]
    describe = f"run {run_id}, {report['folder']}: blame accuracy per coach and corrupted seat"
    key = artifact_key(run_id, "coach-check")
    report["artifact"] = create_artifact(
        key, lambda k: create_table_artifact(rows, key=k, description=describe)
    )
    return report
