"""Scoring whole trajectories: render every action's request, ask the coach once for all, check alignment.

Two kinds of action never reach the coach. Verdicts the caller already has (`known`: a re-scoring of fallbacks
only keeps the run's other verdicts) are kept as they are. And for the LLM coaches (`local`, `openai`, every
scoring mode: their `CoachSpec.is_llm`) an action with no usable output, blank or nothing but reasoning (e.g.
cut at the token limit inside its `<think>` block), is scored by rule: `coach.empty_action_score`, parse
status `rule`, the rule named in the rationale (`rule_verdict`); a coach asked about an empty action would
only guess. The rubric and outcome coaches keep their own rules for such actions.

Not covered here: caching answers or writing scores as artifacts (the score stage does that).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from mappa.coach.base import Coach
from mappa.coach.prompt import CoachRequest, ReferenceFn, build_requests, load_template, strip_reasoning
from mappa.config import CoachConfig
from mappa.core.types import RULE, Action, ActionScore, Trajectory


def problem_task(trajectory: Trajectory) -> str:
    """The default task text: the problem statement."""
    return trajectory.problem.question


def build_all_requests(
    trajectories: Sequence[Trajectory],
    roles: dict[str, str],
    config: CoachConfig,
    task_fn: Callable[[Trajectory], str] = problem_task,
    reference_fn: ReferenceFn | None = None,
) -> list[CoachRequest]:
    """Requests for every action of every trajectory, in order, through `config.template`; ground truth as
    `reference_fn` gives it (default: the reference answer)."""
    template = load_template(config.template)
    requests: list[CoachRequest] = []
    for trajectory in trajectories:
        task = task_fn(trajectory)
        requests.extend(
            build_requests(
                trajectory,
                task,
                roles,
                template,
                config.use_ground_truth,
                reference_fn=reference_fn,
                strip_reasoning=config.strip_reasoning,
            )
        )
    return requests


def unusable_output(action: Action) -> str | None:
    """Why `action` has no output a coach could judge (the rule's name and what it found), or None."""
    if not action.response.strip():
        return "empty: the response is blank"
    if strip_reasoning(action.response)[0].strip():
        return None
    if action.finish_reason == "length":
        return "truncated: cut at the token limit inside its reasoning, nothing after it"
    return "reasoning-only: nothing but a reasoning block"


def rule_verdict(request: CoachRequest, config: CoachConfig, model_name: str) -> ActionScore | None:
    """The verdict by rule for an LLM coach's request whose action has no usable output; else None."""
    if not config.is_llm or config.empty_action_score is None or request.action is None:
        return None
    why = unusable_output(request.action)
    if why is None:
        return None
    rationale = f"rule {why}; scored {config.empty_action_score:g} without asking the coach"
    return request.verdict(model_name, config.empty_action_score, rationale, RULE)


async def score_trajectories(
    coach: Coach,
    trajectories: Sequence[Trajectory],
    roles: dict[str, str],
    config: CoachConfig,
    task_fn: Callable[[Trajectory], str] = problem_task,
    reference_fn: ReferenceFn | None = None,
    known: Mapping[str, ActionScore] | None = None,
) -> list[ActionScore]:
    """One `ActionScore` per action of `trajectories`, in order: `known` verdicts (by action id) kept,
    actions without usable output scored by rule, the others by `coach`; raises if the coach breaks
    alignment."""
    requests = build_all_requests(trajectories, roles, config, task_fn, reference_fn)
    verdicts = dict(known or {})
    for request in requests:
        if request.action_id not in verdicts:
            ruled = rule_verdict(request, config, coach.model_name)
            if ruled is not None:
                verdicts[request.action_id] = ruled
    asked = [r for r in requests if r.action_id not in verdicts]
    scores = await coach.score(asked)
    got = [s.action_id for s in scores]
    want = [r.action_id for r in asked]
    if got != want:
        raise ValueError(
            f"coach {coach.model_name} returned {len(got)} scores not aligned with {len(want)} actions "
            f"(first mismatch near {next((w for g, w in zip(got, want, strict=False) if g != w), 'the end')})"
        )
    verdicts |= {score.action_id: score for score in scores}
    return [verdicts[r.action_id] for r in requests]
