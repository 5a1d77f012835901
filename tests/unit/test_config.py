"""Config loading: YAML, dotted overrides, and errors that name the field and the fix."""

from pathlib import Path

import pytest
import yaml

from mappa.config import ConfigError, apply_overrides, load_config, validate_config

SEATS = {"solver": {}, "executor": {}, "verifier": {}}


def write(tmp_path, data) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_demo_config_loads_and_overrides_apply():
    config = load_config(
        "configs/mathchat-cpu.yaml", ["algo.beta=0.02", "iterations=3", "storage.root=/tmp/x"]
    )
    assert config.algo.beta == 0.02
    assert config.iterations == 3
    assert config.storage.root == "/tmp/x"
    assert set(config.agents) == {"solver", "executor", "verifier"}


def test_unknown_field_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"algo\.betta.*unknown field"):
        load_config(write(tmp_path, {"agents": SEATS, "algo": {"betta": 0.1}}))


def test_out_of_range_value_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"trainer\.lr.*greater than 0"):
        load_config(write(tmp_path, {"agents": SEATS}), ["trainer.lr=-1"])


def test_wrong_seats_are_explained(tmp_path):
    with pytest.raises(ConfigError, match=r"seats \['solver', 'executor', 'verifier'\]"):
        load_config(write(tmp_path, {"agents": {"solver": {}}}))


def test_unknown_choice_lists_the_value(tmp_path):
    with pytest.raises(ConfigError, match=r"coach\.type.*'gpt'"):
        load_config(write(tmp_path, {"agents": SEATS, "coach": {"type": "gpt"}}))


def test_openai_coach_needs_url(tmp_path):
    with pytest.raises(ConfigError, match="coach.base_url"):
        load_config(write(tmp_path, {"agents": SEATS, "coach": {"type": "openai"}}))


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_bad_override_form():
    with pytest.raises(ConfigError, match="key.path=value"):
        apply_overrides({}, ["algo.beta"])
    with pytest.raises(ConfigError, match="holds a value"):
        apply_overrides({"iterations": 2}, ["iterations.x=1"])


def test_config_hash_ignores_storage_root():
    a = load_config("configs/mathchat-cpu.yaml", ["storage.root=/a"])
    b = load_config("configs/mathchat-cpu.yaml", ["storage.root=s3://bucket/b"])
    c = load_config("configs/mathchat-cpu.yaml", ["algo.beta=0.5"])
    longer = load_config("configs/mathchat-cpu.yaml", ["iterations=10"])
    assert a.config_hash() == b.config_hash() == longer.config_hash() != c.config_hash()


def test_configs_are_frozen():
    config = load_config("configs/mathchat-cpu.yaml")
    with pytest.raises(Exception, match="frozen"):
        config.algo.beta = 1.0


def test_retries_back_off_exponentially_and_default_to_retrying_the_coach():
    from mappa.config import RetryConfig

    retries = RetryConfig(delay_s=5)
    assert retries.delays("score") == [5, 10, 20]
    assert retries.delays("rollout") == []


def test_config_hash_ignores_how_a_run_executes():
    base = {"agents": {s: {"model": "m"} for s in ("solver", "executor", "verifier")}}
    a = validate_config(base)
    moved = validate_config(
        {
            **base,
            "coach": {"base_url": "http://10.0.0.5:8000/v1", "max_concurrency": 64, "timeout_s": 300},
            "retries": {"score": 9},
            "cluster": {"num_cpus": 64},
        }
    )
    assert a.config_hash() == moved.config_hash()
    assert a.config_hash() != validate_config({**base, "coach": {"temperature": 0.5}}).config_hash()


def test_a_setting_at_its_default_keeps_the_hash():
    base = {"agents": {s: {"model": "m"} for s in ("solver", "executor", "verifier")}}
    plain = validate_config(base)
    # What a run written before `zero_stage` existed hashes like: the new field at its default adds nothing.
    assert plain.config_hash() == validate_config({**base, "trainer": {"zero_stage": 3}}).config_hash()
    assert plain.config_hash() != validate_config({**base, "trainer": {"type": "deepspeed"}}).config_hash()


@pytest.mark.parametrize("path", sorted(Path("configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_validates(path):
    config = load_config(str(path))
    assert config.config_hash()


def test_gpu_configs_match_the_papers_settings():
    for name in ("mathchat-qwen3-4b", "mathchat-r1-distill-1.5b"):
        config = load_config(f"configs/{name}.yaml")
        assert config.trainer.lr == 1e-6 and config.trainer.train_batch_size == 16
        assert config.rollout.samples_per_problem == 2
        assert config.rollout.problems_per_iteration * config.rollout.samples_per_problem == 32
        assert (config.rollout.temperature, config.rollout.eval_temperature) == (1.0, 0.6)
        assert (config.algo.beta, config.algo.clip_eps) == (0.01, 0.2)
        assert config.coach.type == "openai" and config.trainer.type == "deepspeed"


def test_several_ranks_need_the_deepspeed_backend():
    base = {"agents": {s: {"model": "m"} for s in ("solver", "executor", "verifier")}}
    with pytest.raises(ConfigError, match="trainer.type=deepspeed"):
        validate_config({**base, "cluster": {"trainer_ranks": 2}})
    assert validate_config({**base, "cluster": {"trainer_ranks": 2}, "trainer": {"type": "deepspeed"}})


def test_engines_must_fit_the_agents_ranks_and_gpus():
    base = {"agents": {s: {"model": "m"} for s in ("solver", "executor", "verifier")}}
    ranks = {"cluster": {"trainer_ranks": 2}, "trainer": {"type": "deepspeed"}}
    with pytest.raises(ConfigError, match="needs engine.type=vllm"):
        validate_config({**base, **ranks, "engine": {"num_engines": 2}})
    with pytest.raises(ConfigError, match="raise cluster.trainer_ranks"):
        validate_config({**base, **ranks, "engine": {"type": "vllm", "num_engines": 3}})
    assert validate_config({**base, **ranks, "engine": {"type": "vllm", "num_engines": 2}})
    with pytest.raises(ConfigError, match="cluster.num_gpus to at least"):
        validate_config({**base, "engine": {"type": "vllm", "tensor_parallel_size": 2}})
    tensor_parallel = {"type": "vllm", "tensor_parallel_size": 2}
    assert validate_config({**base, "engine": tensor_parallel, "cluster": {"num_gpus": 2}})


def test_a_shared_engine_needs_vllm_one_rank_and_one_model():
    agents = {s: {"model": "m"} for s in ("solver", "executor", "verifier")}
    shared = {"type": "vllm", "shared": True}
    assert validate_config({"agents": agents, "engine": shared}).engine.shared
    with pytest.raises(ConfigError, match="engine.shared needs engine.type=vllm"):
        validate_config({"agents": agents, "engine": {"shared": True}})
    with pytest.raises(ConfigError, match="every agent needs the same model"):
        validate_config({"agents": {**agents, "solver": {"model": "other"}}, "engine": shared})


def test_old_logprobs_auto_takes_the_rollouts_only_where_they_are_the_trainers_own_numbers(monkeypatch):
    from mappa.inference import precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    config = load_config("configs/mathchat-cpu-learn.yaml", [])

    def resolved(*overrides: str) -> str:
        c = load_config("configs/mathchat-cpu-learn.yaml", list(overrides))
        return c.algo.resolved_old_logprobs(c.engine, c.trainer)

    assert config.algo.old_logprobs == "auto" and resolved() == "rollout"  # HF on the trainer's fp32 weights
    assert resolved("engine.bf16_autocast=true") == "recompute"
    assert resolved("trainer.bf16_autocast=true") == "recompute"
    assert resolved("engine.type=vllm") == "recompute"
    assert resolved("trainer.type=deepspeed") == "recompute"
    assert resolved("engine.type=vllm", "algo.old_logprobs=rollout") == "rollout"  # asked for: as given
    assert resolved("algo.old_logprobs=recompute") == "recompute"


def test_a_coach_schedule_gives_each_iteration_its_template_and_is_checked():
    from mappa.coach.build import check_coach_template

    schedule = "coach.schedule=[{until: 2, template: mathchat-reliability}, {template: mathchat}]"
    coach = load_config("configs/mathchat-cpu.yaml", [schedule]).coach
    assert [coach.for_iteration(k).template for k in range(4)] == ["mathchat-reliability"] * 2 + [
        "mathchat"
    ] * 2
    assert (
        load_config("configs/mathchat-cpu.yaml").config_hash()
        != load_config("configs/mathchat-cpu.yaml", [schedule]).config_hash()
    )
    with pytest.raises(ConfigError, match="only the last phase"):
        load_config("configs/mathchat-cpu.yaml", ["coach.schedule=[{template: a}, {until: 3, template: b}]"])
    with pytest.raises(ConfigError, match="must increase"):
        load_config(
            "configs/mathchat-cpu.yaml", ["coach.schedule=[{until: 3, template: a}, {until: 2, template: b}]"]
        )
    missing = load_config(
        "configs/mathchat-cpu.yaml", ["coach.schedule=[{until: 3, template: nosuch}]"]
    ).coach
    with pytest.raises(ValueError, match="`nosuch` not found"):
        check_coach_template(missing)


def test_the_deployments_parameters_explain_themselves_in_the_run_form():
    from prefect.utilities.callables import parameter_schema

    from mappa.flows.evaluate import evaluate
    from mappa.flows.train import train

    for flow in (train, evaluate):
        properties = parameter_schema(flow).model_dump()["properties"]
        assert all(p.get("description") for p in properties.values()), properties
    described = parameter_schema(train).model_dump()["properties"]["config_path"]["description"]
    assert "relative to the folder `mappa serve`" in " ".join(described.split())
    with pytest.raises(ConfigError, match=r"configs/nope.yaml does not exist \(relative to /"):
        load_config("configs/nope.yaml")


def test_a_sibling_baseline_needs_several_samples_per_problem():
    base = {"agents": SEATS, "algo": {"baseline": "siblings"}}
    with pytest.raises(ConfigError, match="rollout.samples_per_problem to 2 or more"):
        validate_config(base)
    assert validate_config({**base, "rollout": {"samples_per_problem": 4}})
