"""`mappa inspect` on a run written from hand-built artifacts (no model needed)."""

from pathlib import Path

from mappa.cli import main
from mappa.config import load_config
from mappa.core.types import ActionScore
from mappa.reporting import run_view
from mappa.stages import output_parts, write_manifest
from mappa.storage.frames import scores_to_frame, trajectories_to_frame
from mappa.storage.run import Run
from mappa.storage.store import ArtifactStore

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def write_run(tmp_path, trajectory) -> Run:
    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}"])
    run = Run.create(config, "r1")
    run.store.write_parquet(trajectories_to_frame([trajectory], 0), *output_parts(run, 0, "rollout"))
    write_manifest(run, 0, "rollout", rows=4, timings={"total_s": 1.0}, success_rate=1.0)
    scores = [
        ActionScore(a.id, "t1", a.agent, float(i * 3), f"why {i}", "rubric")
        for i, a in enumerate(trajectory.actions)
    ]
    run.store.write_parquet(scores_to_frame(scores), *output_parts(run, 0, "score"))
    return run


def test_iteration_rows_agent_stats_and_extremes(tmp_path, trajectory):
    run = write_run(tmp_path, trajectory)
    rows = run_view.iteration_rows(run)
    assert rows == [
        {
            "iteration": 0,
            "training success (sampled)": 1.0,
            "actions": 4,
            "mean coach score": 4.5,
            "finished stages": "rollout",
        }
    ]
    frame = run_view.scored_actions(run, 0)
    stats = run_view.agent_stats(frame).set_index("agent")
    assert stats.loc["executor", "actions"] == 2 and stats.loc["executor", "mean_score"] == 4.5
    low, high = run_view.extreme_actions(frame, count=1)
    assert low["action_id"].tolist() == ["t1/0"] and high["action_id"].tolist() == ["t1/3"]


def test_cli_prints_a_trajectory_and_names_a_missing_one(tmp_path, trajectory, capsys):
    write_run(tmp_path, trajectory)
    assert main(["inspect", "r1", "--root", str(tmp_path), "--trajectory", "t1"]) == 0
    out = capsys.readouterr().out
    assert "What is 2+2?" in out and "tool: exit 1" in out and "why 2" in out
    assert main(["inspect", "r1", "--root", str(tmp_path), "--trajectory", "t9"]) == 2
    assert "no trajectory or action t9" in capsys.readouterr().out
    assert main(["inspect", "r1", "--root", str(tmp_path), "--iteration", "0"]) == 0


def test_cli_plots_the_curves_of_a_local_run(synthetic_run, tmp_path, capsys):
    target = tmp_path / "plots" / "curves.png"
    argv = ["inspect", synthetic_run.run_id, "--root", synthetic_run.store.root, "--plot", str(target)]
    assert main(argv) == 0
    assert target.read_bytes().startswith(PNG_SIGNATURE)
    assert f"curves of 2 iteration(s): {target}" in capsys.readouterr().out


def test_cli_plots_the_curves_of_an_s3_run(synthetic_run, moto_s3, tmp_path, capsys):
    s3_root = moto_s3.root
    s3 = ArtifactStore(s3_root)
    s3.put_folder(Path(synthetic_run.store.path(synthetic_run.run_id)), synthetic_run.run_id)
    target = tmp_path / "s3-curves.png"
    assert main(["inspect", synthetic_run.run_id, "--root", s3_root, "--plot", str(target)]) == 0
    assert target.read_bytes().startswith(PNG_SIGNATURE)
    assert str(target) in capsys.readouterr().out


def test_cli_plot_of_a_run_without_a_finished_iteration_is_an_error(tmp_path, trajectory, capsys):
    write_run(tmp_path, trajectory)  # a rollout and scores, no update
    assert main(["inspect", "r1", "--root", str(tmp_path), "--plot", str(tmp_path / "c.png")]) == 2
    assert "run r1 has no finished iteration" in capsys.readouterr().out
    assert not (tmp_path / "c.png").exists()
