"""`benchmarks/blame.py --markdown`: the README/docs table of blame results, rendered from the JSON (one
row per env, coach and corrupted seat; per-corruption accuracy; innocent seats up- and downstream)."""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
from blame import compact, markdown  # noqa: E402


def test_rows_come_from_the_records_as_written(tmp_path):
    record = {
        "env": "mathchat",
        "coach": "facts-step",
        "seat": "executor",
        "pairs": 30,
        "blame_accuracy": 0.7,
        "by_corruption": {"prints-wrong": {"pairs": 6, "blame_accuracy": 0.5}},
        "innocent_penalty_upstream": 0.0,
        "innocent_penalty_downstream": 0.956,
    }
    first = {**record, "seat": "solver", "by_corruption": {}, "innocent_penalty_upstream": None}
    path = tmp_path / "blame.json"
    path.write_text(json.dumps({"records": [first, record]}))
    header, rule, solver, executor = markdown([str(path)]).splitlines()
    assert header.count("|") == rule.count("|") == 9
    assert solver == "| mathchat | `facts-step` | solver | 30 | 0.70 | - | - | +0.96 |"
    assert (
        executor
        == "| mathchat | `facts-step` | executor | 30 | 0.70 | prints-wrong 0.50 (6) | +0.00 | +0.96 |"
    )
    header, rule, row = compact([str(path)]).splitlines()
    assert row == "| mathchat | `facts-step` | solver / executor | 0.70 / 0.70 | - / +0.00 | +0.96 / +0.96 |"
