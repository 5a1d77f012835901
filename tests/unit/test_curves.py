"""Training curves from a hand-written run folder: hand-checked values, the PNG, the empty-run error."""

import io
import math

import pandas as pd
import pytest

from mappa.config import load_config
from mappa.reporting.curves import plot_curves
from mappa.storage.history import COLUMNS, run_history
from mappa.storage.run import Run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_one_row_per_finished_iteration_and_agent(synthetic_run):
    frame = run_history(synthetic_run)
    assert list(frame.columns) == list(COLUMNS)
    assert frame[["iteration", "agent"]].values.tolist() == [
        [0, "executor"], [0, "solver"], [0, "verifier"], [1, "executor"], [1, "solver"], [1, "verifier"],
    ]  # fmt: skip
    rows = frame.set_index(["iteration", "agent"])
    # iteration 0: solver scored 2 and 4, executor 6, 8, 10 (population std), verifier 5 and frozen
    assert rows.loc[(0, "solver"), "mean_score"] == 3.0 and rows.loc[(0, "solver"), "std_score"] == 1.0
    assert rows.loc[(0, "executor"), "mean_score"] == 8.0
    assert rows.loc[(0, "executor"), "std_score"] == pytest.approx(math.sqrt(8 / 3))
    assert rows.loc[(0, "executor"), "actions"] == 3 and rows.loc[(0, "executor"), "max_score"] == 10.0
    assert rows.loc[(1, "executor"), "std_score"] == 0.0 and rows.loc[(1, "solver"), "mean_score"] == 5.0
    trainer = rows.loc[[(0, "solver"), (0, "executor"), (1, "solver"), (1, "executor")]]
    assert trainer["loss"].tolist() == pytest.approx([0.5, 1.5, 0.4, 1.4])
    assert trainer["kl"].tolist() == pytest.approx([0.001, 0.001, 0.002, 0.002])
    assert trainer["clip_fraction"].tolist() == pytest.approx([0.1] * 4)
    assert trainer["tokens_per_s"].tolist() == [100.0, 200.0, 100.0, 200.0]
    assert frame.groupby("iteration")["success_rate"].unique().map(list).tolist() == [[0.25], [0.5]]
    verifier = rows.loc[(0, "verifier")]
    assert verifier["mean_score"] == 5.0 and math.isnan(verifier["kl"]) and math.isnan(verifier["loss"])


def test_png_is_written_to_a_path_and_to_a_file(synthetic_run, tmp_path):
    frame = run_history(synthetic_run)
    path = tmp_path / "curves.png"
    plot_curves(frame, path, title="synthetic")
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000
    buffer = io.BytesIO()
    plot_curves(frame[frame["iteration"] == 0], buffer)  # one iteration: points, not an empty plot
    assert buffer.getvalue().startswith(PNG_SIGNATURE) and len(buffer.getvalue()) > 10_000


def test_a_run_without_a_finished_iteration_is_a_clear_error(tmp_path):
    config = load_config("configs/mathchat-cpu.yaml", [f"storage.root={tmp_path}"])
    run = Run.create(config, "empty")
    with pytest.raises(ValueError, match="run empty has no finished iteration"):
        run_history(run)
    with pytest.raises(ValueError, match="no curves to plot"):
        plot_curves(pd.DataFrame(columns=list(COLUMNS)), tmp_path / "x.png")
