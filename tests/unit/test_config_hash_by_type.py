"""Existing runs keep their config hash: a config with each built-in coach type and each built-in baseline
estimator hashes as it did before `coach.type` and `algo.baseline` became registry names (the expected
values were computed on the commit before that change, cf2b646, from these same dicts)."""

import pytest

from mappa.config import validate_config

SEATS = {seat: {"model": "m"} for seat in ("solver", "executor", "verifier")}
DSBENCH_SEATS = {seat: {"model": "m"} for seat in ("data_engineer", "modeler", "analyst")}
ENDPOINT = {"base_url": "http://127.0.0.1:8000/v1", "model": "qwen"}


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({}, "99d4f8c6bac507b7"),
        ({"coach": {"type": "local"}}, "99d4f8c6bac507b7"),
        ({"coach": {"type": "local", "scoring": "expected", "use_ground_truth": True}}, "77628c7c576e7f55"),
        (
            {"coach": {"type": "local", "scoring": "criteria", "template": "mathchat-facts"}},
            "3fad26fa1893e2d0",
        ),
        ({"coach": {"type": "openai", **ENDPOINT, "max_new_tokens": 64}}, "a9c713d29a763c53"),
        ({"coach": {"type": "rubric", "use_ground_truth": True}}, "a7fb5719f7c8c08c"),
        ({"coach": {"type": "outcome"}}, "4d1f1bf203af5da9"),
        ({"algo": {"baseline": "none", "beta": 0.02}}, "b461326c63ed6d71"),
        ({"algo": {"baseline": "siblings"}, "rollout": {"samples_per_problem": 4}}, "f8c9680badac909b"),
        (
            {"env": {"type": "dsbench"}, "coach": {"type": "rubric"}, "agents": DSBENCH_SEATS},
            "bc2768d548f50919",
        ),
    ],
)
def test_each_built_in_coach_and_baseline_keeps_its_hash(sections, expected):
    assert validate_config({"agents": SEATS, **sections}).config_hash() == expected
