"""The `mappa` command fails fast, before Ray or Prefect start, with errors that name the problem."""

from mappa.cli import main


def test_bad_override_names_the_field(capsys):
    assert main(["train", "configs/mathchat-cpu.yaml", "--set", "algo.beta=-1"]) == 2
    out = capsys.readouterr().out
    assert "algo.beta" in out and "greater than or equal to 0" in out


def test_missing_config_file(capsys):
    assert main(["train", "configs/nope.yaml"]) == 2
    assert "does not exist" in capsys.readouterr().out


def test_missing_data_file_is_reported_before_any_work(tmp_path, capsys):
    code = main(["train", "configs/mathchat-cpu.yaml", "--set", f"env.train_data={tmp_path}/none.jsonl"])
    assert code == 2
    assert "none.jsonl" in capsys.readouterr().out


def test_missing_model_folder(tmp_path, capsys):
    args = ["--set", "engine.shared=false", "--set", f"agents.solver.model={tmp_path}/no-model"]
    assert main(["train", "configs/mathchat-cpu.yaml", *args]) == 2
    out = capsys.readouterr().out
    assert "no-model" in out and "no such folder" in out


def test_a_shared_engine_with_another_model_for_one_agent_says_how_to_go_on(tmp_path, capsys):
    code = main(["train", "configs/mathchat-cpu.yaml", "--set", f"agents.solver.model={tmp_path}"])
    assert code == 2
    assert "engine.shared=false" in capsys.readouterr().out


def test_a_run_without_a_working_sandbox_stops_before_it_starts(monkeypatch, capsys):
    """Where bubblewrap does not work, a run refuses (one line, the fix named) unless it asks for
    `sandbox.isolation: none`, before any model or Ray starts."""
    from mappa.sandbox import runner

    monkeypatch.setattr(runner, "_probe_bwrap", lambda: (False, "`bwrap` is not on PATH"))
    assert main(["train", "configs/mathchat-cpu.yaml", "--set", "storage.root=/nonexistent/runs"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "apt-get install bubblewrap" in out and "sandbox.isolation: none" in out


def test_run_ids_that_could_leave_the_storage_root_are_refused(tmp_path, capsys):
    for bad in ("../escape", ".hidden", "a/b", "x" * 129, ""):
        code = main(
            ["train", "configs/mathchat-cpu.yaml", "--run-id", bad, "--set", f"storage.root={tmp_path}"]
        )
        assert code == 2, bad
        assert "is not allowed" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_a_storage_root_that_cannot_be_written_is_named_before_any_work(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["train", "configs/mathchat-cpu.yaml", "--set", f"storage.root={blocker}/runs"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert f"storage root {blocker}/runs is not writable" in out and "permissions" in out


def test_resuming_evaluating_or_inspecting_a_missing_run_is_refused_before_prefect(tmp_path, capsys):
    for command in ("resume", "evaluate", "inspect"):
        assert main([command, "no-such-run", "--root", str(tmp_path)]) == 2, command
        assert "no run no-such-run" in capsys.readouterr().out


def test_a_run_id_taken_by_another_config_is_refused_before_prefect(tmp_path, capsys, monkeypatch):
    from mappa import resources
    from mappa.config import load_config
    from mappa.storage.run import Run

    # memory and disk to spare: on a machine busy with a run, a pre-flight would refuse first
    monkeypatch.setattr(resources, "available_memory_bytes", lambda: 1e12)
    monkeypatch.setattr(resources, "free_disk_bytes", lambda root: 1e13)

    Run.create(load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}"]), "taken")
    args = ["--run-id", "taken", "--set", f"storage.root={tmp_path}", "--set", "seed=7"]
    assert main(["train", "configs/mathchat-cpu.yaml", *args]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "was started with a different config" in out and "mappa resume taken" in out
