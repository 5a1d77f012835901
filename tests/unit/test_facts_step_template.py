"""`mathchat-facts-step` asks each seat only about its own step: when a later seat errs, the questions an
upstream seat is asked (which ones, and their chats) do not change, so its score cannot. The blame check
found that `mathchat-facts-own` breaks this through the solver's `${wrong_final}` question (docs/blame.md)."""

import dataclasses

from mappa.coach.criteria import missing_value, question_chat
from mappa.coach.prompt import build_requests, load_template
from tests.unit.test_coach import ROLES, _trajectory


def asked(template: str, trajectory) -> dict[str, list]:
    """Per seat: each question's chat, or the placeholder that keeps it from being asked."""
    tpl = load_template(template)
    requests = build_requests(trajectory, trajectory.problem.question, ROLES, tpl, use_ground_truth=True)
    seats = {}
    for request in requests:
        seat = request.action.agent
        seats[seat] = [missing_value(request, q) or question_chat(request, q) for q in tpl.criteria_for(seat)]
    return seats


def with_wrong_verifier(trajectory):
    *upstream, verifier = trajectory.actions
    wrong = dataclasses.replace(verifier, response="The answer is \\boxed{15}.")
    return dataclasses.replace(trajectory, actions=(*upstream, wrong), final_answer="15", correct=False)


def test_a_later_seats_mistake_leaves_upstream_questions_alone():
    right = _trajectory()
    wrong = with_wrong_verifier(right)
    step_right, step_wrong = asked("mathchat-facts-step", right), asked("mathchat-facts-step", wrong)
    assert step_right["solver"] == step_wrong["solver"] and step_right["executor"] == step_wrong["executor"]
    assert step_right["verifier"] != step_wrong["verifier"]  # the seat that erred is asked about its answer
    own_right, own_wrong = asked("mathchat-facts-own", right), asked("mathchat-facts-own", wrong)
    assert own_right["solver"] != own_wrong["solver"]  # the leak: asked about 15 only once the team failed
