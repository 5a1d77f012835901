"""A coach of explicit programmatic rules: deterministic, free, offline; a baseline for the LLM coaches.

The rules are the env's (`EnvSpec.rubric`: one rule per seat, e.g. `mappa.envs.mathchat.rubric`,
`mappa.envs.dsbench.rubric`); each returns (rule id, score, what it checked), and the rationale names the
rule that fired. Rules marked [gt] look at the outcome and apply only where the request carries ground
truth (`coach.use_ground_truth`); without it the rubric judges the action alone.

`COACH` declares the type: no model, no template, no endpoint; its `build` needs the run's env spec.

Not covered: an env without a rubric (`EnvSpec.rubric` None): it trains with an LLM coach or the outcome
coach, and the config says so before a run starts.
"""

from __future__ import annotations

from mappa.coach.base import Coach
from mappa.coach.prompt import CoachRequest
from mappa.config import CoachConfig
from mappa.config.coach_registry import CoachInputs, CoachSpec
from mappa.core.types import ActionScore
from mappa.envs.spec import EnvSpec


class RubricCoach:
    """Scores each action with its env's seat rule; needs requests built by `build_requests`."""

    def __init__(self, use_ground_truth: bool, spec: EnvSpec) -> None:
        if spec.rubric is None:
            raise ValueError(
                f"env `{spec.type}` has no rubric (EnvSpec.rubric): use coach.type=local or openai (an LLM "
                "coach) or coach.type=outcome"
            )
        self.use_ground_truth = use_ground_truth
        self.env_type = spec.type
        self.model_name = f"rubric:{spec.type}"
        self._rules = spec.rubric()

    async def score(self, requests: list[CoachRequest]) -> list[ActionScore]:
        return [self._score_one(r) for r in requests]

    def _score_one(self, request: CoachRequest) -> ActionScore:
        if request.action is None or request.trajectory is None:
            raise ValueError(
                f"request {request.action_id}: the rubric coach needs the action and trajectory on the "
                f"request; build requests with mappa.coach.build_requests"
            )
        rule = self._rules.get(request.agent)
        if rule is None:
            seats = list(self._rules)
            raise ValueError(
                f"rubric `{self.env_type}` has no rule for agent `{request.agent}` (seats: {seats})"
            )
        # ground truth only where the request carries it (an env may show it for some actions only)
        rule_id, value, why = rule(request.action, request.trajectory, request.used_ground_truth)
        return request.verdict(self.model_name, float(value), f"rule {rule_id}: {why}")


def build(config: CoachConfig, inputs: CoachInputs) -> Coach:
    if inputs.env is None:
        raise ValueError("the rubric coach's rules are its env's: pass build_coach the run's env spec")
    return RubricCoach(config.use_ground_truth, inputs.env)


COACH = CoachSpec(
    name="rubric",
    build=build,
    summary="the env's programmatic rules, one per seat (`EnvSpec.rubric`): deterministic, free, offline",
)
