"""The learning benchmark's held-out sets (`benchmarks/learning.py --also-eval`): one evaluation file for the
config's split and every extra file, each set's problems kept for the report (their ids and kinds)."""

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from learning import check_models, common_overrides  # noqa: E402

from mappa.envs.mathchat.problems import load_problems  # noqa: E402

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "mathchat-cpu-learn.yaml"


def _args(root: Path, *also_eval: Path) -> argparse.Namespace:
    return argparse.Namespace(
        config=str(CONFIG), set=[], iterations=None, eval_data=None, eval_problems=8,
        also_eval=[str(p) for p in also_eval], root=str(root),
    )  # fmt: skip


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_without_extra_files_the_runs_evaluate_on_the_config_split(tmp_path):
    overrides, sets = common_overrides(_args(tmp_path))
    assert list(sets) == ["heldout"] and len(sets["heldout"]) == 8
    assert not any(o.startswith("env.eval_data=") for o in overrides)
    assert not (tmp_path / "eval-sets.jsonl").exists()


def test_an_extra_file_is_evaluated_after_the_split_in_one_file_and_reported_by_its_ids(tmp_path):
    extra = _write(tmp_path / "mine.jsonl", [{"id": f"m{i}", "problem": f"What is {i} + 1?", "answer": i + 1}
                                             for i in range(3)])  # fmt: skip
    overrides, sets = common_overrides(_args(tmp_path / "root", extra))
    assert list(sets) == ["heldout", "mine"] and [p.id for p in sets["mine"]] == ["m0", "m1", "m2"]
    combined = tmp_path / "root" / "eval-sets.jsonl"
    assert f"env.eval_data={combined}" in overrides and "rollout.eval_problems=11" in overrides
    problems = load_problems(combined)
    assert [p.id for p in problems] == [p.id for p in sets["heldout"] + sets["mine"]]
    assert (problems[-1].question, problems[-1].answer) == ("What is 2 + 1?", "3")


def test_an_extra_file_whose_ids_repeat_the_splits_is_refused(tmp_path):
    _, sets = common_overrides(_args(tmp_path))
    taken = sets["heldout"][0].id
    clash = _write(tmp_path / "clash.jsonl", [{"id": taken, "problem": "1 + 1?", "answer": 2}])
    with pytest.raises(SystemExit, match="share problem ids"):
        common_overrides(_args(tmp_path, clash))


def test_a_coach_model_that_is_not_prepared_stops_the_benchmark_before_any_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MAPPA_MODEL_CACHE", str(tmp_path / "models"))
    (tmp_path / "models").mkdir()
    args = argparse.Namespace(config=str(CONFIG), set=[], sources=["llm"])
    for agent in ("solver", "executor", "verifier"):  # agents on a local folder: nothing is prepared here
        args.set.append(f"agents.{agent}.model={_hf_folder(tmp_path / 'agent')}")
    with pytest.raises(SystemExit, match=r"source llm: model 'qwen2.5-coder-0.5b' is not prepared .*"
                                         r"run `mappa models prepare qwen2.5-coder-0.5b`"):  # fmt: skip
        check_models(args, [f"storage.root={tmp_path / 'runs'}"])
    outcome = argparse.Namespace(**{**vars(args), "sources": ["outcome"]})
    check_models(outcome, [f"storage.root={tmp_path / 'runs'}"])  # no coach model: the pre-flight passes


def _hf_folder(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    (path / "config.json").write_text("{}")
    return path
