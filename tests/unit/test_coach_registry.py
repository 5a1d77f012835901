"""A coach type is one module declaring a `CoachSpec`: a coach defined here, named by its import path or
registered under a name in the entry-point group `mappa.coaches`, is validated, built and scores a run's
actions through the score stage; what the built-ins declare replaces the lists of coach types. Unknown
or broken coaches: test_plugin_lookup.py."""

from __future__ import annotations

from mappa.coach.base import Coach
from mappa.coach.build import build_coach, check_coach_ready
from mappa.coach.prompt import CoachRequest
from mappa.config import CoachConfig, coach_registry, load_config
from mappa.config.coach_registry import (
    BUILTIN_COACHES,
    CoachInputs,
    CoachSpec,
    get_coach_spec,
)
from mappa.core.plugins import registered_plugins
from mappa.core.types import ActionScore
from mappa.stages import execute, output_parts, write_manifest
from mappa.storage.frames import read_scores, trajectories_to_frame
from mappa.storage.run import Run

HERE = "test_coach_registry"  # pytest puts tests/unit on sys.path: this module's import name


class LengthConfig(CoachConfig):
    """The length coach's section: CoachConfig's fields plus its own."""

    per_char: float = 0.5
    """Score per character of the response (capped at 10)."""


class LengthCoach:
    """Scores an action by its response's length: a stand-in for any coach a user writes."""

    def __init__(self, per_char: float) -> None:
        self.per_char = per_char
        self.model_name = "length"

    async def score(self, requests: list[CoachRequest]) -> list[ActionScore]:
        return [self._score(request) for request in requests]

    def _score(self, request: CoachRequest) -> ActionScore:
        assert request.action is not None
        value = min(10.0, self.per_char * len(request.action.response))
        return request.verdict(self.model_name, value, f"{len(request.action.response)} characters")


def build(config: LengthConfig, inputs: CoachInputs) -> Coach:
    return LengthCoach(config.per_char)


COACH = CoachSpec(name="length", build=build, config=LengthConfig, summary="the response's length")


def test_a_coach_named_by_its_import_path_scores_a_runs_actions_in_the_score_stage(tmp_path, trajectory):
    overrides = [f"storage.root={tmp_path}", f"coach.type={HERE}:COACH", "coach.per_char=1.0"]
    config = load_config("configs/mathchat-cpu.yaml", overrides)
    # its own section: the setting is its own, `scoring: expected` (local only, from the file) was reset
    assert isinstance(config.coach, LengthConfig) and config.coach.per_char == 1.0
    assert config.coach.scoring == "generate"
    assert not (config.coach.is_llm or config.coach.reads_template or config.coach.runs_local_model)
    run = Run.create(config, "r")
    run.store.write_parquet(trajectories_to_frame([trajectory], 0), *output_parts(run, 0, "rollout"))
    write_manifest(run, 0, "rollout", 4, {"total_s": 1.0}, success_rate=1.0)
    manifest = execute(run, 0, "score")
    scores = read_scores(run, 0, "score")
    assert manifest["coach_model"] == "length" and len(scores) == len(trajectory.actions)
    assert [s.score for s in scores] == [min(10.0, len(a.response)) for a in trajectory.actions]
    # the stored config reads back as the coach's section, and its hash does not depend on the path taken
    again = Run.open(str(tmp_path), "r")
    assert isinstance(again.config.coach, LengthConfig) and again.config.config_hash() == config.config_hash()
    other = load_config("configs/mathchat-cpu.yaml", [f"coach.type={HERE}:COACH", "coach.per_char=2.0"])
    assert other.config_hash() != config.config_hash()


def test_a_coach_registered_under_a_name_is_found_by_it(register_entry_point):
    register_entry_point(coach_registry.ENTRY_POINT_GROUP, "length", f"{HERE}:COACH")
    get_coach_spec.cache_clear()
    try:
        assert "length" in registered_plugins(coach_registry.COACHES)
        config = load_config("configs/mathchat-cpu.yaml", ["coach.type=length"])
        coach = build_coach(config.coach)
        assert isinstance(coach, LengthCoach) and coach.per_char == 0.5
    finally:
        get_coach_spec.cache_clear()


def test_the_built_ins_declare_what_they_need():
    needs = {
        name: (spec.is_llm, spec.reads_template, spec.runs_local_model, spec.calls_endpoint)
        for name in BUILTIN_COACHES
        for spec in [get_coach_spec(name)]
    }
    assert needs == {
        "local": (True, True, True, False),
        "openai": (True, True, False, True),
        "rubric": (False, False, False, False),
        "outcome": (False, False, False, False),
    }
    assert all(get_coach_spec(name).name == name for name in BUILTIN_COACHES)


def test_the_readiness_check_runs_the_declared_endpoint_check(monkeypatch):
    from mappa.coach import openai

    reached = []
    monkeypatch.setattr(openai, "check_endpoint", lambda config, key: reached.append(config.base_url))
    check_coach_ready(CoachConfig(type="openai", base_url="http://127.0.0.1:9/v1"))
    assert reached == ["http://127.0.0.1:9/v1"]
    check_coach_ready(CoachConfig(type="outcome"))  # no template, no endpoint: nothing to check
    assert reached == ["http://127.0.0.1:9/v1"]
