"""Secrets stay out of configs and artifacts: a run stores the name of the variable that holds a key, never
the key, and a config that holds a secret is refused with an error that says where secrets go (and does not
repeat the secret). The end-to-end check on S3 (artifacts, logs, Prefect) is in
tests/integration/test_fault_injection.py."""

import pytest
import yaml

from mappa.config import ConfigError, dump_config, load_config, validate_config
from mappa.storage.run import Run

SEATS = {seat: {"model": "m"} for seat in ("solver", "executor", "verifier")}
COACH_KEY = "sk-unit-9f8e7d6c5b4a-do-not-store"
AWS_SECRET = "aws-unit-secret-1a2b3c4d5e6f"


def test_run_config_and_events_hold_the_variable_name_not_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("MAPPA_UNIT_COACH_KEY", COACH_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", COACH_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    coach = {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "MAPPA_UNIT_COACH_KEY"}
    config = validate_config({"agents": SEATS, "coach": coach, "storage": {"root": str(tmp_path)}})
    run = Run.create(config, "r1")
    run.record_event(0, "rollout", "started")
    stored = [path.read_text() for path in tmp_path.rglob("*") if path.is_file()]
    assert len(stored) == 2  # config.yaml and the event
    for text in (dump_config(config), *stored):
        assert COACH_KEY not in text and AWS_SECRET not in text
    assert "api_key_env: MAPPA_UNIT_COACH_KEY" in run.store.read_text("r1", "config.yaml")


@pytest.mark.parametrize(
    "field, secret",
    [
        ("coach.api_key", {"coach": {"api_key": COACH_KEY}}),
        ("storage.aws_secret_access_key", {"storage": {"aws_secret_access_key": AWS_SECRET}}),
        ("aws_secret_access_key", {"aws_secret_access_key": AWS_SECRET}),
    ],
)
def test_a_secret_in_the_config_is_refused_and_not_repeated(tmp_path, field, secret):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"agents": SEATS, **secret}))
    with pytest.raises(ConfigError, match="secrets are never read from a config") as error:
        load_config(path)
    assert f"{field}: Extra inputs are not permitted" in str(error.value)
    assert COACH_KEY not in str(error.value) and AWS_SECRET not in str(error.value)


def test_a_key_given_as_api_key_env_is_refused_and_not_repeated():
    with pytest.raises(ConfigError, match=r"coach\.api_key_env.*name of an environment variable") as error:
        validate_config({"agents": SEATS, "coach": {"api_key_env": COACH_KEY}})
    assert COACH_KEY not in str(error.value)


def test_credentials_in_the_storage_url_are_refused_without_echoing_them():
    from mappa.config import ConfigError, validate_config

    agents = {seat: {"model": "m"} for seat in ("solver", "executor", "verifier")}
    with pytest.raises(ConfigError) as error:
        validate_config({"agents": agents, "storage": {"root": "s3://AKIAEXAMPLE:s3cr3tvalue@bucket/runs"}})
    assert "environment" in str(error.value)
    assert "s3cr3tvalue" not in str(error.value)
    assert validate_config({"agents": agents, "storage": {"root": "s3://bucket/runs"}}).storage.root
