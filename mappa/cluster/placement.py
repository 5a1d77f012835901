"""Where a run's workers go on a Ray cluster: the Ray resources each asks for (`cluster.placement`), and the
check, before any worker is asked for, that the cluster's alive nodes can give them (what each worker asks
for: `ClusterConfig.resources_of`).

Ray leaves an actor that no node can host pending for ever; mappa refuses it at once instead, naming the
seat, what it asks for and what each node offers. Not covered: GPU and CPU amounts (`cluster.num_gpus`,
fixed per worker), autoscaling clusters (a node the autoscaler could add counts as missing).
"""

from __future__ import annotations

from typing import Any

import ray

from mappa.config import RunConfig


class PlacementError(RuntimeError):
    """No alive node of the cluster has what a worker's placement asks for."""


def offered_resources(node: dict[str, Any]) -> dict[str, float]:
    """A node's own resources, without Ray's per-node `node:<ip>` markers and memory figures."""
    return {
        key: value
        for key, value in node["Resources"].items()
        if not key.startswith("node:") and key not in ("memory", "object_store_memory")
    }


def check_placement(config: RunConfig, names: list[str], ranks: dict[str, int] | None = None) -> None:
    """Raise PlacementError unless every worker in `names` (with `ranks[name]` actors each) fits on an
    alive node, and together they fit the cluster's totals."""
    wanted = {name: config.cluster.resources_of(name) for name in names}
    if not any(wanted.values()):
        return
    alive = [node for node in ray.nodes() if node["Alive"]]  # (two nodes may share an address)
    offers = [offered_resources(node) for node in alive]
    described = (f"{n['NodeManagerAddress']} {r}" for n, r in zip(alive, offers, strict=True))
    offered = ", ".join(described) or "none"
    fix = (
        "start a node that has it (ray start --address <head> --resources '{\"<name>\": <amount>}') or "
        "change cluster.placement (an execution setting: `mappa resume RUN --set "
        "cluster.placement.<seat>={}` keeps the run's finished stages)"
    )
    totals: dict[str, float] = {}
    for name, resources in wanted.items():
        if not resources:
            continue
        if not any(all(node.get(k, 0) >= v for k, v in resources.items()) for node in offers):
            raise PlacementError(
                f"{name}'s worker asks for {resources} (cluster.placement), which no alive node of the Ray "
                f"cluster has (alive nodes: {offered}); {fix}"
            )
        for key, amount in resources.items():
            totals[key] = totals.get(key, 0) + amount * (ranks or {}).get(name, 1)
    for key, amount in totals.items():
        have = sum(node.get(key, 0) for node in offers)
        if amount > have:
            askers = sorted(name for name, resources in wanted.items() if key in resources)
            raise PlacementError(
                f"{', '.join(askers)} together ask for {amount:g} {key} (cluster.placement), but the alive "
                f"nodes have {have:g} (alive nodes: {offered}); {fix}"
            )
