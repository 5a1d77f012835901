"""When a blame check reads a coach's stored scores back (`mappa.blame.check.same_scores`): the same coach
settings, as this release reads them, whether the sidecar holds every setting (as written before) or only
those that differ from their defaults; a setting this release added, left at its default, keeps them."""

from mappa.blame.check import coach_settings, same_scores
from mappa.config import CoachConfig

JUDGE = {"model": "qwen2.5-coder-0.5b", "scoring": "criteria", "template": "judge", "use_ground_truth": True}


def identity(coach: CoachConfig) -> dict:
    return {"coach": coach_settings(coach), "template_version": "v1", "actions": "abc"}


def test_stored_scores_are_read_back_for_the_same_settings_however_the_sidecar_wrote_them():
    coach = CoachConfig(**JUDGE)
    assert coach_settings(coach) == {**JUDGE, "type": "local"}
    every_setting = coach.model_dump(mode="json")  # how sidecars were written before
    del every_setting["learn"]["start"]  # a sidecar from before coach.learn.start existed
    stored = {"coach": every_setting, "template_version": "v1", "actions": "abc"}
    assert same_scores(stored, identity(coach), CoachConfig)
    assert same_scores(identity(coach), identity(coach), CoachConfig)


def test_another_setting_template_or_actions_scores_anew():
    coach = CoachConfig(**JUDGE)
    stored = identity(coach)
    assert not same_scores(stored, identity(CoachConfig(**{**JUDGE, "use_ground_truth": False})), CoachConfig)
    assert not same_scores(stored, {**identity(coach), "actions": "abd"}, CoachConfig)
    assert not same_scores(stored, {**identity(coach), "template_version": "v2"}, CoachConfig)
    assert not same_scores(
        {**stored, "coach": {**stored["coach"], "retired": 1}}, identity(coach), CoachConfig
    )
    assert not same_scores(None, identity(coach), CoachConfig)


def test_a_learned_head_counts_by_its_version_not_where_its_file_lies():
    here = CoachConfig(**JUDGE, learn={"start": "/a/runs/r/iter-0002/coach-update/head.json"})
    there = CoachConfig(**JUDGE, learn={"start": "runs/r/iter-0002/coach-update/head.json"})
    assert coach_settings(here) == coach_settings(there) == {**JUDGE, "type": "local"}
    learning = CoachConfig(**JUDGE, learn={"start": "x/head.json", "signal": "pairs"})
    assert coach_settings(learning)["learn"] == {"signal": "pairs"}
