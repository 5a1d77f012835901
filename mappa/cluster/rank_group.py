"""An agent's data-parallel trainer ranks behind the interface of one worker.

`group.method.remote(*args)` calls `method` on every rank with the same arguments (ZeRO-3 ranks must make
the same calls in the same order: every forward gathers parameters collectively) and returns one object
ref that resolves to rank 0's answer once every rank has answered, or raises if any rank failed. Ranks
split the work themselves (`DeepSpeedTrainer`): each takes its share of an update's actions and of a
logprob pass, and they agree on the result.

Placement: the ranks of one agent share a named, detached placement group, one bundle per rank
(`cluster.num_gpus` GPUs each; a token CPU share on CPU machines, where workers share the cores), packed
onto as few nodes as possible; rank 0's node hosts the process group's rendezvous.

Generation: with the HF engine every rank generates the same prompts in step (its forward gathers the
ZeRO-3 partitions collectively) and rank 0's answer counts; with vLLM (`engine.num_engines`) the first
ranks hold one engine each and every `chat` call's prompts are split among them.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path
from typing import Any

import ray
from ray.util.placement_group import get_placement_group, placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

CPU_SHARE = 0.01  # a bundle needs some resource; workers on CPU machines ask for no cores of their own


class RankGroup:
    def __init__(self, ranks: list[Any], engines: int = 0) -> None:
        """`engines`: how many of the first ranks hold a vLLM engine (`engine.num_engines`); 0 for the HF
        engine, which generates on every rank in step."""
        self.ranks, self.engines = ranks, engines

    def __getattr__(self, method: str) -> _GroupMethod | _SplitChat:
        if method.startswith("_"):
            raise AttributeError(method)
        if method == "chat" and self.engines:
            return _SplitChat(self.ranks[: self.engines])
        return _GroupMethod(self.ranks, method)


class _SplitChat:
    """`chat` on an agent with several vLLM engines: the prompts split into contiguous, near-equal shares,
    one per engine, generated at once; the answers come back in the prompts' order."""

    def __init__(self, engines: list[Any]) -> None:
        self.engines = engines

    def remote(self, chats: list[Any], params: dict[str, Any]) -> Any:
        shares = split_evenly(chats, len(self.engines))
        answers = [engine.chat.remote(share, params) for engine, share in zip(self.engines, shares) if share]
        return _concatenated.remote(*answers)


def split_evenly(items: list[Any], parts: int) -> list[list[Any]]:
    """`items` in `parts` contiguous slices whose sizes differ by at most one (the first ones larger)."""
    size, extra = divmod(len(items), parts)
    bounds = [0]
    for part in range(parts):
        bounds.append(bounds[-1] + size + (part < extra))
    return [items[a:b] for a, b in zip(bounds, bounds[1:])]


class _GroupMethod:
    def __init__(self, ranks: list[Any], method: str) -> None:
        self.ranks, self.method = ranks, method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        answers = [getattr(rank, self.method).remote(*args, **kwargs) for rank in self.ranks]
        return _rank_zero_answer.remote(*answers)


@ray.remote(num_cpus=0)
def _rank_zero_answer(*answers: Any) -> Any:
    """Ray resolves every rank's answer before this runs (and fails it if one failed)."""
    return answers[0]


@ray.remote(num_cpus=0)
def _concatenated(*answers: list[Any]) -> list[Any]:
    return [item for answer in answers for item in answer]


RAY_WORKER_PORTS_END = 20000  # Ray's workers listen on 10002-19999 by default
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_ports_start() -> int:
    """The first port of this node's ephemeral range (Linux's default: 32768)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_rendezvous_port(tries: int = 64) -> int:
    """A free port that the kernel does not hand out on its own: above Ray's worker ports and below this
    node's ephemeral range. Rank 0 binds it seconds later (after its process starts and imports torch);
    a free port from the ephemeral range (`bind(("", 0))`) can be taken meanwhile by any outgoing
    connection of Ray's or Prefect's, and rank 0 then fails with "address already in use". Falls back
    to an ephemeral port where that range leaves no room."""
    candidates = range(RAY_WORKER_PORTS_END, ephemeral_ports_start())
    for port in random.sample(candidates, min(tries, len(candidates))):
        with socket.socket() as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


@ray.remote(num_cpus=0)
def _rendezvous() -> tuple[str, int]:
    """This node's address and a free port, for the process group's rank 0."""
    return ray.util.get_node_ip_address(), free_rendezvous_port()


def rank_placement(name: str, ranks: int, num_gpus: float, resources: dict[str, float] | None = None) -> Any:
    """The agent's placement group (created once, found again by name), ready; each rank's bundle also
    holds the agent's `cluster.placement` resources."""
    try:
        group = get_placement_group(name)
    except ValueError:
        bundle = {"CPU": CPU_SHARE, **({"GPU": num_gpus} if num_gpus else {}), **(resources or {})}
        group = placement_group([bundle] * ranks, strategy="PACK", name=name, lifetime="detached")
    ray.get(group.ready())
    return group


def process_group_env(group: Any, ranks: int) -> list[dict[str, str]]:
    """RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT for each rank, rendezvous on bundle 0's node."""
    on_first = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)
    address, port = ray.get(_rendezvous.options(scheduling_strategy=on_first).remote())
    return [
        {
            "RANK": str(rank),
            "LOCAL_RANK": "0",  # one visible device per actor: Ray sets CUDA_VISIBLE_DEVICES per rank
            "WORLD_SIZE": str(ranks),
            "MASTER_ADDR": address,
            "MASTER_PORT": str(port),
        }
        for rank in range(ranks)
    ]


def in_bundle(group: Any, rank: int) -> PlacementGroupSchedulingStrategy:
    return PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=rank)
