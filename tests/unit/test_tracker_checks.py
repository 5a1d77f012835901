"""A tracker that could not log stops a run before it starts (`mappa.reporting.tracker_sinks.check_trackers`):
W&B online without a login, MLflow's default store on a remote root; each message names the fix."""

import pytest

from mappa.config import ConfigError, validate_config
from mappa.reporting.tracker_sinks import check_trackers, tracker_id

SEATS = {"solver": {}, "executor": {}, "verifier": {}}


def test_wandb_online_needs_a_login_and_offline_does_not(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))  # no `wandb login` here
    online = validate_config({"agents": SEATS, "trackers": {"wandb": {"enabled": True}}})
    with pytest.raises(ConfigError, match=r"wandb login.*WANDB_API_KEY.*mode=offline"):
        check_trackers(online)
    (tmp_path / "netrc").write_text("machine api.wandb.ai login user password k3y\n")
    check_trackers(online)  # what `wandb login` leaves
    offline = {"wandb": {"enabled": True, "mode": "offline"}}
    check_trackers(validate_config({"agents": SEATS, "trackers": offline}))


def test_mlflow_on_a_remote_root_needs_a_tracking_uri():
    mlflow = {"mlflow": {"enabled": True}}
    remote = {"agents": SEATS, "storage": {"root": "s3://bucket/runs"}, "trackers": mlflow}
    with pytest.raises(ConfigError, match=r"tracking_uri .*s3://bucket/runs"):
        check_trackers(validate_config(remote))
    remote["trackers"]["mlflow"]["tracking_uri"] = "http://mlflow:5000"
    check_trackers(validate_config(remote))


def test_tracker_ids_keep_run_ids_apart():
    assert tracker_id("run-1_a") == "run-1_a"
    assert tracker_id("a.b") != tracker_id("a_b") and tracker_id("a.b").startswith("a-b-")
