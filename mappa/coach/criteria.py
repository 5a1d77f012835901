"""A coach that asks a local model one yes/no question per criterion and reads the answer's probability.

A small model (SmolLM2-135M) cannot weigh a whole action on a 0-10 scale: its score-token distribution
(`mappa.coach.expected`) barely tracks the rubric (per-agent r between -0.49 and -0.02 on the demo's
actions). A narrower question is easier: "Does the agent's output end with a number inside \\boxed{}?".
For each action this coach shows the model the action (the template's context, the part before
`<<scoring>>`), asks each of its seat's questions (the template's `<<criteria>>` section) in turn, and
reads the next-token probabilities of "Yes" and "No" at the start of the answer (the questions of one
action share its context, whose KV cache the engine computes once: `HFEngine.grouped_next_token_logprobs`):

    p_i = P(Yes) / (P(Yes) + P(No))   for criterion i of the seat;   score = 10 * mean_i c_i

where c_i = p_i, or 1 - p_i for a question whose good answer is No (written `(no) Does ...?`): "Does the
solver's text contain the team's wrong final answer?" is such a fact (the shipped `mathchat-facts`
asks it of the solver: it blames a solver whose answer the team carried to a wrong end). Such a
question names `${wrong_final}`, which has no value when the team was right (the question is then answered
by rule, below): with `${final}` it would read like the yes question "Does the text contain the number
${answer}?" for every right team and cancel it (credit p + (1 - p)).

A question may name its evidence (`[response]`, `[program]`, `[final]`: `mappa.coach.evidence`); it is
then asked about that piece alone, which is what makes a 0.5B model a usable judge (`mathchat-facts`).
The evidence tag comes first, then the `(no)` mark: `solver: [response] (no) Does the text ...?`.
The rationale lists every question's p. A seat without criteria gets the neutral 5 (and parse_status
`fallback`), so a template that forgets one is visible in the score stage's parse statistics.

A question whose placeholder has no value for the action (`${final}` where the team gave no final answer,
`${wrong_final}` where the team was right or gave none) is not asked: "Did the program print the number
(none)?" tells the model nothing, and its answer is known. It is answered No by rule (P(Yes) = 0): nothing
contains, prints or is an answer that does not exist. So a `(no)` question about `${wrong_final}` gives a
right team's solver its full credit (the model, asked, gave about 0.5-0.87 of it), and a yes question about
`${final}` gives a team without an answer none. It is not left out of the mean instead: that would lift
or drop a seat's score by the outcome alone (a right solver would lose the credit the `(no)` question
exists to give it). The rationale says which questions were answered by rule; an action all of whose
questions were is scored without a model call (parse status `rule`). Write questions so that No is the
answer when their value is missing.

Not covered: weights per criterion, answers in the model's own words (use `scoring: generate`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from mappa.coach.evidence import evidence_text, split_tag
from mappa.coach.prompt import CoachRequest, PromptTemplate
from mappa.core.types import RULE, ActionScore

# (groups of chats, single-token candidates) -> [group][chat][candidate] next-token logprobs at the start
# of the assistant's answer; the chats of a group share a prefix (one action's context)
GroupedLogprobFn = Callable[[list[list[list[dict[str, str]]]], list[str]], Awaitable[list[list[list[float]]]]]
ANSWERS = ["Yes", "No"]
QUESTION_FORMAT = "\n\nQUESTION: {question}\nAnswer with Yes or No only."
NEUTRAL_SCORE = 5.0
NONE = "(none)"  # a placeholder's text where no trajectory rides on the request (else: `missing_value`)
WANTS_NO = "(no)"  # a question's mark, after its evidence tag: its good answer is No


def yes_probability(yes_logprob: float, no_logprob: float) -> float:
    """P(Yes) renormalised over the two answers."""
    top = max(yes_logprob, no_logprob)
    yes, no = math.exp(yes_logprob - top), math.exp(no_logprob - top)
    return yes / (yes + no)


def wants_no(question: str) -> tuple[bool, str]:
    """(whether No is the good answer, the question without the mark); the evidence tag already split off."""
    if question.startswith(WANTS_NO):
        return True, question.removeprefix(WANTS_NO).strip()
    return False, question


def credit(question: str, p_yes: float) -> float:
    """What one answer adds to the score: P(Yes), or P(No) for a question marked `(no)`."""
    return 1.0 - p_yes if wants_no(split_tag(question)[1])[0] else p_yes


def question_chat(request: CoachRequest, question: str) -> list[dict[str, str]]:
    """The chat that asks one criterion of one action: the action's context with the question appended,
    or, for a question tagged with its evidence (`[program] Did the program print ...`), that piece of
    the action alone (`mappa.coach.evidence`). `${answer}` becomes the reference answer (only where the
    request carries ground truth), `${final}` the team's final answer, `${wrong_final}` the team's final
    answer when it is wrong (with ground truth only). A question whose placeholder has no value is not
    asked (`missing_value`); called with one anyway, the placeholder reads "(none)"."""
    tag, question = split_tag(question)
    question = _filled(request, wants_no(question)[1])
    if tag is not None:
        if request.action is None or request.trajectory is None:
            raise ValueError(f"request {request.action_id}: evidence [{tag}] needs the action on the request")
        system = (request.context_messages or request.messages)[0]
        text = evidence_text(tag, request.action, request.trajectory)
        return [system, {"role": "user", "content": text + QUESTION_FORMAT.format(question=question)}]
    if not request.context_messages:
        raise ValueError(
            f"request {request.action_id}: coach.scoring=criteria needs a template with a <<criteria>> "
            f"section (and a <<scoring>> mark), as the templates in mappa/coach/templates/ have"
        )
    *head, user = request.context_messages
    return [*head, {**user, "content": user["content"] + QUESTION_FORMAT.format(question=question)}]


def _filled(request: CoachRequest, question: str) -> str:
    """`${answer}`, `${final}` and `${wrong_final}` in a question replaced by the reference, the team's final
    answer and the team's final answer if it is wrong ("(none)" if it is right or missing: such a question
    is answered by rule, not asked, `missing_value`)."""
    for placeholder in ("${answer}", "${wrong_final}"):
        if placeholder in question and (not request.used_ground_truth or request.trajectory is None):
            raise ValueError(
                f"request {request.action_id}: a criteria question names {placeholder}, which needs the "
                "reference answer, but this request carries no ground truth: set coach.use_ground_truth=true"
            )
    trajectory = request.trajectory
    final = str(trajectory.final_answer) if trajectory is not None and trajectory.final_answer else None
    if "${answer}" in question:
        question = question.replace("${answer}", str(trajectory.problem.answer))
    if "${wrong_final}" in question:
        question = question.replace("${wrong_final}", final if final and not trajectory.correct else NONE)
    return question.replace("${final}", final or NONE)


def missing_value(request: CoachRequest, question: str) -> str | None:
    """The placeholder of `question` that has no value for this request's action, or None: `${final}`
    where the team gave no final answer, `${wrong_final}` where it was right or gave none (with ground
    truth; without it, asking raises as `_filled` says). Such a question is answered No by rule."""
    trajectory = request.trajectory
    if trajectory is None:
        return None
    if "${final}" in question and not trajectory.final_answer:
        return "${final}"
    if "${wrong_final}" in question and request.used_ground_truth:
        if not trajectory.final_answer or trajectory.correct:
            return "${wrong_final}"
    return None


def _reading(request: CoachRequest, question: str, p_yes: float) -> str:
    """One question in the rationale, as the coach read it ("Did the program print the number 14?"), or
    with its placeholder and why it was not asked; the criteria keep the template's wording (with its
    marks), one key per question across actions."""
    no, wording = wants_no(split_tag(question)[1])
    good = " (good answer: no)" if no else ""
    missing = missing_value(request, question)
    if missing is not None:
        return f"P(yes)=0 by rule, not asked (no value for {missing}){good}: {wording}"
    return f"P(yes)={p_yes:.2f}{good}: {_filled(request, wording)}"


class CriteriaCoach:
    """Scores each action with the mean P(Yes) over its seat's yes/no criteria, times 10."""

    def __init__(self, logprob_fn: GroupedLogprobFn, model_name: str, template: PromptTemplate) -> None:
        self.model_name = f"{model_name}:criteria"
        self._logprob_fn = logprob_fn
        self._template = template

    async def score(self, requests: list[CoachRequest]) -> list[ActionScore]:
        questions = [self._template.criteria_for(r.agent) for r in requests]
        asked = [self.asked(r) for r in requests]
        groups = [[question_chat(r, q) for q in qs] for r, qs in zip(requests, asked) if qs]
        rows = iter(await self._yes_probabilities(groups) if groups else [])
        verdicts = []
        for request, all_questions, to_ask in zip(requests, questions, asked):
            answers = next(rows) if to_ask else []
            p_yes = dict(zip(to_ask, answers, strict=True))
            probabilities = [(q, p_yes.get(q, 0.0)) for q in all_questions]  # not asked: No by rule
            verdicts.append(self._verdict(request, probabilities, ruled=len(all_questions) - len(to_ask)))
        return verdicts

    def asked(self, request: CoachRequest) -> list[str]:
        """The seat's questions the model is asked about this action (not those answered No by rule)."""
        return [q for q in self._template.criteria_for(request.agent) if missing_value(request, q) is None]

    async def _yes_probabilities(self, groups: list[list[list[dict[str, str]]]]) -> list[list[float]]:
        """P(Yes) of each question chat, per group: the model's next-token Yes against No."""
        rows = await self._logprob_fn(groups, ANSWERS)
        return [[yes_probability(*row) for row in group] for group in rows]

    def _verdict(self, request: CoachRequest, answered: list[tuple[str, float]], ruled: int) -> ActionScore:
        if answered:
            value = 10 * sum(credit(q, p) for q, p in answered) / len(answered)
            rationale = "; ".join(_reading(request, q, p) for q, p in answered)
            status = RULE if ruled == len(answered) else "ok"
        else:
            value, status = NEUTRAL_SCORE, "fallback"
            rationale = f"no criteria for seat {request.agent!r} in template {self._template.name!r}"
        # each question's P(Yes) (not its credit), for the trackers
        criteria = dict(answered) or None
        return request.verdict(self.model_name, round(value, 4), rationale, status, criteria=criteria)
