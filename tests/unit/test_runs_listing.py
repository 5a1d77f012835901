"""`mappa runs` (and `mappa inspect` without a run id): the runs under a root, newest first, with where each
stands; and the errors of a run that is not there, which name the absolute folder searched (a relative
--root is relative to the working directory), and of a stored config that does not validate."""

import pytest

from mappa.cli import main
from mappa.config import load_config
from mappa.reporting.run_list import list_runs
from mappa.stages import output_parts, write_manifest
from mappa.storage.run import Run


def make_run(root, run_id: str, iterations: int = 3) -> Run:
    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={root}", f"iterations={iterations}"])
    return Run.create(config, run_id)


def finish_update(run: Run, iteration: int) -> None:
    run.store.write_json({}, *output_parts(run, iteration, "update"))
    write_manifest(run, iteration, "update", 1, {"total_s": 1.0})


@pytest.fixture
def root(tmp_path):
    """`old`: iteration 0 finished and its checkpoint evaluated, then iteration 1's score failed; `new`
    (started later): nothing finished; `broken`: a config this mappa refuses, no events."""
    root = tmp_path / "runs"
    old = make_run(root, "old")
    for stage in ("rollout", "score", "advantages", "update"):
        old.record_event(0, stage, "started")
        old.record_event(0, stage, "finished")
    finish_update(old, 0)
    old.record_event(0, "evaluate", "finished")
    old.record_event(-1, "evaluate", "finished")
    old.record_event(0, "update", "agent-finished", agent="solver")  # another kind: not a stage finishing
    old.record_event(1, "rollout", "finished")
    old.record_event(1, "score", "failed", error="boom")
    new = make_run(root, "new", iterations=5)
    new.record_event(0, "rollout", "started")
    broken = make_run(root, "broken")
    text = broken.store.read_text("broken", "config.yaml")
    broken.store.write_text(text.replace("baseline: none", "baseline: sideways"), "broken", "config.yaml")
    (root / "not-a-run").mkdir()
    return root


def test_runs_are_listed_newest_first_with_where_each_stands(root):
    runs = {run.run_id: run for run in list_runs(str(root))}
    assert [run.run_id for run in list_runs(str(root))] == ["new", "old", "broken"]  # no events: last
    old = runs["old"]
    assert (old.config, old.finished_iterations, old.configured_iterations) == ("mathchat-cpu", 1, 3)
    assert old.last_finished == "iter 1 rollout" and old.failed == "iter 1 score"
    assert old.evaluations == "base, iter 0"
    assert old.started is not None and old.started <= runs["new"].started
    assert (runs["new"].finished_iterations, runs["new"].configured_iterations) == (0, 5)
    assert runs["new"].last_finished is None and runs["new"].evaluations is None
    assert runs["broken"].config == "mathchat-cpu" and runs["broken"].started is None  # read, not validated


def test_mappa_runs_and_inspect_without_a_run_id_print_the_list(root, capsys):
    from mappa.cli.render import console

    console.width = 300
    try:
        assert main(["runs", "--root", str(root)]) == 0
        listed = capsys.readouterr().out
        assert main(["inspect", "--root", str(root)]) == 0
        assert capsys.readouterr().out == listed
    finally:
        console.width = 80
    assert f"runs under {root}, newest first" in listed
    assert listed.index("new") < listed.index("old") < listed.index("broken")
    assert "iter 1 rollout; then failed in iter 1 score" in listed and "base, iter 0" in listed
    assert "1 / 3" in listed and "0 / 5" in listed and "not-a-run" not in listed
    assert main(["inspect", "--root", str(root), "--iteration", "2"]) == 2
    assert "--iteration needs a run id: mappa inspect RUN_ID --iteration" in capsys.readouterr().out


def test_a_relative_root_is_shown_as_the_absolute_folder_searched(root, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", "olt", "--root", "runs"]) == 2
    out = capsys.readouterr().out
    assert f"no run olt under {root} (--root runs)" in out and "did you mean old?" in out
    assert "`mappa runs --root runs` lists the runs there" in out
    assert main(["runs", "--root", "elsewhere"]) == 2
    assert f"no folder {tmp_path / 'elsewhere'} (--root elsewhere)" in capsys.readouterr().out
    assert main(["resume", "old", "--root", "elsewhere"]) == 2
    assert f"the folder {tmp_path / 'elsewhere'} (--root elsewhere) does not exist" in capsys.readouterr().out


def test_a_stored_config_that_does_not_validate_is_one_clean_error_naming_its_file(root, capsys):
    for argv in (["inspect", "broken"], ["inspect", "broken", "--evaluations"], ["resume", "broken"]):
        assert main([*argv, "--root", str(root)]) == 2
        out = capsys.readouterr().out
        assert f"{root / 'broken' / 'config.yaml'} is not valid" in out and "algo.baseline" in out
        assert "Value error" not in out and "Traceback" not in out


def test_a_resume_setting_that_does_not_validate_is_named_as_written_with_set(root, capsys):
    assert main(["resume", "old", "--root", str(root), "--set", "rollout.samples_per_problem=abc"]) == 2
    out = capsys.readouterr().out
    assert "rollout.samples_per_problem: Input should be a valid integer" in out
    assert "(written with --set)" in out and "Value error" not in out
    assert main(["resume", "old", "--root", str(root), "--set", "algo.betaa=1"]) == 2
    assert "unknown field, from --set; did you mean `algo.beta`?" in capsys.readouterr().out
