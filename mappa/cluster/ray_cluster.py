"""Ray: start a local cluster or join one, and hold one named, long-lived worker per agent (and coach).

Workers are named `mappa-<run id>-<agent>`, detached and fetched with `get_if_exists`, so every Prefect task
of a run talks to the same actors instead of reloading models (a non-detached actor dies with its last
handle, i.e. at the end of every stage); `release_workers` ends them, and so does a local cluster's
shutdown. When a worker is (re)created for an iteration after the first (a resumed run, a lost node) it
loads the agent's last checkpoint before it serves.

A local cluster is started when neither `cluster.address` nor RAY_ADDRESS names one; workers then ask for
no CPUs of their own, since the stages call them one at a time and they share the machine's cores. Each
worker asks for `cluster.num_gpus` GPUs. A trainable agent with `cluster.trainer_ranks` > 1 is a group of
rank workers in a placement group (`mappa.cluster.rank_group`), used exactly like one worker; with vLLM its
first `engine.num_engines` ranks each hold an engine and share every generation call. With `engine.shared`
(one small machine) all agents generate on one vLLM engine actor (`mappa.cluster.shared_engine`).
`cluster.placement` puts a seat's workers on the nodes that have the Ray resources it names
(`mappa.cluster.placement`, checked before any worker starts). On a CPU machine the agents' workers share
one actor, `mappa-<run id>-seats`, where they can (`mappa.cluster.seat_host`). Nothing else differs
between a laptop and a cluster. A head that goes away ends the run in one line (`mappa.cluster.head_watch`).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import ray

from mappa.cluster.handles import WorkerHandle
from mappa.cluster.head_watch import watch_head
from mappa.cluster.model_worker import ModelWorker
from mappa.cluster.placement import check_placement
from mappa.cluster.rank_group import CPU_SHARE, RankGroup, in_bundle, process_group_env, rank_placement
from mappa.cluster.seat_host import HOST, HostedSeat, SeatHost, colocated
from mappa.cluster.shared_engine import SHARED_ENGINE, shared_engine
from mappa.config import RunConfig
from mappa.storage.checkpoints import Holds, require_checkpoint
from mappa.storage.run import Run

COACH = "coach"
NAMESPACE = "mappa"  # detached workers are found again by name only within one namespace


def ensure_ray(config: RunConfig) -> None:
    """Connect to the configured cluster (`cluster.address`, RAY_ADDRESS), or start a local one of this
    process's own (idempotent); a second `mappa train` on the machine never joins the first one's Ray."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    address = config.cluster.address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, namespace=NAMESPACE, ignore_reinit_error=True, log_to_driver=False)
        return
    ray.init(
        address="local",  # its own: Ray's default joins the latest cluster `ray start` left on the machine
        num_cpus=config.cluster.num_cpus or os.cpu_count(),
        include_dashboard=False,
        namespace=NAMESPACE,
        ignore_reinit_error=True,
        log_to_driver=False,
        _temp_dir=os.environ.get("MAPPA_RAY_TMP", os.path.join(tempfile.gettempdir(), "mappa-ray")),
    )


def _worker_args(
    config: RunConfig, model: str, trainable: bool, lora: dict | None, engine: str | None
) -> tuple:
    """`ModelWorker`'s arguments after the seat's name."""
    return (
        model,
        trainable,
        config.trainer.model_dump(),
        config.algo.model_dump(),
        {**config.engine.model_dump(), **({"type": engine} if engine else {})},
        config.seed,
        config.cluster.torch_threads,
        lora,
    )


def _worker(
    run: Run, name: str, model: str, trainable: bool, lora: dict | None = None, engine: str | None = None
) -> WorkerHandle:
    """The agent's worker: one actor, or for a trainable agent with `cluster.trainer_ranks` > 1 a
    `RankGroup` of actors `mappa-<run>-<agent>-rank<k>` in the agent's placement group."""
    config = run.config
    ranks = config.cluster.trainer_ranks if trainable else 1
    vllm = (engine or config.engine.type) == "vllm"
    engines = config.engine.num_engines if vllm else 0
    args = (name, *_worker_args(config, model, trainable, lora, engine))
    options = dict(
        get_if_exists=True, lifetime="detached", max_concurrency=1, num_gpus=config.cluster.num_gpus
    )
    resources = config.cluster.resources_of(name)
    if ranks == 1:
        shared = None
        if config.engine.shared and vllm:
            cluster = config.cluster
            settings = config.engine.model_dump()
            shared = shared_engine(
                run.run_id, model, settings, config.seed, cluster.num_gpus, cluster.torch_threads
            )
        actor = ray.remote(ModelWorker).options(
            name=f"mappa-{run.run_id}-{name}", num_cpus=0, resources=resources or None, **options
        )
        return actor.remote(*args, None, shared)
    actor_name = f"mappa-{run.run_id}-{name}-rank"
    alive = [_named(f"{actor_name}{k}") for k in range(ranks)]
    if all(alive):
        return RankGroup(alive, engines)
    for survivor in filter(None, alive):  # a group that lost a rank cannot take a new one: start afresh
        ray.kill(survivor)
    group = rank_placement(f"mappa-{run.run_id}-{name}", ranks, config.cluster.num_gpus, resources)
    envs = process_group_env(group, ranks)
    actors = []
    for rank, env in enumerate(envs):
        remote = ray.remote(ModelWorker).options(
            name=f"{actor_name}{rank}",
            num_cpus=CPU_SHARE,
            scheduling_strategy=in_bundle(group, rank),
            **options,
        )
        actors.append(remote.remote(*args, env))
    return RankGroup(actors, engines)


def _named(actor_name: str) -> Any:
    try:
        return ray.get_actor(actor_name)
    except ValueError:
        return None


def agent_workers(
    run: Run, iteration: int, need: Holds = "full", purpose: str | None = None
) -> dict[str, WorkerHandle]:
    """One worker per agent, serving the weights that iteration `iteration` must roll out with (the
    checkpoint of iteration - 1). Training needs that checkpoint's full state; an evaluation (`need`
    "weights") loads its weights alone (also from one that retention stripped). A checkpoint retention
    deleted is refused in one line naming `purpose` before any worker loads (`require_checkpoint`)."""
    ensure_ray(run.config)
    watch_head(run)  # a lost head ends the command in one line, not in Ray's (mappa.cluster.head_watch)
    config = run.config
    if iteration > 0:
        purpose = purpose or f"iteration {iteration}"
        for name in (name for name, agent in config.agents.items() if agent.trainable):
            require_checkpoint(run, name, iteration - 1, need, purpose)
    ranks = {name: config.cluster.trainer_ranks for name, agent in config.agents.items() if agent.trainable}
    check_placement(config, list(config.agents), ranks)  # before Ray leaves a worker pending for ever
    seats = {
        name: (agent.model, agent.trainable, agent.lora and agent.lora.model_dump())
        for name, agent in config.agents.items()
    }
    if colocated(config):
        workers = _hosted_seats(run, seats)
    else:
        workers = {name: _worker(run, name, *seat) for name, seat in seats.items()}
    states = dict(zip(workers, ray.get([w.ready.remote() for w in workers.values()])))
    loads = []
    for name, worker in workers.items():
        if not run.config.agents[name].trainable or states[name]["weights_iteration"] == iteration:
            continue
        if iteration == 0:
            loads.append(worker.reset.remote())
        else:
            parts = list(run.checkpoint_parts(name, iteration - 1))
            # a stripped checkpoint only passes require_checkpoint when the weights alone are needed
            loads.append(worker.load_checkpoint.remote(run.config.storage.root, parts, need == "weights"))
    ray.get(loads)
    return workers


def _hosted_seats(run: Run, seats: dict[str, tuple]) -> dict[str, WorkerHandle]:
    """Every seat's worker in the run's one `SeatHost` actor (created once, found again by name); each seat
    loads there unless it already has."""
    config = run.config
    resources = config.cluster.resources_of(next(iter(seats)))
    host = (
        ray.remote(SeatHost)
        .options(
            name=f"mappa-{run.run_id}-{HOST}",
            num_cpus=0,
            resources=resources or None,
            get_if_exists=True,
            lifetime="detached",
            max_concurrency=1,
        )
        .remote()
    )
    ray.get([host.add.remote(name, *_worker_args(config, *seat, None)) for name, seat in seats.items()])
    return {name: HostedSeat(host, name) for name in seats}


def coach_worker(run: Run, model: str | None = None, name: str = COACH) -> WorkerHandle:
    """A local coach's model (frozen), for `coach.type: local`: the run's coach (`model` None), or another
    model under another worker name (a re-scoring)."""
    ensure_ray(run.config)
    watch_head(run)
    check_placement(run.config, [name])
    # HF: `expected` scoring reads next-token probabilities, which the vLLM engine does not give
    worker = _worker(run, name, model or run.config.coach.model, trainable=False, engine="hf")
    ray.get(worker.ready.remote())
    return worker


def release_worker(run_id: str, name: str) -> None:
    """Kill one of a run's named single-actor workers (a local coach between score stages), if it lives."""
    if not ray.is_initialized():
        return
    actor = _named(f"mappa-{run_id}-{name}")
    if actor is not None:
        ray.kill(actor)


def release_workers(run_id: str, names: list[str]) -> None:
    """Kill a run's named workers (end of a run: its agents, `HOST` where they share one, a local coach),
    rank groups and their placement groups included."""
    if not ray.is_initialized():
        return
    prefixes = tuple(f"mappa-{run_id}-{name}" for name in [*names, SHARED_ENGINE])
    for actor_name in ray.util.list_named_actors():
        if actor_name in prefixes or (actor_name.startswith(prefixes) and "-rank" in actor_name):
            try:
                ray.kill(ray.get_actor(actor_name))
            except ValueError:
                continue
    for name in prefixes:
        try:
            ray.util.remove_placement_group(ray.util.get_placement_group(name))
        except ValueError:
            continue
