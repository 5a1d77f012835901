"""How config errors read (`mappa.config.errors`): no pydantic prefix, the origin of an unknown key (the
file or --set) and the closest valid name of its section."""

import pytest
import yaml

from mappa.config import ConfigError, load_config

CPU = "configs/mathchat-cpu.yaml"


def problems(path, overrides=()) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path, list(overrides))
    return str(caught.value)


def test_a_misspelt_key_from_set_gets_a_suggestion_in_its_section():
    message = problems(
        CPU, ["coach.scorng=expected", "agents.solver.modle=x", "env.max_executor_turn=1", "itrations=3"]
    )
    assert "coach.scorng: Extra inputs are not permitted (unknown field, from --set; did you mean " in message
    assert "did you mean `coach.scoring`?" in message
    assert "did you mean `agents.solver.model`?" in message
    assert "did you mean `env.max_executor_turns`?" in message  # the env's own section
    assert "did you mean `iterations`?" in message


def test_a_misspelt_key_in_the_file_names_the_file(tmp_path):
    data = yaml.safe_load(open(CPU))
    data["algo"]["betta"] = 0.1
    data["coach"]["schedule"] = [{"untill": 2, "template": "mathchat"}]
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    message = problems(path)
    assert (
        f"algo.betta: Extra inputs are not permitted (unknown field, from {path}; did you mean `algo.beta`?)"
        in (message)
    )
    assert "did you mean `coach.schedule.0.until`?" in message


def test_a_key_like_no_other_lists_the_sections_fields():
    message = problems(CPU, ["rollout.qqqqqqqq=1"])
    assert "the valid ones here: " in message and "samples_per_problem" in message


def test_validator_messages_carry_no_pydantic_prefix():
    message = problems(CPU, ["env.type=mathchta", "coach.type=openai"])
    assert "Value error" not in message
    assert "env: unknown env type 'mathchta'" in message
