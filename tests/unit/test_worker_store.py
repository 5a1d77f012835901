"""A worker's view of the run's store (`mappa.cluster.model_worker.worker_store`): a run it does not see (a
local root on the driver's machine) or a store it cannot reach (no endpoint, no credentials) is refused with
a line naming the node and the fix, before a checkpoint is written or read."""

import pytest

from mappa.cluster.model_worker import StoreUnreachableError, worker_store


def test_a_run_the_worker_does_not_see_names_the_fix(tmp_path):
    (tmp_path / "seen").mkdir()
    (tmp_path / "seen" / "config.yaml").write_text("name: x\n")
    assert worker_store(str(tmp_path), "seen", "solver").exists("seen", "config.yaml")
    with pytest.raises(StoreUnreachableError, match=r"agent solver on node .* does not see run gone") as e:
        worker_store(str(tmp_path), "gone", "solver")
    assert "storage.root: s3://" in str(e.value) and "a folder on the driver's machine" in str(e.value)


def test_a_store_the_worker_cannot_reach_names_the_credentials(monkeypatch):
    import s3fs

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "unit")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "unit")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        with pytest.raises(StoreUnreachableError, match=r"verifier on node .* cannot reach .*s3://") as e:
            worker_store("s3://bucket/runs", "run-1", "verifier")
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
    assert "credentials" in str(e.value)
