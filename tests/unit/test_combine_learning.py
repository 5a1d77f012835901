"""Combining learning-benchmark results of separate invocations (`benchmarks/combine_learning.py`): runs
paired by problem and seed from the files' per-problem results; files of other experiments refused."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from combine_learning import main  # noqa: E402

from mappa.core.lift_stats import as_bits, from_bits  # noqa: E402

IDS = ["p0", "p1", "p2", "p3"]
BASE = "0011"


def _result(path: Path, runs: dict[str, str], base: str = BASE, iterations: int = 3, **extra) -> str:
    """A learning.py JSON with one held-out set: runs {name: flexible bits}, strict success all 0."""
    per_problem = {
        "ids": IDS,
        "correct_flexible": {"base": base, **runs},
        "correct_boxed": {"base": "0000", **{name: "0000" for name in runs}},
    }
    report = {
        "settings": {"config": "/x/configs/mathchat-cpu-learn.yaml", "iterations": iterations, "set": [],
                     "eval_data": None, "eval_problems": None},
        "eval_sets": {"heldout": len(IDS)},
        "run_sources": {name: name.split("-")[1] for name in runs},
        "per_problem": per_problem,
        **extra,
    }  # fmt: skip
    path.write_text(json.dumps(report))
    return str(path)


def test_runs_of_two_files_are_paired_by_seed_against_outcome_only(tmp_path, capsys):
    llm = _result(tmp_path / "llm.json", {"learning-llm-s0": "1011", "learning-llm-s1": "1111"})
    outcome = _result(
        tmp_path / "outcome.json", {"learning-outcome-s1": "0111", "learning-outcome-s2": "0011"}
    )
    assert main([llm, outcome, "--out", str(tmp_path / "both.json")]) == 0
    lifts = json.loads((tmp_path / "both.json").read_text())["lifts"]["heldout"]["correct_flexible"]
    assert lifts["llm"]["seeds"] == [0, 1] and lifts["llm"]["vs_base"]["mean"] == pytest.approx(0.375)
    assert lifts["llm"]["vs_base"]["gained"] == [1, 2] and lifts["llm"]["vs_base"]["lost"] == [0, 0]
    assert lifts["outcome"]["seeds"] == [1, 2] and lifts["outcome"]["vs_base"]["per_seed"] == [0.25, 0.0]
    against = lifts["llm"]["vs_outcome"]  # seed 1 only: 1111 against 0111
    assert against["seeds"] == [1] and against["mean"] == pytest.approx(0.25)
    assert "llm" in capsys.readouterr().out

    # the tables README shows, from the combined JSON: llm's seeds 0 and 1, +25 and +50 points over the base
    assert main([str(tmp_path / "both.json"), "--markdown"]) == 0
    table = capsys.readouterr().out.splitlines()
    llm_row = next(line for line in table if line.startswith("| heldout | `llm` |"))
    assert llm_row.startswith("| heldout | `llm` | 0, 1 | +37.5 [") and "| 3 / 0 | +25.0 [" in llm_row
    assert "[one seed] |" in llm_row  # against outcome-only on seed 1 alone: no interval over seeds


def test_a_file_without_per_problem_results_names_the_rerun(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"settings": {}, "eval_sets": {"heldout": 4}, "run_sources": {}}))
    with pytest.raises(SystemExit, match="old.json has no per-problem results .* rerun its learning.py"):
        main([str(old)])


def test_files_of_different_experiments_or_bases_are_refused(tmp_path):
    llm = _result(tmp_path / "llm.json", {"learning-llm-s0": "1011"})
    longer = _result(tmp_path / "longer.json", {"learning-outcome-s0": "0011"}, iterations=4)
    with pytest.raises(SystemExit, match=r"trained differently \(iterations\)"):
        main([llm, longer])
    bf16 = _result(tmp_path / "bf16.json", {"learning-outcome-s0": "0011"}, precision={"trainer_bf16": True})
    with pytest.raises(SystemExit, match=r"trained differently \(precision\)"):
        main([llm, bf16])
    other_base = _result(tmp_path / "other.json", {"learning-outcome-s0": "0011"}, base="0111")
    with pytest.raises(SystemExit, match="the base team answered 'heldout' differently"):
        main([llm, other_base])
    rerun = _result(tmp_path / "rerun.json", {"learning-llm-s0": "1111"})
    with pytest.raises(SystemExit, match="run learning-llm-s0 answered 'heldout' differently"):
        main([llm, rerun])


def test_bits_round_trip_and_refuse_other_characters():
    assert as_bits(from_bits("0110")) == "0110"
    with pytest.raises(ValueError, match="string of 0 and 1"):
        from_bits("01x0")
