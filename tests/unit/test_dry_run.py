"""`mappa train CONFIG --dry-run`: the resolved config and the pre-flight's verdict, with no model loaded,
nothing started and nothing written (`mappa.cli.dry_run`)."""

import subprocess
import sys

from mappa.cli import main
from mappa.config import dump_config, load_config

CPU = "configs/mathchat-cpu.yaml"


def test_a_dry_run_prints_the_config_as_stored_and_passes_without_writing(tmp_path, capsys):
    root = f"storage.root={tmp_path}/runs"
    assert main(["train", CPU, "--set", root, "--set", "coach.type=outcome", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert dump_config(load_config(CPU, [root, "coach.type=outcome"])) in out  # what config.yaml would hold
    assert "scoring: generate" in out and "pre-flight: passed" in out
    assert list(tmp_path.iterdir()) == []  # not even the storage root


def test_a_dry_run_that_fails_ends_with_the_error_line_and_exit_2(tmp_path, capsys):
    code = main(["train", CPU, "--set", f"env.train_data={tmp_path}/none.jsonl", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 2 and "error:" in out and "none.jsonl" in out and "pre-flight: passed" not in out


def test_an_invalid_config_is_refused_before_anything_is_printed(capsys):
    assert main(["train", CPU, "--set", "coach.scorng=expected", "--dry-run"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("error:") and "did you mean `coach.scoring`?" in out


def test_a_model_not_prepared_yet_is_named_not_prepared(tmp_path, capsys, monkeypatch):
    from mappa import resources
    from mappa.models import prepare

    def refuse(*args, **kwargs):
        raise AssertionError("a dry run must not prepare a model nor read one's folder")

    monkeypatch.setattr(prepare, "needs_preparing", lambda spec, cache_dir=None: True)
    monkeypatch.setattr(prepare, "resolve_model", refuse)
    monkeypatch.setattr(resources, "check_resources", refuse)
    assert main(["train", CPU, "--set", f"storage.root={tmp_path}", "--dry-run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "agent solver: model smollm2 is not prepared yet" in out and "mappa models prepare smollm2" in out
    assert "resources: disk and memory not estimated" in out


def test_a_storage_root_that_cannot_be_written_is_named(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["train", CPU, "--set", f"storage.root={blocker}/runs", "--dry-run"]) == 2
    assert f"storage root {blocker}/runs is not writable" in " ".join(capsys.readouterr().out.split())


def test_a_run_id_taken_by_another_config_is_refused(tmp_path, capsys, monkeypatch):
    from mappa.storage.run import Run

    Run.create(load_config(CPU, [f"storage.root={tmp_path}"]), "taken")
    args = ["--run-id", "taken", "--set", f"storage.root={tmp_path}", "--set", "seed=7", "--dry-run"]
    assert main(["train", CPU, *args]) == 2
    assert "was started with a different config" in " ".join(capsys.readouterr().out.split())


def test_a_dry_run_imports_neither_prefect_nor_ray(tmp_path):
    # the process reads the machine's real free memory: the memory pre-flight is told there is plenty (a
    # busy machine would fail it; this test is about imports)
    script = (
        "import sys; from mappa import resources; resources.available_memory_bytes = lambda: 1e12; "
        "from mappa.cli import main; "
        f"code = main(['train', {CPU!r}, '--dry-run', '--set', 'storage.root={tmp_path}/runs']); "
        "print(code, sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'ray', 'vllm'}))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout[-2000:] + done.stderr[-2000:]
