"""The resource pre-flight (`mappa.resources`): a run whose storage root lacks the space, or whose machine
lacks the memory, is refused by `mappa train` in one line that says what is needed, what is free and what
would fit, before any model loads or Ray and Prefect start. The free-space and available-memory readings
are the boundary the tests control; the estimates are checked against hand-computed figures."""

from __future__ import annotations

import pytest

from mappa import resources
from mappa.cli import main
from mappa.config import load_config

GB = 1e9


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if anything past the pre-flight starts: a model's weights, Ray or the flow."""
    import ray
    import transformers

    from mappa.flows import train

    def refuse(*args, **kwargs):
        raise AssertionError("work started after a pre-flight that should have refused the run")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(train, "train", refuse)


def tiny_args(tiny_model, tmp_path, *more: str) -> list[str]:
    seats = [f"agents.{seat}.model={tiny_model}" for seat in ("solver", "executor", "verifier")]
    settings = [
        *seats,
        "engine.type=hf",
        "engine.shared=false",
        "coach.type=rubric",
        "coach.scoring=generate",
        f"storage.root={tmp_path}",
    ]
    return ["train", "configs/mathchat-cpu.yaml", *(f"--set={s}" for s in [*settings, *more])]


def test_a_root_without_the_space_is_refused_in_one_line(tiny_model, tmp_path, monkeypatch, capsys, no_work):
    monkeypatch.setattr(resources, "free_disk_bytes", lambda root: 1.3 * GB)
    assert main(tiny_args(tiny_model, tmp_path, "iterations=10", "checkpoint.keep_last=3")) == 2
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"error: storage root {tmp_path} has 1.3 GB free, but this run needs about 1.5 GB")
    assert "checkpoint.keep_last 3 + 1 being written" in line and "checkpoint.min_free_gb 1" in line
    assert line.endswith("or run with --set checkpoint.keep_last=1 --set checkpoint.keep_weights_every=0")


def test_a_machine_without_the_memory_is_refused_with_what_fits(
    tiny_model, tmp_path, monkeypatch, capsys, no_work
):
    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 9.0 * GB)
    assert main(tiny_args(tiny_model, tmp_path, "engine.type=vllm", "engine.shared=false")) == 2
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("error: this machine has 9.0 GB of memory available, but the run needs about")
    assert "3 vLLM engine(s)" in line and "driver, Ray and Prefect 2.0 GB" in line
    assert line.endswith("or run with --set engine.type=hf --set engine.shared=false")
    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 1.0 * GB)
    assert main(tiny_args(tiny_model, tmp_path)) == 2
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "1.0 GB of memory available" in line and line.endswith("stop other work")  # nothing would fit


def test_estimates_from_the_safetensors_headers(tiny_model):
    config = load_config("configs/mathchat-cpu.yaml")
    shapes = resources.model_shapes(str(tiny_model))
    parameters = resources.parameter_count(shapes)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert parameters == sum(p.numel() for p in model.parameters())  # from the header, no weights read
    assert resources.vocabulary_size(shapes) == model.config.vocab_size
    linear = [(n, p.shape) for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    assert resources.adapter_parameter_count(shapes, 4, "all-linear") == sum(
        4 * (a + b) for _, (a, b) in linear
    )
    assert resources.adapter_parameter_count(shapes, 4, ["q_proj"]) == sum(
        4 * (a + b) for n, (a, b) in linear if "q_proj" in n
    )
    size = resources.AgentSize("solver", parameters, parameters, False, 100)
    assert resources.state_bytes(size, deepspeed=False) == 12 * parameters  # fp32 weights + AdamW moments
    assert config.checkpoint.keep_last == 1


def test_a_disk_that_filled_up_stops_the_update_before_it_writes(tmp_path, monkeypatch):
    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}"])
    monkeypatch.setattr(resources, "free_disk_bytes", lambda root: 1.2 * GB)
    resources.check_disk_for_checkpoint(config, "solver", 0.1 * GB)  # 1.2 >= 0.1 + min_free_gb 1
    with pytest.raises(
        resources.ResourceError, match=r"has 1.20 GB free, too little to write agent solver's"
    ):
        resources.check_disk_for_checkpoint(config, "solver", 0.3 * GB)
    monkeypatch.setattr(resources, "free_disk_bytes", lambda root: None)  # an object store: no such limit
    resources.check_disk_for_checkpoint(config, "solver", 1e15)


def test_agents_sharing_one_process_are_planned_one_runtime(tiny_model):
    """On a CPU machine the agents' workers share one process (`cluster.colocate_seats`): the memory
    estimate counts one runtime (torch, transformers, Ray's worker) for them, not one per agent."""
    tiny = [f"agents.{seat}.model={tiny_model}" for seat in ("solver", "executor", "verifier")]
    common = [*tiny, "engine.type=hf", "engine.shared=false", "coach.type=rubric", "coach.scoring=generate"]
    one = load_config("configs/mathchat-cpu.yaml", common)
    apart = load_config("configs/mathchat-cpu.yaml", [*common, "cluster.colocate_seats=false"])
    need = {
        name: resources.memory_need(config, resources.agent_sizes(config))
        for name, config in (("one", one), ("apart", apart))
    }
    assert need["apart"].total - need["one"].total == pytest.approx(2 * resources.RUNTIME_BYTES)
    assert "the agents' worker process 0.7 GB" in need["one"].parts


def test_a_finished_run_is_not_refused_for_disk_it_will_not_write(tiny_model, tmp_path, monkeypatch):
    """`mappa train --run-id` or `mappa resume` on a run with every iteration done writes no checkpoint,
    so a full disk does not stop it; one more iteration does."""
    from mappa.preflight import check_before_run
    from mappa.stages import output_parts, write_manifest
    from mappa.storage.run import Run

    overrides = [s.removeprefix("--set=") for s in tiny_args(tiny_model, tmp_path)[2:]]
    config = load_config("configs/mathchat-cpu.yaml", overrides)
    run = Run.create(config, "done")
    for iteration in range(config.iterations):
        run.store.write_json({}, *output_parts(run, iteration, "update"))
        write_manifest(run, iteration, "update", 0, {"total_s": 1.0})
    monkeypatch.setattr(resources, "free_disk_bytes", lambda root: 0.01 * GB)
    said: list[str] = []
    check_before_run(config, "done", say=said.append)
    assert f"resources: disk not estimated, run done has all {config.iterations} iteration(s) done" in said
    longer = load_config("configs/mathchat-cpu.yaml", [*overrides, "iterations=3"])
    with pytest.raises(resources.ResourceError, match=f"storage root {tmp_path} has 0.0 GB free"):
        check_before_run(longer, "done", say=said.append)
    with pytest.raises(resources.ResourceError, match="has 0.0 GB free"):
        check_before_run(config, "new-run", say=said.append)
