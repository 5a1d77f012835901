"""The outcome-only baseline: every action of a trajectory gets the trajectory's outcome as its score.

10 when the team succeeded (MathChat: the right final answer; DSBench: a valid submission), 0 otherwise,
for every agent alike: the sparse, end-of-episode reward that process rewards are meant to beat. With
REINFORCE++ the score still lands on each action's last token, so the only difference from a process coach
is where the signal comes from (`benchmarks/learning.py` compares the three).

It reads the outcome, not the prompt: it sees the ground truth by construction, and its scores say so
(`used_ground_truth` is True). `COACH` declares the type: no model, no template, no endpoint.

Not covered: partial credit (a DSBench relative score, say).
"""

from __future__ import annotations

from mappa.coach.base import Coach
from mappa.coach.prompt import CoachRequest
from mappa.config import CoachConfig
from mappa.config.coach_registry import CoachInputs, CoachSpec
from mappa.core.types import ActionScore

SUCCESS_SCORE, FAILURE_SCORE = 10.0, 0.0


class OutcomeCoach:
    model_name = "outcome"

    async def score(self, requests: list[CoachRequest]) -> list[ActionScore]:
        return [self._score_one(request) for request in requests]

    def _score_one(self, request: CoachRequest) -> ActionScore:
        if request.trajectory is None:
            raise ValueError(
                f"request {request.action_id}: the outcome coach needs the trajectory on the request; "
                "build requests with mappa.coach.build_requests"
            )
        correct = request.trajectory.correct
        return request.verdict(
            self.model_name,
            SUCCESS_SCORE if correct else FAILURE_SCORE,
            f"outcome only: the team {'succeeded' if correct else 'failed'}",
            used_ground_truth=True,
        )


def build(config: CoachConfig, inputs: CoachInputs) -> Coach:
    return OutcomeCoach()


COACH = CoachSpec(
    name="outcome",
    build=build,
    summary="the trajectory's success (10 or 0) for every action: the outcome-only baseline",
)
