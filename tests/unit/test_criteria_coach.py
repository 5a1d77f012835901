"""The yes/no criteria coach (`mappa.coach.criteria`): one question per criterion of the action's seat, the
score 10 x mean P(Yes), the questions read from the template's <<criteria>> section."""

from __future__ import annotations

import asyncio
import math

import pytest
from test_coach import ROLES, _trajectory

from mappa.coach.build import build_coach, check_coach_template
from mappa.coach.criteria import CriteriaCoach, yes_probability
from mappa.coach.prompt import build_requests, load_template, parse_template
from mappa.config import CoachConfig

TEMPLATE = """<<system>>
Judge.
<<user>>
ACTION ${response}
<<scoring>>
End with PROCESS_SCORE: <0-10>
<<criteria>>
# comment
solver: Q-solver-1?
verifier: Q-verifier-1?
verifier: Q-verifier-2?
"""


def test_template_sections_split_context_scoring_and_criteria():
    template = parse_template(TEMPLATE)
    assert template.context == "ACTION ${response}"
    assert template.user == "ACTION ${response}\n\nEnd with PROCESS_SCORE: <0-10>"
    assert template.criteria_for("verifier") == ["Q-verifier-1?", "Q-verifier-2?"]
    assert template.criteria_for("executor") == []
    with pytest.raises(ValueError, match="criteria line 2 is not `seat: question`"):
        parse_template(TEMPLATE.replace("# comment", "no colon here"))
    shipped = load_template("mathchat")
    assert {seat for seat, _ in shipped.criteria} == {"solver", "executor", "verifier"}
    assert "PROCESS_SCORE" not in shipped.context and "PROCESS_SCORE" in shipped.user


def test_scores_are_ten_times_the_mean_yes_probability_per_seat():
    template = parse_template(TEMPLATE)
    asked = []

    async def logprob_fn(groups, candidates):
        assert candidates == ["Yes", "No"]
        p_yes = {"Q-solver-1?": 0.8, "Q-verifier-1?": 0.9, "Q-verifier-2?": 0.3}
        out = []
        for group in groups:  # one group per action: its context, then one question each
            contexts = {chat[-1]["content"].split("QUESTION: ")[0] for chat in group}
            assert len(contexts) == 1 and all("PROCESS_SCORE" not in c for c in contexts)
            questions = [chat[-1]["content"].split("QUESTION: ")[1].split("\n")[0] for chat in group]
            asked.extend(questions)
            out.append([[math.log(p_yes[q]), math.log(1 - p_yes[q])] for q in questions])
        return out

    requests = build_requests(_trajectory(), "task", ROLES, template, False)
    scores = asyncio.run(CriteriaCoach(logprob_fn, "m", template).score(requests))
    assert asked == ["Q-solver-1?", "Q-verifier-1?", "Q-verifier-2?"]  # the executor has no criteria
    assert [s.score for s in scores] == [pytest.approx(8.0), 5.0, pytest.approx(6.0)]
    assert [s.parse_status for s in scores] == ["ok", "fallback", "ok"]
    assert "P(yes)=0.90: Q-verifier-1?" in scores[2].rationale and scores[2].coach_model == "m:criteria"


def test_yes_probability_renormalises_over_the_two_answers():
    assert yes_probability(math.log(0.02), math.log(0.06)) == pytest.approx(0.25)
    assert yes_probability(-1000.0, -1000.0) == pytest.approx(0.5)


def test_criteria_scoring_needs_a_template_with_criteria(tmp_path):
    bare = tmp_path / "bare.txt"
    bare.write_text("<<system>>\nJudge.\n<<user>>\n${response}\nPROCESS_SCORE: <0-10>\n")
    config = CoachConfig(type="local", scoring="criteria", template=str(bare))
    with pytest.raises(ValueError, match="no <<criteria>> section"):
        check_coach_template(config)
    check_coach_template(CoachConfig(type="local", scoring="criteria"))  # the shipped mathchat template

    async def no_logprobs(groups, candidates):
        raise AssertionError("not called")

    coach = build_coach(CoachConfig(type="local", scoring="criteria"), grouped_logprob_fn=no_logprobs)
    assert isinstance(coach, CriteriaCoach)
    with pytest.raises(ValueError, match="needs coach.type=local"):
        CoachConfig(type="rubric", scoring="criteria")


def test_a_tagged_question_is_asked_about_its_piece_of_the_action_alone(trajectory):
    """`[response]`, `[program]` and `[final]` questions see the agent's text, the latest program's output
    (the verifier: its upstream executor's crashed run) or the team's final answer, and nothing else;
    `${answer}` and `${final}` are filled in (`mappa.coach.evidence`)."""
    from mappa.coach.criteria import question_chat

    template = load_template("mathchat-facts")
    requests = build_requests(trajectory, "What is 2+2?", ROLES, template, use_ground_truth=True)
    solver, executor, crashed, verifier = requests
    chat = question_chat(solver, "[response] Does the text contain the number ${answer}?")
    assert chat[0]["content"] == template.system and len(chat) == 2
    assert chat[1]["content"].startswith("TEXT:\n2+2=4\n\nQUESTION: Does the text contain the number 4?")
    assert question_chat(executor, "[program] Did it print?")[1]["content"].startswith("PROGRAM OUTPUT:\n4\n")
    failed = question_chat(verifier, "[program] Did the program print the number ${final}?")[1]["content"]
    assert failed.startswith("PROGRAM OUTPUT:\n(nothing printed)\nERROR: SyntaxError\n\nQUESTION: Did the")
    assert "print the number 4?" in failed
    final = question_chat(verifier, "[final] Is the final answer ${answer}?")[1]["content"]
    assert final.startswith("The team's final answer: 4\n\nQUESTION: Is the final answer 4?")
    assert question_chat(solver, "[program] Ran?")[1]["content"].startswith("PROGRAM OUTPUT:\n(no program)")
    with pytest.raises(ValueError, match=r"unknown evidence \[stdout\]; use one of \[final\], \[program\]"):
        question_chat(solver, "[stdout] Printed?")
    blind = build_requests(trajectory, "What is 2+2?", ROLES, "mathchat", use_ground_truth=False)[0]
    with pytest.raises(ValueError, match="carries no ground truth: set coach.use_ground_truth=true"):
        question_chat(blind, "[response] Does it contain ${answer}?")


def test_a_question_marked_no_credits_the_no_answer():
    """`(no)`: the question's good answer is No, so it adds P(No); asked without the mark."""
    template = parse_template(TEMPLATE.replace("verifier: Q-verifier-2?", "verifier: (no) Q-verifier-2?"))
    asked = []

    async def logprob_fn(groups, candidates):
        questions = [chat[-1]["content"].split("QUESTION: ")[1].split("\n")[0] for g in groups for chat in g]
        asked.extend(questions)
        return [[[math.log(0.9), math.log(0.1)] for _ in group] for group in groups]  # P(Yes) 0.9 each

    requests = build_requests(_trajectory(), "task", ROLES, template, False)
    verifier = asyncio.run(CriteriaCoach(logprob_fn, "m", template).score(requests))[2]
    assert asked[-1] == "Q-verifier-2?"
    assert verifier.score == pytest.approx(10 * (0.9 + 0.1) / 2)
    assert verifier.criteria == pytest.approx({"Q-verifier-1?": 0.9, "(no) Q-verifier-2?": 0.9})
    assert "P(yes)=0.90 (good answer: no): Q-verifier-2?" in verifier.rationale


def test_the_rationale_shows_each_question_as_the_coach_read_it(trajectory):
    """The rationale has the reference filled in and no evidence tag; the criteria keep the template's
    wording (one tracker key per question across actions)."""
    template = load_template("mathchat-facts")
    solver = build_requests(trajectory, "What is 2+2?", ROLES, template, use_ground_truth=True)[0]

    async def logprob_fn(groups, candidates):
        return [[[math.log(0.25), math.log(0.75)] for _ in group] for group in groups]

    score = asyncio.run(CriteriaCoach(logprob_fn, "m", template).score([solver]))[0]
    assert "P(yes)=0.25: Does the text contain the number 4?" in score.rationale
    assert "${answer}" not in score.rationale and "[response]" not in score.rationale
    assert "[response] Does the text contain the number ${answer}?" in score.criteria


def test_wrong_final_names_the_teams_answer_only_when_it_is_wrong():
    """`${wrong_final}` is the team's final answer when it is wrong and has no value when it is right or
    missing (`missing_value`), so the solver's `(no)` question about it never reads like its yes question
    about `${answer}` (which cancelled that question for every right team); it needs ground truth, as
    `${answer}` does."""
    from mappa.coach.criteria import missing_value, question_chat

    question = "[response] (no) Does the text contain the number ${wrong_final}?"

    def request(trajectory, ground_truth=True):
        return build_requests(trajectory, "task", ROLES, "mathchat-facts", ground_truth)[0]

    def asked(trajectory, ground_truth=True):
        chat = question_chat(request(trajectory, ground_truth), question)
        return chat[1]["content"].split("QUESTION: ")[1].split("\n")[0]

    assert asked(_trajectory(final="12", correct=False)) == "Does the text contain the number 12?"
    assert missing_value(request(_trajectory(final="12", correct=False)), question) is None
    assert missing_value(request(_trajectory(final="14", correct=True)), question) == "${wrong_final}"
    assert missing_value(request(_trajectory(final=None, correct=False)), question) == "${wrong_final}"
    with pytest.raises(ValueError, match=r"names \$\{wrong_final\}.*set coach.use_ground_truth=true"):
        asked(_trajectory(final="12", correct=False), ground_truth=False)


def test_a_question_whose_placeholder_has_no_value_is_answered_no_by_rule_not_asked():
    """A question like "Did the program print the number (none)?" is never put to the model: one naming
    `${final}` without a final answer, or `${wrong_final}` for a right team, gets P(Yes) = 0 by rule (a
    `(no)` question its full credit), and the rationale says so; with every question ruled, no model call
    at all (parse status `rule`)."""
    template = parse_template(
        TEMPLATE.replace("<<scoring>>", "${reference}\n<<scoring>>")
        .replace("solver: Q-solver-1?", "solver: Q-solver-1?\nsolver: (no) Holds ${wrong_final}?")
        .replace("verifier: Q-verifier-1?\n", "")
        .replace("verifier: Q-verifier-2?", "verifier: Printed ${final}?")
    )
    asked = []

    async def logprob_fn(groups, candidates):
        questions = [chat[-1]["content"].split("QUESTION: ")[1].split("\n")[0] for g in groups for chat in g]
        asked.extend(questions)
        return [[[math.log(0.4), math.log(0.6)] for _ in group] for group in groups]  # P(Yes) 0.4 each

    def scores(trajectory):
        requests = build_requests(trajectory, "task", ROLES, template, use_ground_truth=True)
        return asyncio.run(CriteriaCoach(logprob_fn, "m", template).score(requests))

    right = scores(_trajectory(final="14", correct=True))
    assert asked == ["Q-solver-1?", "Printed 14?"]  # the right team's wrong answer: none to ask about
    assert right[0].score == pytest.approx(10 * (0.4 + 1.0) / 2)  # 0.4, and the (no) question's full credit
    assert right[0].criteria == {"Q-solver-1?": 0.4, "(no) Holds ${wrong_final}?": 0.0}
    assert "P(yes)=0 by rule, not asked (no value for ${wrong_final}) (good answer: no)" in right[0].rationale
    asked.clear()
    silent = scores(_trajectory(final=None, correct=False))
    assert asked == ["Q-solver-1?"]  # no final answer: neither placeholder has a value
    assert silent[2].score == 0.0 and silent[2].parse_status == "rule"  # the verifier: nothing to ask
    assert "no value for ${final}" in silent[2].rationale and "(none)" not in silent[2].rationale
    asked.clear()
    wrong = scores(_trajectory(final="12", correct=False))
    assert asked == ["Q-solver-1?", "Holds 12?", "Printed 12?"]
    assert wrong[0].score == pytest.approx(10 * (0.4 + 0.6) / 2)
