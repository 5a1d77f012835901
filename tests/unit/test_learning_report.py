"""The learning benchmark's per-kind report and targets (`benchmarks/learning_report.py`) on a tiny fixture,
and the test file it evaluates in final runs (committed before any tuning: its hash, balance, splits)."""

import collections
import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest

from mappa.core.types import Problem
from mappa.envs.mathchat import SPEC as MATHCHAT
from mappa.envs.mathchat.kinds import problem_kind
from mappa.envs.overlap import find_overlap

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
from learning import TEST_FILE, TEST_SHA256, VALIDATION_FILE  # noqa: E402
from learning_report import kind_report, kinds_of, markdown_tables, set_targets  # noqa: E402

from mappa.core.lift_stats import lifts_by_source  # noqa: E402

PROBLEMS = [Problem(f"a{i}", f"What is {i + 2} + 3?", str(i + 5)) for i in range(4)] + [
    Problem(f"m{i}", f"Liam has {i + 2} bags with 3 pens in each bag. How many pens?", str(3 * i + 6))
    for i in range(4)
]
BASE = np.array([0, 0, 0, 0, 1, 1, 1, 1])  # additions wrong, multiplications right


def test_kinds_label_each_problem_by_operation_and_form():
    assert kinds_of(PROBLEMS) == {
        "operation": ["add"] * 4 + ["multiply"] * 4,
        "form": ["expression"] * 4 + ["word"] * 4,
    }


def runs_of(llm: list[int]) -> dict:
    return {**{("llm", s): np.array(llm) for s in range(3)}, **{("outcome", s): BASE for s in range(3)}}


def test_a_lift_on_every_kind_meets_the_targets():
    runs = runs_of([1, 1, 1, 1, 1, 1, 1, 1])  # every seed: +4 of 8 over the base, outcome-only +0
    kinds = kind_report(kinds_of(PROBLEMS), BASE, runs)
    assert kinds["operation"]["add"]["sources"]["llm"]["vs_base"]["mean"] == 1.0
    assert kinds["operation"]["multiply"]["sources"]["llm"]["vs_base"]["mean"] == 0.0
    assert kinds["regressions"] == []
    target = set_targets(lifts_by_source(BASE, runs), kinds)
    assert target["coach"] == "llm" and target["met"]
    assert target["over_base"]["mean"] == 0.5 and target["over_base"]["seed_ci95"] == [0.5, 0.5]
    assert target["checks"] == {"over_base": True, "over_outcome": True, "no_kind_worse": True}


def test_a_lift_that_costs_a_kind_is_a_regression_not_a_lift():
    runs = runs_of([1, 1, 1, 1, 1, 0, 0, 0])  # +4 additions, -3 multiplications: +12.5 points overall
    kinds = kind_report(kinds_of(PROBLEMS), BASE, runs)
    regressed = [(r["grouping"], r["kind"], r["source"]) for r in kinds["regressions"]]
    assert regressed == [("operation", "multiply", "llm"), ("form", "word", "llm")]
    target = set_targets(lifts_by_source(BASE, runs), kinds)
    assert target["over_base"]["mean"] == 0.125 and target["checks"]["over_base"]
    assert not target["checks"]["no_kind_worse"] and not target["met"]


def test_the_markdown_tables_are_the_json_figures():
    runs = runs_of([1, 1, 1, 1, 1, 0, 0, 0])
    lifts, kinds = lifts_by_source(BASE, runs), kind_report(kinds_of(PROBLEMS), BASE, runs)
    summary = [{"source": "llm", "seed": 0, "iteration": 0, "heldout_success_flexible": 0.5}]
    summary += [
        {"source": s, "seed": k, "iteration": 3, "heldout_success_flexible": v}
        for s, v in (("llm", 0.625), ("outcome", 0.5))
        for k in range(3)
    ]
    report = {
        "eval_sets": {"tiny": 8},
        "set_roles": {"tiny": "test"},
        "summary": summary,
        "lifts": {"correct_flexible": lifts},
        "kinds": kinds,
        "targets": {"tiny": set_targets(lifts, kinds)},
    }
    table = markdown_tables(report)
    # +4 of 8 additions, -3 multiplications: +12.5 points on every seed; 4 gained and 3 lost per seed
    assert "| tiny (test, 8) | `llm` | 50.0% -> 62.5% / 62.5% / 62.5% | +12.5 [" in table
    assert "[+12.5, +12.5] | 12 / 9 |" in table
    (multiply,) = [line for line in table.splitlines() if line.startswith("| multiply | 4 | -75.0 [")]
    assert multiply.endswith("] **worse** | +0.0 [+0.0, +0.0] |")  # the kind that regressed is marked
    assert table.rstrip().endswith("| tiny | `llm` | met | met | missed | no |")


def test_one_seed_never_meets_a_target():
    runs = {("llm", 0): np.ones(8), ("outcome", 0): BASE}
    target = set_targets(lifts_by_source(BASE, runs), kind_report(kinds_of(PROBLEMS), BASE, runs))
    assert target["over_base"]["seed_ci95"] is None and not target["met"]


def test_the_test_file_is_the_one_committed_before_tuning():
    assert hashlib.sha256(TEST_FILE.read_bytes()).hexdigest() == TEST_SHA256
    assert TEST_SHA256 in (REPO / "BENCHMARKS.md").read_text()  # recorded where results are read


def test_the_test_file_is_balanced_over_kinds_and_shares_nothing_with_training():
    problems = MATHCHAT.load_problems(str(TEST_FILE))
    kinds = collections.Counter(problem_kind(p) for p in problems)
    assert len(problems) == 256 and len(kinds) == 12  # 4 operations x 3 forms
    assert min(kinds.values()) >= 21
    train = MATHCHAT.load_problems("builtin:train-level1-mix")
    assert find_overlap(train, problems) == []
    assert not {p.id for p in problems} & {p.id for p in MATHCHAT.load_problems(str(VALIDATION_FILE))}


@pytest.mark.parametrize("path", [TEST_FILE, VALIDATION_FILE])
def test_every_answer_of_the_held_out_files_is_an_integer(path):
    for problem in MATHCHAT.load_problems(str(path)):
        assert problem.answer.lstrip("-").isdigit(), problem
