"""A run's agents in one worker process on a CPU machine (`mappa.cluster.seat_host`), on a real local Ray and
the tiny model: one actor holds every seat, each seat's handle reaches its own weights, a lost host is
reported as every agent's worker, and the end of the run releases it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import ray

from mappa.cluster.seat_host import colocated
from mappa.config import validate_config

SEATS = ("solver", "executor", "verifier")


def config_with(**sections):
    return validate_config({"agents": {seat: {"model": "tiny"} for seat in SEATS}, **sections})


def test_seats_share_a_host_only_where_nothing_needs_a_process_of_its_own():
    assert colocated(config_with())
    assert colocated(config_with(cluster={"placement": {s: {"node_b": 1} for s in SEATS}}))
    assert not colocated(config_with(cluster={"colocate_seats": False}))
    assert not colocated(config_with(cluster={"num_gpus": 1}))
    assert not colocated(config_with(cluster={"trainer_ranks": 2}, trainer={"type": "deepspeed"}))
    assert not colocated(config_with(trainer={"type": "deepspeed"}))  # a process group per process
    assert not colocated(config_with(engine={"type": "vllm"}))
    assert not colocated(config_with(rollout={"concurrent_batches": 2}))  # agents working at once
    assert not colocated(config_with(cluster={"placement": {"solver": {"node_b": 1}}}))


def test_one_actor_holds_every_seat_and_each_seat_keeps_its_own_weights(tiny_model, ray_local):
    from mappa.cluster.lost_worker import worker_lost_error
    from mappa.cluster.ray_cluster import HOST, agent_workers, release_workers
    from mappa.core.types import TrainSample

    config = validate_config(
        {
            "agents": {seat: {"model": str(tiny_model)} for seat in SEATS},
            "trainer": {"lr": 1e-2},
            "cluster": {"torch_threads": 1},
        }
    )
    run = SimpleNamespace(config=config, run_id="hosted")
    try:
        workers = agent_workers(run, 0)
        names = hosted_actors()
        assert names == [f"mappa-hosted-{HOST}"]
        assert [ray.get(w.ready.remote())["name"] for w in workers.values()] == list(SEATS)
        assert agent_workers(run, 0).keys() == workers.keys()  # a later stage finds the loaded seats
        assert hosted_actors() == names

        before = {seat: ray.get(w.weights_checksum.remote()) for seat, w in workers.items()}
        chats = [[{"role": "user", "content": "What is 2 + 3?"}]]
        params = {"max_new_tokens": 6, "seed": 1}
        ((_, generation, _),) = ray.get(workers["executor"].chat.remote(chats, params))
        sample = TrainSample(
            prompt_token_ids=generation["prompt_token_ids"],
            response_token_ids=generation["token_ids"],
            old_logprobs=generation["logprobs"],
            advantages=[1.0] * len(generation["token_ids"]),
        )
        ray.get(workers["executor"].train.remote([sample], 0))
        after = {seat: ray.get(w.weights_checksum.remote()) for seat, w in workers.items()}
        assert after["executor"] != before["executor"]
        assert {s: after[s] for s in ("solver", "verifier")} == {s: before[s] for s in ("solver", "verifier")}

        ray.kill(ray.get_actor(names[0]))
        with pytest.raises(ray.exceptions.RayActorError) as raised:
            ray.get(workers["solver"].ready.remote())
        message = str(worker_lost_error(raised.value, config))
        shared = "the worker shared by agents solver, executor, verifier (mappa-hosted-seats) died"
        assert message.startswith(shared), message
        assert "the worker process died" in message, message

        agent_workers(run, 0)  # a new host, every seat loaded again
        assert hosted_actors() == names
    finally:
        release_workers(run.run_id, [*SEATS, HOST])
    assert not hosted_actors()


def hosted_actors() -> list[str]:
    return [name for name in ray.util.list_named_actors() if name.startswith("mappa-hosted-")]
