"""The DeepSpeed backend against the torch backend on the tiny model: ZeRO-3 with one rank and with two
(gloo, one thread each) gives the torch backend's losses, logprobs and weights over the same steps; a
checkpoint holds loadable safetensors and resumes; a missing DeepSpeed is named with the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from server_process import free_port

from mappa.stages import output_parts

pytest.importorskip("deepspeed", reason="the deepspeed backend's tests need `pip install deepspeed`")

STEPS = Path(__file__).with_name("trainer_steps.py")


def run_ranks(model: Path, out: Path, world_size: int, plan: dict[str, dict]) -> dict:
    """`trainer_steps.py` as `world_size` processes of one process group; rank 0's JSON, by plan entry."""
    port = str(free_port())
    procs = []
    for rank in range(world_size):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "OMP_NUM_THREADS": "1",  # two ranks on two cores: 35x slower without (docs/pitfalls.md)
        }
        command = [sys.executable, str(STEPS), str(model), str(out), json.dumps(plan)]
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outputs = [proc.communicate(timeout=600)[0].decode(errors="replace") for proc in procs]
    for rank, (proc, output) in enumerate(zip(procs, outputs)):
        assert proc.returncode == 0, f"rank {rank} failed:\n{output[-4000:]}"
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def one_rank(tiny_model, tmp_path_factory) -> dict:
    """Every one-rank training of this module, in one process (DeepSpeed's import is paid once): the torch
    backend and ZeRO-3, full weights and LoRA, and a ZeRO-3 run checkpointed after step 2 of 3 then resumed
    by a new trainer from that checkpoint."""
    folder = tmp_path_factory.mktemp("one-rank")
    checkpoint = str(folder / "checkpoint")
    plan = {
        "torch": {"backend": "torch"},
        "zero3": {},
        "torch_lora": {"backend": "torch", "lora": True},
        "zero3_lora": {"lora": True},
        "straight": {"steps": 3, "checkpoint": checkpoint, "checkpoint_after": 2},
        "resumed": {"steps": 1, "resume": checkpoint},
    }
    return {**run_ranks(tiny_model, folder / "result.json", 1, plan), "checkpoint": checkpoint}


def assert_same_training(a: dict, b: dict) -> None:
    assert a["losses"] == pytest.approx(b["losses"], rel=1e-4, abs=1e-6)
    assert a["grad_norms"] == pytest.approx(b["grad_norms"], rel=1e-4)
    for row_a, row_b in zip(a["logprobs"], b["logprobs"], strict=True):
        assert row_a == pytest.approx(row_b, abs=1e-4)
    assert a["checksum"] == pytest.approx(b["checksum"], rel=1e-6)


@pytest.mark.parametrize("world_size", [1, 2])
def test_zero3_matches_the_torch_backend(tiny_model, tmp_path, one_rank, world_size):
    if world_size == 1:
        result = one_rank["zero3"]
    else:
        result = run_ranks(tiny_model, tmp_path / "result.json", world_size, {"zero3": {}})["zero3"]
    torch_run = one_rank["torch"]
    assert result["world_size"] == world_size
    assert_same_training(result, torch_run)
    for row_a, row_b in zip(result["reference"], torch_run["reference"], strict=True):
        assert row_a == pytest.approx(row_b, abs=1e-5)  # the frozen reference is the base model on every rank
    assert result["losses"][0] != result["losses"][-1], "the updates must change the policy"


def test_a_lora_adapter_trains_alike_on_both_backends(one_rank):
    assert_same_training(one_rank["zero3_lora"], one_rank["torch_lora"])
    assert one_rank["zero3_lora"]["losses"][0] != one_rank["zero3_lora"]["losses"][-1]


def test_checkpoint_has_loadable_weights_and_resumes_where_it_stopped(one_rank):
    from transformers import AutoModelForCausalLM

    straight, resumed = one_rank["straight"], one_rank["resumed"]  # saved after step 2, went on
    model = AutoModelForCausalLM.from_pretrained(one_rank["checkpoint"])  # plain safetensors, no shards
    saved = sum(float(p.double().abs().sum()) for p in model.state_dict().values())
    assert saved != pytest.approx(straight["checksum"], rel=1e-9), "the checkpoint holds step 2's weights"
    assert resumed["extra"] == {"iteration": 0} and resumed["steps"] == 3
    # Weights, Adam moments and the step count came back: the third step lands where it did unbroken.
    assert resumed["losses"][0] == pytest.approx(straight["losses"][-1], rel=1e-5, abs=1e-7)
    assert resumed["checksum"] == pytest.approx(straight["checksum"], rel=1e-6)


def deepspeed_run(root: Path, tiny_model: Path, iterations: int, ranks: int):
    from tiny_run import write_tiny_config

    from mappa.flows.train import train
    from mappa.storage.run import Run

    # fp32 on both sides: under bf16 autocast (CPUs with native bf16) one and two ranks round differently
    trainer = {"type": "deepspeed", "lr": 1e-3, "bf16_autocast": False}
    path = write_tiny_config(
        root / "config.yaml",
        tiny_model,
        root,
        iterations=iterations,
        trainer=trainer,
        engine={"bf16_autocast": False},
        # torch's own thread count, as when the 1e-5 below was set: with one thread per worker one and
        # two ranks came 1.1e-5 apart in one weight (Adam's first step magnifies rounding where the
        # gradient is tiny)
        cluster={"trainer_ranks": ranks, "torch_threads": None},
        checkpoint={"keep_last": 2},  # the two-rank run is compared with the one-rank run's iteration 0
    )
    summary = train(config_path=str(path), run_id=f"ds-{ranks}")
    return Run.open(str(root), f"ds-{ranks}"), summary


@pytest.fixture(scope="module")
def one_rank_run(tmp_path_factory, tiny_model, prefect_harness, ray_local):
    return deepspeed_run(tmp_path_factory.mktemp("one-rank"), tiny_model, iterations=2, ranks=1)


@pytest.mark.slow
def test_a_run_trains_on_the_deepspeed_backend(one_rank_run, tiny_model):
    """Two iterations through the real flow with ZeRO-3 workers: the second rollout generates from the
    partitioned, updated policy; checkpoints hold plain safetensors and DeepSpeed's state."""
    from safetensors.torch import load_file

    run, summary = one_rank_run
    assert [row["iteration"] for row in summary["iterations"]] == [0, 1]
    base = load_file(str(tiny_model / "model.safetensors"))
    for agent in ("solver", "executor", "verifier"):
        folder = run.checkpoint_parts(agent, 1)
        assert run.store.exists(*folder, "deepspeed", "latest")
        trained = load_file(run.store.path(*folder, "model.safetensors"))
        assert any(not (base[k] == trained[k]).all() for k in base if k in trained), agent


@pytest.mark.slow
def test_two_ranks_per_agent_through_ray_train_like_one(one_rank_run, tmp_path, tiny_model):
    """`cluster.trainer_ranks: 2`: each agent is two Ray actors in a placement group, one ZeRO-3 process
    group; the rollout and the update come out as with one rank."""
    import ray
    from safetensors.torch import load_file

    one, _ = one_rank_run
    two, _ = deepspeed_run(tmp_path, tiny_model, iterations=1, ranks=2)
    actions = [run.store.read_parquet(*output_parts(run, 0, "rollout")) for run in (one, two)]
    assert actions[0]["response"].tolist() == actions[1]["response"].tolist()
    for agent in ("solver", "executor", "verifier"):
        a = load_file(one.store.path(*one.checkpoint_parts(agent, 0), "model.safetensors"))
        b = load_file(two.store.path(*two.checkpoint_parts(agent, 0), "model.safetensors"))
        for key in a:
            assert (a[key] - b[key]).abs().max() < 1e-5, (agent, key)
        shards = two.store.list(*two.checkpoint_parts(agent, 0), "deepspeed", "state")
        assert sum("optim_states" in shard for shard in shards) == 2, shards  # one optimizer shard per rank
    assert not [name for name in ray.util.list_named_actors() if name.startswith("mappa-ds-2-")]


def test_a_missing_deepspeed_is_named_with_the_fix(monkeypatch):
    from mappa.trainer.deepspeed_trainer import import_deepspeed

    monkeypatch.setitem(sys.modules, "deepspeed", None)
    with pytest.raises(ImportError, match="pip install deepspeed"):
        import_deepspeed()
