"""The difficulty dial (`mappa.envs.mathchat.levels`): disjoint splits, exact answers, determinism,
loading."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from mappa.envs.mathchat.levels import LEVEL1_TEMPLATES, generate_level, load_builtin_source
from mappa.envs.mathchat.problems import load_builtin

NUMBER = re.compile(r"\d+")


@pytest.mark.parametrize("level", [1, 2])
def test_levels_have_full_disjoint_splits_and_are_deterministic(level):
    train = load_builtin_source(f"builtin:train-level{level}")
    held_out = load_builtin_source(f"builtin:eval-level{level}")
    assert (len(train), len(held_out)) == (256, 64)
    assert not {p.question for p in train} & {p.question for p in held_out}
    assert not {p.id for p in train} & {p.id for p in held_out}
    assert all(p.meta["level"] == level and p.meta["difficulty"] == level for p in train + held_out)
    assert [p.question for p in generate_level(level, "eval")] == [p.question for p in held_out]


def _level1_value(question: str, template: str) -> int:
    a, b = (int(n) for n in NUMBER.findall(question)[:2])
    return {"sum": a + b, "buys_more": a + b, "difference": a - b, "gives_away": a - b}.get(template, a * b)


def test_level1_is_one_step_with_exact_answers():
    problems = load_builtin_source("builtin:train-level1") + load_builtin_source("builtin:eval-level1")
    assert {p.meta["template"] for p in problems} == set(LEVEL1_TEMPLATES)
    for problem in problems:
        assert len(NUMBER.findall(problem.question)) == 2, problem.question
        assert int(problem.answer) == _level1_value(problem.question, problem.meta["template"]) > 0


def test_level2_arithmetic_answers_are_exact():
    for problem in load_builtin_source("builtin:train-level2"):
        if problem.meta["template"] == "two_operators":
            expression = re.search(r"(?:is|Compute|Calculate) (.+?)[?.]$", problem.question).group(1)
            a, b, c = (int(n) for n in NUMBER.findall(expression))
            value = {"+*": a + b * c, "*-": a * b - c, "(+)*": (a + b) * c, "-+": a - b + c}[
                re.sub(r"[\d\s]", "", expression)
            ]
            assert Fraction(problem.answer) == value
        else:  # the two-step word templates of the level-3 generator, whose answers its tests check
            assert problem.meta["difficulty"] <= 2


def test_level3_is_the_shipped_mix_and_bad_sources_name_the_forms():
    assert load_builtin_source("builtin:train-level3") == load_builtin("train")
    assert load_builtin_source("builtin:eval") == load_builtin("eval")
    with pytest.raises(ValueError, match="builtin:train-level1"):
        load_builtin_source("builtin:train-level9")
    with pytest.raises(ValueError, match="unknown built-in problem set"):
        load_builtin_source("builtin:test")


def test_the_heldout_set_is_disjoint_from_training_by_problem_and_by_template_family():
    from mappa.envs.mathchat.heldout import SIZE
    from mappa.envs.overlap import overlap_report

    heldout = load_builtin_source("builtin:heldout-level1")
    assert len(heldout) == SIZE >= 256 and heldout == load_builtin_source("builtin:heldout-level1")
    assert len({p.question for p in heldout}) == SIZE
    for source in ("builtin:train-level1", "builtin:eval-level1", "builtin:train-level1-wide"):
        other = load_builtin_source(source)
        assert not {p.question for p in heldout} & {p.question for p in other}
        assert not {p.meta["template"] for p in heldout} & {p.meta["template"] for p in other}
        assert overlap_report(other, heldout)["overlapping"] == 0  # not even near-duplicates
    assert len({p.meta["template"] for p in heldout[:13]}) == 13  # every family in the first 256 alike
    for problem in heldout:  # the answer follows from the numbers and the template's operation
        a, b = problem.meta["numbers"]
        words = problem.meta["template"]
        expected = a * b if words.endswith(("product_words", "eggs", "pencils")) else None
        if expected is None:
            subtract = words.endswith(("minus_words", "less_than", "birds", "bus", "rope"))
            expected = a - b if subtract else a + b
        assert problem.answer == str(expected) and expected > 0, problem


def test_the_mixed_training_split_adds_eight_families_to_level_one():
    mix = load_builtin_source("builtin:train-level1-mix")
    level1 = load_builtin_source("builtin:train-level1")
    assert len(mix) == 512 and mix[:256] == level1 and len({p.question for p in mix}) == 512
    assert len({p.meta["template"] for p in mix}) == len(LEVEL1_TEMPLATES) + 8


def test_the_wide_training_split_adds_twelve_story_families_most_of_them_subtractions():
    from mappa.envs.mathchat.variety import STORIES

    wide = load_builtin_source("builtin:train-level1-wide")
    mix = load_builtin_source("builtin:train-level1-mix")
    assert len(wide) == 768 and wide[:512] == mix and len({p.question for p in wide}) == 768
    stories = wide[512:]
    assert {p.meta["template"] for p in stories} == set(STORIES) and len(STORIES) == 12
    for problem in stories:  # the answer follows from the numbers and the family's operation
        a, b = problem.meta["numbers"]
        template = problem.meta["template"]
        if template in ("wide_savings", "wide_cafe"):
            expected = a * b
        elif template in ("wide_games", "wide_tulips"):
            expected = a + b
        else:
            expected = a - b
        assert problem.answer == str(expected) and expected > 0, problem
        assert str(a) in problem.question and str(b) in problem.question
