"""`mappa coach-check` on the session's finished tiny run: corruptions planted in each seat's first action,
replays with the run's own weights (Ray workers), scored by two coaches, the report written under the run;
a second check reuses the replays."""

import json
import shutil
from pathlib import Path

from mappa.blame import check as coach_check
from mappa.cli import main
from mappa.core.types import Trajectory
from mappa.storage.run import Run


def test_coach_check_replays_scores_and_reports(mathchat_run, tmp_path, capsys, monkeypatch):
    from mappa import cli

    monkeypatch.setattr(cli.console, "width", 200)
    run, _, _ = mathchat_run
    root = tmp_path / "runs"
    shutil.copytree(Path(run.store.path(run.run_id)), root / run.run_id)
    command = ["coach-check", run.run_id, "--root", str(root), "--problems", "2"]
    command += ["--coach", "rubric", "--coach", "outcome"]

    real_stage_coach = coach_check.stage_coach
    released = []
    real_release = coach_check.release_workers
    monkeypatch.setattr(coach_check, "release_workers", lambda *a: released.append(a[1]) or real_release(*a))
    assert main(command) == 0
    assert released == [["coach-check-rubric"], ["coach-check-outcome"]]  # each coach's worker, once scored
    copy = Run.open(str(root), run.run_id)
    report_parts = (run.run_id, "coach-check", "iter-0000", "report.json")
    report = json.loads(copy.store.read_text(*report_parts))
    assert report["problems"] == 2 and report["upstream_changed"] == 0
    assert {(row["coach"], row["seat"]) for row in report["rows"]} == {
        (coach, seat) for coach in ("rubric", "outcome") for seat in ("solver", "executor", "verifier")
    }
    outcome = [row for row in report["rows"] if row["coach"] == "outcome"]
    assert all(row["blame_accuracy"] == 0.0 for row in outcome)  # the floor: every seat changes alike
    replays = copy.store.read_parquet(run.run_id, "coach-check", "iter-0000", "replays.parquet")
    originals = {t for t in replays["trajectory_id"] if t.endswith(":original")}
    assert len(originals) == 2 * 3  # one per trajectory and seat
    printed = capsys.readouterr().out
    assert "blame acc." in printed and "rubric" in printed

    def no_replays(*args) -> list[Trajectory]:
        raise AssertionError("the stored replays should have been reused")

    def no_coach(*args, **kwargs):
        raise AssertionError("the stored scores of the same coach and actions should have been reused")

    monkeypatch.setattr(coach_check, "run_replays", no_replays)
    monkeypatch.setattr(coach_check, "stage_coach", no_coach)
    assert main(command) == 0  # the same plan and coaches: the stored replays and scores, read back
    assert json.loads(copy.store.read_text(*report_parts)) == report
    asked = []
    monkeypatch.setattr(
        coach_check, "stage_coach", lambda *a, **k: asked.append(a[1]) or real_stage_coach(*a, **k)
    )
    other = [*command[:-4], "--coach", "rubric:coach.type=rubric coach.use_ground_truth=false"]
    assert main(other) == 0  # another coach under the same name: scored anew
    assert [coach.use_ground_truth for coach in asked] == [False]
