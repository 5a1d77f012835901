"""One figure from several learning-benchmark results (`benchmarks/plot_learning.py`): rows of separate files
merged per held-out set, and files that disagree on the base or a seed refused."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from plot_learning import collect, main  # noqa: E402


def _result(path: Path, source: str, finals: dict[int, float], base: float = 0.25, blind: float = 0.5) -> str:
    def rows(base_value: float, offset: float) -> list[dict]:
        out = []
        for seed, value in finals.items():
            for iteration, success in ((0, base_value), (3, value + offset)):
                out.append({"source": source, "seed": seed, "iteration": iteration, "heldout_success": 0.0,
                            "heldout_success_flexible": success, "heldout_n": 4})  # fmt: skip
        return out

    report = {
        "settings": {"config": "configs/mathchat-cpu-learn.yaml", "iterations": 3},
        "eval_sets": {"heldout": 4, "blind": 4},
        "summary": rows(base, 0.0),
        "other_sets": {"blind": {"summary": rows(blind, 0.25)}},
    }
    path.write_text(json.dumps(report))
    return str(path)


def test_files_of_other_seeds_and_sources_share_one_figure(tmp_path):
    llm = _result(tmp_path / "llm.json", "llm", {0: 0.5, 1: 0.75})
    outcome = _result(tmp_path / "outcome.json", "outcome", {2: 0.25})
    base, after = collect([llm, outcome])
    assert base == {"heldout": 0.25, "blind": 0.5}
    assert after["heldout"] == {"llm": {0: 0.5, 1: 0.75}, "outcome": {2: 0.25}}
    assert after["blind"]["llm"] == {0: 0.75, 1: 1.0}
    assert main([llm, outcome, "--out", str(tmp_path / "fig.png")]) == 0
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_a_different_base_or_a_seed_read_twice_differently_is_refused(tmp_path):
    llm = _result(tmp_path / "llm.json", "llm", {0: 0.5})
    with pytest.raises(SystemExit, match="the base team's success on 'heldout' is 0.5000 here and 0.2500"):
        collect([llm, _result(tmp_path / "other.json", "outcome", {0: 0.5}, base=0.5)])
    with pytest.raises(SystemExit, match="llm seed 0 on 'heldout' is 0.7500 here and 0.5000"):
        collect([llm, _result(tmp_path / "again.json", "llm", {0: 0.75})])
