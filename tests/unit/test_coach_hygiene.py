"""What the coach sees and when it is asked: reasoning blocks removed from the agent's output (and the
prompt says so), actions with no usable output scored by rule without a coach call, for every LLM coach
(generate, expected, criteria, openai), since both live where requests are built and sent."""

from __future__ import annotations

import asyncio
import math

import pytest
from test_coach import ROLES, _trajectory
from test_criteria_coach import TEMPLATE

from mappa.coach.criteria import CriteriaCoach
from mappa.coach.expected import ExpectedScoreCoach
from mappa.coach.local import LocalCoach
from mappa.coach.prompt import build_requests, load_template, strip_reasoning
from mappa.coach.score import score_trajectories, unusable_output
from mappa.config import CoachConfig
from mappa.core.types import Trajectory
from mappa.envs.mathchat import SPEC as MATHCHAT


@pytest.mark.parametrize(
    ("text", "kept", "removed"),
    [
        ("<think>hmm</think>The answer is 4.", "The answer is 4.", 18),
        ("Plan.\n<THINK>a\nb</Think>\nDone: 4", "Plan.\n\nDone: 4", 18),
        ("Start <think>cut off at the token limit", "Start", 33),
        ("reasoning the template opened</think>\n4", "4", 37),
        ("<think></think>", "", 15),
        ("no reasoning here", "no reasoning here", 0),
    ],
)
def test_reasoning_blocks_are_stripped(text, kept, removed):
    assert strip_reasoning(text) == (kept, removed)


def _with(**responses: str) -> Trajectory:
    """`_trajectory()` with some responses replaced (by agent), and the verifier cut at the token limit."""
    trajectory = _trajectory()
    actions = tuple(
        a.__class__(
            **{**a.__dict__, "response": responses.get(a.agent, a.response), "finish_reason": "length"}
        )
        if a.agent == "verifier"
        else a.__class__(**{**a.__dict__, "response": responses.get(a.agent, a.response)})
        for a in trajectory.actions
    )
    return Trajectory(**{**trajectory.__dict__, "actions": actions})


def test_the_coach_sees_the_output_without_its_reasoning_and_is_told():
    trajectory = _with(solver="<think>" + "scratch " * 20 + "</think>3*4 = 12, so 14.")
    user = build_requests(trajectory, "task", ROLES, "mathchat", False)[0].messages[1]["content"]
    assert "scratch" not in user and "3*4 = 12, so 14." in user
    assert "ITS OUTPUT (its reasoning, 175 characters in <think> blocks, was removed)" in user
    kept = build_requests(trajectory, "task", ROLES, "mathchat", False, strip_reasoning=False)
    assert "scratch" in kept[0].messages[1]["content"] and "was removed" not in kept[0].messages[1]["content"]


def test_unusable_outputs_are_named():
    solver, executor, verifier = _with(solver="  \n", verifier="<think>still thinking").actions
    assert unusable_output(solver) == "empty: the response is blank"
    assert unusable_output(executor) is None
    assert unusable_output(verifier).startswith("truncated: cut at the token limit inside its reasoning")
    only = _with(solver="<think>x</think>").actions[0]
    assert unusable_output(only) == "reasoning-only: nothing but a reasoning block"


UNUSABLE = _with(solver="", verifier="<think>the box goes")  # blank solver, verifier cut in its reasoning


def test_a_generating_coach_is_not_asked_about_unusable_actions():
    asked = []

    async def chat(chats):
        asked.extend(chats)
        return ["Fine.\nPROCESS_SCORE: 8"] * len(chats)

    config = CoachConfig(type="local")
    scores = asyncio.run(score_trajectories(LocalCoach(chat, "m"), [UNUSABLE], ROLES, config))
    assert len(asked) == 1 and "print(2 + 3 * 4)" in asked[0][1]["content"]  # the executor alone
    assert [(s.score, s.parse_status) for s in scores] == [(0.0, "rule"), (8.0, "ok"), (0.0, "rule")]
    assert scores[0].rationale == "rule empty: the response is blank; scored 0 without asking the coach"
    assert scores[2].rationale.startswith("rule truncated:") and scores[2].coach_model == "m"
    config = CoachConfig(type="local", empty_action_score=None)  # ask the coach about everything
    asked.clear()
    scores = asyncio.run(score_trajectories(LocalCoach(chat, "m"), [UNUSABLE], ROLES, config))
    assert len(asked) == 3 and {s.parse_status for s in scores} == {"ok"}


def test_the_probability_coaches_are_not_asked_either(tmp_path):
    async def digits(chats, prefix, candidates, positions):
        return [[[math.log(0.1)] * 10, [math.log(0.5)]] for _ in chats]

    config = CoachConfig(type="local", scoring="expected", empty_action_score=2.0)
    scores = asyncio.run(score_trajectories(ExpectedScoreCoach(digits, "m"), [UNUSABLE], ROLES, config))
    assert [s.parse_status for s in scores] == ["rule", "ok", "rule"] and scores[0].score == 2.0

    path = tmp_path / "criteria.txt"
    path.write_text(TEMPLATE.replace("verifier: Q-verifier-2?", "executor: Q-executor?"))
    groups_asked = []

    async def yes_no(groups, candidates):
        groups_asked.extend(groups)
        return [[[math.log(0.75), math.log(0.25)]] * len(group) for group in groups]

    config = CoachConfig(type="local", scoring="criteria", template=str(path))
    coach = CriteriaCoach(yes_no, "m", load_template(str(path)))
    scores = asyncio.run(score_trajectories(coach, [UNUSABLE], ROLES, config))
    assert len(groups_asked) == 1 and [s.parse_status for s in scores] == ["rule", "ok", "rule"]
    assert scores[1].criteria == {"Q-executor?": pytest.approx(0.75)}  # each question's P(Yes), recorded


def test_rubric_and_outcome_coaches_keep_their_own_rules():
    from mappa.coach.build import build_coach

    for kind in ("rubric", "outcome"):
        config = CoachConfig(type=kind, use_ground_truth=True)
        coach = build_coach(config, env=MATHCHAT)
        scores = asyncio.run(score_trajectories(coach, [UNUSABLE], ROLES, config))
        assert "rule" not in {s.parse_status for s in scores}
