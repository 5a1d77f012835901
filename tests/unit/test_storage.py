"""The artifact store (atomic local writes, parquet/json round trips) and the run's stage manifests."""

import pandas as pd
import pytest

from mappa.config import load_config
from mappa.core.types import ActionScore
from mappa.stages import output_parts, stage_complete, write_manifest
from mappa.storage.frames import (
    frame_to_scores,
    frame_to_trajectories,
    scores_to_frame,
    trajectories_to_frame,
)
from mappa.storage.run import Run
from mappa.storage.store import ArtifactStore


def test_round_trips_and_no_temp_files_left(tmp_path):
    store = ArtifactStore(str(tmp_path / "root"))
    store.write_json({"a": 1}, "run", "x", "m.json")
    store.write_parquet(pd.DataFrame({"ids": [[1, 2], [3]]}), "run", "x", "t.parquet")
    assert store.read_json("run", "x", "m.json") == {"a": 1}
    assert store.read_parquet("run", "x", "t.parquet")["ids"].map(list).tolist() == [[1, 2], [3]]
    assert sorted(p.name for p in (tmp_path / "root" / "run" / "x").iterdir()) == ["m.json", "t.parquet"]


def folder_with_files(folder):
    (folder / "sub").mkdir(parents=True)
    (folder / "weights.bin").write_bytes(bytes(range(256)) * 4096)
    (folder / "sub" / "state.json").write_text('{"step": 3}')
    return {"weights.bin": bytes(range(256)) * 4096, "sub/state.json": b'{"step": 3}'}


def test_put_folder_copies_or_moves_and_get_folder_restores(tmp_path):
    store = ArtifactStore(str(tmp_path / "root"))
    files = folder_with_files(tmp_path / "copied")
    store.put_folder(tmp_path / "copied", "run", "ckpt-a")
    assert (tmp_path / "copied" / "weights.bin").exists()  # a copy leaves the source alone
    folder_with_files(tmp_path / "moved")
    store.put_folder(tmp_path / "moved", "run", "ckpt-b", move=True)
    assert not (tmp_path / "moved" / "weights.bin").exists()  # renamed into place, not copied
    for name in ("ckpt-a", "ckpt-b"):
        restored = store.get_folder(tmp_path / f"restored-{name}", "run", name)
        assert {f: (restored / f).read_bytes() for f in files} == files
    assert not list((tmp_path / "root").rglob(".tmp-*"))


def test_put_folder_uploads_to_a_remote_store(tmp_path):
    store = ArtifactStore("memory://mappa-folder-test")
    files = folder_with_files(tmp_path / "local")
    store.put_folder(tmp_path / "local", "run", "ckpt", move=True)  # move: meaningless remotely, a copy
    restored = store.get_folder(tmp_path / "restored", "run", "ckpt")
    assert {f: (restored / f).read_bytes() for f in files} == files
    weights = store.get_folder(tmp_path / "weights-only", "run", "ckpt", leave_out=("sub",))
    assert [p.name for p in weights.rglob("*")] == ["weights.bin"]  # an evaluation's copy: no optimizer state


def test_memory_filesystem_url():
    store = ArtifactStore("memory://mappa-test")
    store.write_text("hello", "run", "f.txt")
    assert store.read_text("run", "f.txt") == "hello"
    assert store.url("run", "f.txt").startswith("memory://")


def test_trajectory_frame_round_trip(trajectory):
    back = frame_to_trajectories(trajectories_to_frame([trajectory], iteration=0))
    assert back == [trajectory]


def test_scores_frame_round_trip(tmp_path):
    scores = [ActionScore("t1/0", "t1", "solver", 7.0, "fine", "rubric", "ok", True)]
    assert frame_to_scores(scores_to_frame(scores)) == scores
    store = ArtifactStore(str(tmp_path))  # the criteria coach's P(Yes) per question, through parquet
    asked = [*scores, ActionScore("t1/1", "t1", "solver", 5.0, "", "m", criteria={"Is it? a; b": 0.5})]
    store.write_parquet(scores_to_frame(asked), "scores.parquet")
    assert frame_to_scores(store.read_parquet("scores.parquet")) == asked
    old = scores_to_frame(scores).drop(columns=["criteria", "template"])  # a file from before the fields
    assert frame_to_scores(old) == scores


def test_manifest_marks_stage_complete_and_detects_changes(tmp_path):
    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}"])
    run = Run.create(config, "r1")
    assert not stage_complete(run, 0, "rollout")
    run.store.write_parquet(pd.DataFrame({"a": [1]}), *output_parts(run, 0, "rollout"))
    assert not stage_complete(run, 0, "rollout")  # output without manifest: a crashed stage
    write_manifest(run, 0, "rollout", rows=1, timings={"total_s": 1.0})
    assert stage_complete(run, 0, "rollout")
    run.store.write_parquet(pd.DataFrame({"a": [1]}), *output_parts(run, 0, "score"))
    write_manifest(run, 0, "score", rows=1, timings={})
    assert stage_complete(run, 0, "score")
    run.store.write_parquet(pd.DataFrame({"a": [2]}), *output_parts(run, 0, "rollout"))  # input changed
    assert not stage_complete(run, 0, "score")


def test_local_source_edits_keep_stages_but_a_new_release_redoes_them(tmp_path):
    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}"])
    run = Run.create(config, "r1")
    run.store.write_parquet(pd.DataFrame({"a": [1]}), *output_parts(run, 0, "rollout"))
    manifest = write_manifest(run, 0, "rollout", rows=1, timings={})
    assert len(manifest["source_hash"]) == 12
    run.store.write_json(
        {**manifest, "source_hash": "edited-since"}, *run.parts(0, "rollout", "_manifest.json")
    )
    assert stage_complete(run, 0, "rollout")
    run.store.write_json({**manifest, "code_version": "0.0.1"}, *run.parts(0, "rollout", "_manifest.json"))
    assert not stage_complete(run, 0, "rollout")


def test_reopening_a_run_with_another_config_is_refused(tmp_path):
    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}"])
    Run.create(config, "r1")
    other = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}", "algo.beta=0.3"])
    try:
        Run.create(other, "r1")
    except ValueError as exc:
        assert "different config" in str(exc)
    else:
        raise AssertionError("a changed config must not reuse a run id")
    assert Run.open(str(tmp_path), "r1").config.config_hash() == config.config_hash()


def test_s3_store_sees_what_another_process_wrote_after_it_listed(moto_s3):
    """A run is written by several processes (flow, Ray workers) and watched by others: no stale listings."""
    import s3fs

    store = ArtifactStore(moto_s3.root)
    store.write_text("{}", "run", "events", "1.json")
    assert store.list("run", "events") == ["1.json"]
    other_process = s3fs.S3FileSystem(skip_instance_cache=True)
    other_process.pipe_file(f"{moto_s3.bucket}/runs/run/events/2.json", b"{}")
    assert store.list("run", "events") == ["1.json", "2.json"]
    assert store.exists("run", "events", "2.json")


def test_a_run_is_driven_by_one_process_at_a_time_and_a_dead_holders_lock_is_taken_over(synthetic_run):
    import socket
    import subprocess
    import sys

    from mappa.storage.run import LOCK

    with synthetic_run.lock():
        assert synthetic_run.store.exists(synthetic_run.run_id, LOCK)
        with pytest.raises(ValueError, match="being driven by another process .* delete"):
            with synthetic_run.lock():
                pass
    assert not synthetic_run.store.exists(synthetic_run.run_id, LOCK)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    stale = {"host": socket.gethostname(), "pid": int(dead.stdout), "token": "t", "since": "then"}
    synthetic_run.store.write_json(stale, synthetic_run.run_id, LOCK)
    with synthetic_run.lock():  # the process that held it is gone (killed, crashed)
        pass
    elsewhere = {**stale, "host": "another-host", "pid": 1}
    synthetic_run.store.write_json(elsewhere, synthetic_run.run_id, LOCK)
    with pytest.raises(ValueError, match="another-host"):
        with synthetic_run.lock():
            pass


def test_experiences_round_trip_through_parquet_as_typed_rows(tmp_path):
    from mappa.core.types import Experience
    from mappa.storage.frames import experiences_to_frame, frame_to_experiences
    from mappa.storage.store import ArtifactStore

    rows = [
        Experience("t0/1", "executor", (1, 2), (3, 4), (-0.5, -0.25), (-0.5, -0.2), (0.0, -0.05),
                   (0.0, 0.9), (0.9, 0.9), (1.0, 1.0), 9.0),
        Experience("t1/0", "solver", (5,), (6,), (-1.0,), (-1.0,), (0.0,), (0.2,), (0.2,), (-1.0,), 2.0),
    ]  # fmt: skip
    store = ArtifactStore(str(tmp_path))
    store.write_parquet(experiences_to_frame(rows), "experiences.parquet")
    frame = store.read_parquet("experiences.parquet")
    assert list(frame.columns)[:2] == ["action_id", "agent"] and len(frame) == 2
    assert frame_to_experiences(frame) == rows
    with pytest.raises(ValueError, match=r"lacks columns \['kl'\]"):
        frame_to_experiences(frame.drop(columns=["kl"]))
