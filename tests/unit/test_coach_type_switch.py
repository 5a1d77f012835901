"""Switching the coach's type on the command line: a setting from the config file that the new type
cannot use is reset to its default; one the user wrote with --set is refused, naming where it was written
and the fix (`CoachConfig.type`)."""

import pytest
import yaml

from mappa.config import CoachConfig, ConfigError, load_config
from mappa.stages.rescore import rescore_settings
from mappa.storage.run import Run

CPU = "configs/mathchat-cpu.yaml"  # a local coach with `scoring: expected`
ENDPOINT = ["coach.base_url=http://127.0.0.1:8000/v1", "coach.model=coach"]


@pytest.mark.parametrize(
    "switch", [["coach.type=outcome"], ["coach.type=rubric"], ["coach.type=openai", *ENDPOINT]]
)
def test_a_local_only_setting_from_the_file_is_reset_when_the_type_is_switched(switch):
    config = load_config(CPU, switch)
    assert config.coach.type == switch[0].split("=")[1] and config.coach.scoring == "generate"
    # the same config as one that spells the default out: same hash, so earlier runs made that way match
    spelt = load_config(CPU, [*switch, "coach.scoring=generate"])
    assert config.config_hash() == spelt.config_hash()


def test_the_shipped_config_keeps_its_setting_and_hash():
    assert load_config(CPU).coach.scoring == "expected"
    assert load_config(CPU, ["coach.type=local"]).config_hash() == load_config(CPU).config_hash()


def test_a_conflicting_setting_written_with_set_names_set_and_the_fix():
    with pytest.raises(ConfigError) as caught:
        load_config(CPU, ["coach.type=outcome", "coach.scoring=criteria"])
    message = str(caught.value)
    assert "coach.scoring=criteria (from --set) needs coach.type=local" in message
    assert "coach.type=outcome (from --set)" in message and "use --set coach.scoring=generate" in message
    assert "Value error" not in message


def test_a_set_setting_the_files_type_cannot_use_names_the_file(tmp_path):
    path = tmp_path / "openai.yaml"
    data = yaml.safe_load(open(CPU))
    data["coach"] = {"type": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "coach"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as caught:
        load_config(path, ["coach.scoring=expected"])
    message = " ".join(str(caught.value).split())
    assert f"coach.type=openai (from {path})" in message
    assert f"coach.type: local in {path} (or --set coach.type=local)" in message


def test_in_the_file_alone_a_setting_the_type_cannot_use_is_reset(tmp_path):
    path = tmp_path / "outcome.yaml"
    data = yaml.safe_load(open(CPU))
    data["coach"] = {"type": "outcome", "scoring": "criteria"}
    path.write_text(yaml.safe_dump(data))
    assert load_config(path).coach.scoring == "generate"


def test_a_coach_built_in_code_is_refused_with_the_fix():
    with pytest.raises(
        ValueError, match="needs coach.type=local.*use coach.scoring=generate, or coach.type=local"
    ):
        CoachConfig(type="outcome", scoring="expected")


def test_an_openai_coach_switched_on_without_an_endpoint_says_what_to_set():
    with pytest.raises(
        ConfigError,
        match=r"coach.type=openai \(from --set\) needs coach.base_url.*"
        r"--set coach.base_url=http://127.0.0.1:8000/v1",
    ):
        load_config(CPU, ["coach.type=openai"])


def test_a_rescoring_switches_the_runs_coach_type(tmp_path):
    run = Run.create(load_config(CPU, [f"storage.root={tmp_path}"]), "r")
    assert rescore_settings(run, ["coach.type=outcome"]).coach.scoring == "generate"
    judge = rescore_settings(run, ["coach.type=openai", *ENDPOINT])
    assert (judge.coach.type, judge.coach.scoring) == ("openai", "generate")
    outcome = Run.create(load_config(CPU, [f"storage.root={tmp_path}", "coach.type=outcome"]), "o")
    with pytest.raises(
        ConfigError, match=r"criteria \(from --set\).*coach.type=outcome \(from .*/o/config.yaml\)"
    ):
        rescore_settings(outcome, ["coach.scoring=criteria"])
