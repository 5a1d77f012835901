"""All of a run's agent workers in one process, where they can share one: a CPU machine's usual case.

Each agent worker (`ModelWorker`) in an actor of its own costs a process that imports torch and transformers
(about 5 s of CPU and a few hundred MB before any weights load). On a node without GPUs, where the stages
call the agents one at a time anyway, `SeatHost` holds every seat's `ModelWorker` in one actor, and
`HostedSeat` is a seat's handle used exactly like a worker's own actor handle: `seat.train.remote(...)`
becomes `host.call.remote("solver", "train", ...)`. The host runs one call at a time, in the order they
were made, as a worker's own actor does.

`colocated(config)` says when a run's agents share a host: `cluster.colocate_seats` (on by default), no
GPUs, one rank per agent, the plain torch trainer, the HF engine, one rollout batch at a time
(`rollout.concurrent_batches: 1`: the agents never work at once) and the same `cluster.placement` for every
seat. Otherwise every agent keeps its own actor (`mappa.cluster.ray_cluster`).

Imports no Ray (the pre-flight's memory estimate asks `colocated` before Ray starts).

Not covered: a local coach (`coach.type: local`) keeps its own worker, released between score stages.
"""

from __future__ import annotations

from typing import Any

from mappa.config import RunConfig

HOST = "seats"  # the host actor is `mappa-<run id>-seats`


def colocated(config: RunConfig) -> bool:
    """Whether the run's agent workers share one `SeatHost` (see the module's docstring)."""
    cluster = config.cluster
    placements = {tuple(sorted(cluster.resources_of(seat).items())) for seat in config.agents}
    return (
        cluster.colocate_seats
        and not cluster.num_gpus
        and cluster.trainer_ranks == 1
        and config.trainer.type == "torch"
        and config.engine.type == "hf"
        and config.rollout.concurrent_batches == 1
        and len(placements) <= 1
    )


class SeatHost:
    """A Ray actor holding several seats' `ModelWorker`s; `call` runs one seat's method."""

    def __init__(self) -> None:
        self.seats: dict[str, Any] = {}

    def add(self, seat: str, *worker_args: Any) -> None:
        """Load the seat's worker unless it is here already (a later stage finds the loaded one)."""
        from mappa.cluster.model_worker import ModelWorker

        if seat not in self.seats:
            self.seats[seat] = ModelWorker(seat, *worker_args)

    def call(self, seat: str, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.seats[seat], method)(*args, **kwargs)


class HostedSeat:
    """A seat's handle on its host: `seat.<method>.remote(*a)` is `host.call.remote(seat, method, *a)`."""

    def __init__(self, host: Any, seat: str) -> None:
        self.host, self.seat = host, seat

    def __getattr__(self, method: str) -> _SeatMethod:
        if method.startswith("_"):
            raise AttributeError(method)
        return _SeatMethod(self.host, self.seat, method)


class _SeatMethod:
    def __init__(self, host: Any, seat: str, method: str) -> None:
        self.host, self.seat, self.method = host, seat, method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.host.call.remote(self.seat, self.method, *args, **kwargs)
