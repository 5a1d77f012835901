"""`mappa rescore` on a finished run (a copy of the session's two-iteration MathChat run): another coach
(with a phase-aware schedule of templates) scores the stored trajectories into `iter-K/rescore/NAME/`, a
second call asks the coach nothing, a `--fallbacks-only` one keeps every verdict the run's coach gave, the
run's own scores, advantages and checkpoints stay as they were, and `mappa inspect --coaches` compares."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from mappa.cli import main
from mappa.stages import output_parts
from mappa.storage.run import Run

pytestmark = pytest.mark.slow
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def fingerprints(folder: Path) -> dict[str, str]:
    """Every file of the run that a re-scoring must not touch: scores, experiences, checkpoints, config."""
    watched = ("/score/", "/advantages/", "/update/", "checkpoints/")
    found = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if (
            path.is_file()
            and "_prefect" not in path.parts
            and (name == "config.yaml" or any(w in name for w in watched))
        ):
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def test_rescore_scores_again_for_free_leaves_the_run_alone_and_compares(
    mathchat_run, tmp_path, coach_server, capsys, monkeypatch
):
    from mappa import cli

    monkeypatch.setattr(cli.console, "width", 200)
    run, _, _ = mathchat_run
    root = tmp_path / "runs"
    shutil.copytree(Path(run.store.path(run.run_id)), root / run.run_id)
    before = fingerprints(root / run.run_id)
    coach = [f"coach.base_url={coach_server.base_url}", "coach.model=scripted-coach", "coach.max_retries=0"]
    coach.append("coach.schedule=[{until: 1, template: mathchat-reliability}, {template: mathchat}]")
    judge = ["rescore", run.run_id, "--root", str(root), "--as", "judge", "--set", "coach.type=openai"]
    judge += [part for setting in coach for part in ("--set", setting)]

    assert main(judge) == 0
    copy = Run.open(str(root), run.run_id)
    judged = [copy.store.read_parquet(*output_parts(copy, k, "rescore/judge")) for k in (0, 1)]
    actions = sum(int((frame["parse_status"] != "rule").sum()) for frame in judged)  # blank ones: by rule
    assert sum(coach_server.state.answered.values()) == actions
    for k in (0, 1):
        own = copy.store.read_parquet(*output_parts(copy, k, "score"))
        again = copy.store.read_parquet(run.run_id, f"iter-000{k}", "rescore", "judge", "scores.parquet")
        assert list(again.columns) == list(own.columns) and set(again["action_id"]) == set(own["action_id"])
        manifest = copy.read_manifest(k, "rescore/judge")
        assert manifest["coach_model"] == "scripted-coach" and manifest["rows"] == len(own)
        phase = "mathchat-reliability" if k == 0 else "mathchat"  # the schedule's template, on every row
        assert manifest["template"] == phase and set(again["template"]) == {phase}
    out = capsys.readouterr().out
    assert "coaches against the run's coach" in out and "spearman" in out and "auc_other" in out

    assert main(judge) == 0  # complete: skipped, nothing asked
    assert sum(coach_server.state.answered.values()) == actions
    assert main([*judge, "--set", "coach.temperature=0.7"]) == 2
    assert "made with other coach settings" in " ".join(capsys.readouterr().out.split())
    assert main(["rescore", run.run_id, "--root", str(root), "--as", "x", "--set", "algo.beta=0"]) == 2
    assert "changes the coach only" in capsys.readouterr().out

    again = ["rescore", run.run_id, "--root", str(root), "--as", "again", "--fallbacks-only"]
    assert main(again) == 0  # the run's rubric left nothing unscored: nothing to ask, every verdict kept
    for k in (0, 1):
        assert copy.read_manifest(k, "rescore/again")["fallbacks_rescored"] == 0
        kept = copy.store.read_parquet(*output_parts(copy, k, "rescore/again"))
        assert kept.equals(copy.store.read_parquet(*output_parts(copy, k, "score")))
    assert main([*judge, "--fallbacks-only"]) == 2
    assert "made without --fallbacks-only" in " ".join(capsys.readouterr().out.split())

    outcome = ["rescore", run.run_id, "--root", str(root), "--as", "outcome", "--iteration", "1"]
    assert main([*outcome, "--set", "coach.type=outcome"]) == 0
    assert not copy.has_manifest(0, "rescore/outcome") and copy.has_manifest(1, "rescore/outcome")
    assert fingerprints(root / run.run_id) == before  # the run's own artifacts are untouched

    capsys.readouterr()
    plot = tmp_path / "coaches.png"
    assert main(["inspect", run.run_id, "--root", str(root), "--coaches", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "judge" in out and "outcome" in out and plot.read_bytes().startswith(PNG_SIGNATURE)
