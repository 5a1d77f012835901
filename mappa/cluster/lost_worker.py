"""What a stage says when one of its Ray workers died: which agent, on which node, and whether that node is
gone, instead of Ray's own paragraph about a dead actor.

`worker_lost_error(exc)` turns Ray's actor errors (`RayActorError`: a worker process killed, its node
lost, its start failed: then with the error its `__init__` raised) into a `WorkerLostError` naming the
seat, the node's address and resources, and what `mappa resume` will do; any other error gives None.
It reads the dead actor and the nodes from Ray's control store (GCS), which stays reachable while the
head node lives. Not covered: the head node itself dying (the driver loses Ray altogether; the run
continues with `mappa resume` once a head is back).
"""

from __future__ import annotations

import time
from typing import Any

import ray
from ray.exceptions import RayActorError

from mappa.cluster.placement import offered_resources
from mappa.cluster.seat_host import HOST
from mappa.config import RunConfig

WORKER_PREFIX = "mappa-"
SETTLE_TRIES, SETTLE_WAIT_S = 20, 0.5


class WorkerLostError(RuntimeError):
    """A run's Ray worker died during a stage."""


def _actor(actor_id: str | None) -> dict[str, Any]:
    if not actor_id:
        return {}
    try:
        from ray._private.state import state  # the GCS's actor table, as `ray list actors` reads it

        return state.actor_table(actor_id) or {}
    except Exception:  # noqa: BLE001 - a private API; the message falls back to Ray's own
        return {}


def _seat(actor_name: str) -> tuple[str, str | None]:
    """`mappa-<run id>-<seat>` (or `...-<seat>-rank<k>`) -> (the seat, the rank or None), as far as the
    name tells."""
    tail = actor_name.rsplit("-", 2)
    if len(tail) == 3 and tail[2].startswith("rank"):
        return tail[1], tail[2].removeprefix("rank")
    return actor_name.rsplit("-", 1)[-1], None


def _actor_error_in(exc: BaseException | None, depth: int = 0) -> RayActorError | None:
    """The Ray actor error `exc` is, wraps (an exception group of the rollout's tasks) or was raised from."""
    if exc is None or depth > 8:
        return None
    if isinstance(exc, RayActorError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if found := _actor_error_in(inner, depth + 1):
                return found
    return _actor_error_in(exc.__cause__ or exc.__context__, depth + 1)


def start_failure(exc: RayActorError) -> str | None:
    """The error an actor's `__init__` raised (its last line: `OSError: [Errno 98] ...`), or None if it
    died after starting."""
    text = str(exc)
    if "error raised in its creation task" not in text:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if len(lines) > 1 else None


def worker_lost_error(exc: BaseException, config: RunConfig | None = None) -> WorkerLostError | None:
    """A `WorkerLostError` describing the dead worker behind `exc`, or None if `exc` is not one; with the
    run's `config`, the placement that put the worker there (a dead node reports no resources)."""
    exc = _actor_error_in(exc)
    if exc is None or not ray.is_initialized():
        return None
    actor_id = getattr(exc, "actor_id", None)
    actor = _actor(actor_id)
    name = actor.get("Name") or ""
    if not name.startswith(WORKER_PREFIX):
        return None
    seat, rank = _seat(name)
    for _ in range(SETTLE_TRIES):  # the caller can hear of a broken worker before the GCS has it dead
        if actor.get("State") == "DEAD":
            break
        time.sleep(SETTLE_WAIT_S)
        actor = _actor(actor_id) or actor
    node_id = (actor.get("Address") or {}).get("NodeID")
    node = next((n for n in ray.nodes() if n["NodeID"] == node_id), None)
    if node is None:
        where, cause = "an unknown node", "its node is not in the cluster any more"
    else:
        offered = offered_resources(node)
        placed_as = next(iter(config.agents)) if config and seat == HOST else seat  # hosted: one placement
        asked = config.cluster.resources_of(placed_as) if config else {}
        placed = f", resources {offered}" if offered else ""
        placed += f", placed there by cluster.placement: {asked}" if asked else ""
        where = f"node {node['NodeManagerAddress']} ({node_id[:12]}{placed})"
        gone = "NODE_DIED" in str(actor.get("DeathCause", "")) or not node["Alive"]
        cause = "that node is gone" if gone else "that node is alive: the worker process died"
    if failed_start := start_failure(exc):
        cause = f"its start failed: {failed_start}"
    if seat == HOST:  # every agent's worker in one process (`mappa.cluster.seat_host`)
        agents = ", ".join(config.agents) if config else "every agent"
        whose = f"the worker shared by agents {agents}"
    else:
        whose = f"the worker of agent {seat} (rank {rank})" if rank else f"the worker of agent {seat}"
    return WorkerLostError(
        f"{whose} ({name}) died on {where}: {cause}. Finished stages are kept; "
        "`mappa resume` starts a new worker on a node that cluster.placement allows (change it with --set "
        "cluster.placement.<seat>=... if that node is not coming back)"
    )
