"""An agent's ranks behind one worker's interface, on a real local Ray: plain calls reach every rank and
answer with rank 0's result; with several vLLM engines, `chat` splits its prompts among the engine ranks
and returns the answers in the prompts' order."""

from __future__ import annotations

import pytest
import ray

from mappa.cluster.rank_group import RankGroup, split_evenly


@ray.remote(num_cpus=0)
class Rank:
    def __init__(self, rank: int) -> None:
        self.rank, self.calls = rank, []

    def chat(self, chats: list[str], params: dict) -> list[tuple[int, str]]:
        self.calls.append(("chat", len(chats)))
        return [(self.rank, chat) for chat in chats]

    def train(self, value: int) -> int:
        self.calls.append(("train", value))
        return value * 10 + self.rank

    def seen(self) -> list:
        return self.calls


def test_split_evenly_keeps_order_and_balances():
    assert split_evenly(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert split_evenly([1], 3) == [[1], [], []]
    assert split_evenly([], 2) == [[], []]


@pytest.mark.parametrize("engines", [1, 2, 3])
def test_chat_is_split_among_the_engine_ranks_in_order(ray_local, engines):
    ranks = [Rank.remote(k) for k in range(3)]
    group = RankGroup(ranks, engines=engines)
    chats = [f"prompt {i}" for i in range(5)]
    answers = ray.get(group.chat.remote(chats, {}))
    assert [chat for _, chat in answers] == chats
    assert sorted({rank for rank, _ in answers}) == list(range(engines))
    assert ray.get(group.train.remote(4)) == 40  # rank 0's answer, once every rank has trained
    seen = ray.get([rank.seen.remote() for rank in ranks])
    assert all(("train", 4) in calls for calls in seen)
    shares = [len(share) for share in split_evenly(chats, engines)] + [0] * (3 - engines)
    assert [sum(n for kind, n in calls if kind == "chat") for calls in seen] == shares


def test_hf_ranks_all_generate_the_same_prompts_in_step(ray_local):
    ranks = [Rank.remote(k) for k in range(2)]
    answers = ray.get(RankGroup(ranks).chat.remote(["a", "b"], {}))
    assert answers == [(0, "a"), (0, "b")]
    assert ray.get([rank.seen.remote() for rank in ranks]) == [[("chat", 2)], [("chat", 2)]]


@ray.remote(num_cpus=0)
class FailingRank:
    def __init__(self) -> None:
        raise OSError("[Errno 98] Address already in use")

    def train(self, value: int) -> int:
        return value


def test_a_rank_whose_start_failed_is_named_with_its_error(ray_local):
    """A rank that raised in `__init__` (rank 0 unable to bind the rendezvous port, say) is reported with
    that error, not as a dead process."""
    from mappa.cluster.lost_worker import worker_lost_error

    ranks = [FailingRank.options(name="mappa-startfail-verifier-rank0").remote(), Rank.remote(1)]
    with pytest.raises(ray.exceptions.RayError) as raised:
        ray.get(RankGroup(ranks).train.remote(1))
    message = str(worker_lost_error(raised.value))
    assert "agent verifier (rank 0)" in message, message
    assert "its start failed: OSError: [Errno 98] Address already in use" in message, message
    assert "the worker process died" not in message


def test_the_rendezvous_port_is_free_and_outside_the_kernels_own_ranges():
    """Rank 0 binds the port seconds after it is chosen: it must be one the kernel does not hand out to
    outgoing connections meanwhile (below the ephemeral range), nor one of Ray's worker ports."""
    import socket

    from mappa.cluster.rank_group import RAY_WORKER_PORTS_END, ephemeral_ports_start, free_rendezvous_port

    ports = {free_rendezvous_port() for _ in range(20)}
    assert len(ports) > 1
    for port in ports:
        assert RAY_WORKER_PORTS_END <= port < ephemeral_ports_start()
    port = ports.pop()
    with socket.socket() as server:
        server.bind(("", port))
