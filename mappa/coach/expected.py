"""A coach scored from the probabilities a local model gives the score tokens, not from its free text.

Small models (SmolLM2-135M on a CPU) rarely follow "end with PROCESS_SCORE: <0-10>": measured on the CPU
demo's first rollout, 0 of 8 free-text answers parsed, so every action got the fallback score and no
learning signal. This coach instead opens the assistant's answer with `PROCESS_SCORE: ` and reads the
next-token distribution over the digits 0-9 (and, for "1", whether "0" follows, which makes 10):

    p(s) for s in 0..10, renormalised over the score tokens;  score = sum_s s * p(s)

(the probability-weighted score of G-Eval, Liu et al. 2023). It always yields a score in [0, 10]; its
rationale states the distribution's mode and the mass it covered. Whether such scores track action quality
is an empirical question for each coach model: see the score stage's bias report.

Not covered: rationales in the coach's own words (use `scoring: generate` with a model that follows the
format, or the openai backend).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from mappa.coach.prompt import CoachRequest
from mappa.core.types import ActionScore

SCORE_PREFIX = "PROCESS_SCORE: "
DIGITS = [str(d) for d in range(10)]

# (chats, assistant prefix, single-token candidates, positions) -> [chat][position][candidate] logprobs
LogprobFn = Callable[[list[list[dict[str, str]]], str, list[str], int], Awaitable[list[list[list[float]]]]]


def score_distribution(digit_logprobs: list[float], zero_after_one_logprob: float) -> list[float]:
    """p(0..10) from next-token logprobs of the digits and of "0" after "1"."""
    probs = [math.exp(x) for x in digit_logprobs]
    total = sum(probs)
    if total <= 0:
        return [1.0 / 11] * 11
    probs = [p / total for p in probs]
    ten = probs[1] * math.exp(zero_after_one_logprob)
    return [probs[0], probs[1] - ten, *probs[2:], ten]


class ExpectedScoreCoach:
    """Scores every action with the expected value of the coach model's score-token distribution."""

    def __init__(self, logprob_fn: LogprobFn, model_name: str) -> None:
        self.model_name = f"{model_name}:expected"
        self._logprob_fn = logprob_fn

    async def score(self, requests: list[CoachRequest]) -> list[ActionScore]:
        if not requests:
            return []
        chats = [r.messages for r in requests]
        # One pass over "PROCESS_SCORE: 1": the digit distribution after the space, and "0" after the "1".
        rows = await self._logprob_fn(chats, SCORE_PREFIX + "1", DIGITS, 2)
        scores = []
        for request, (row, after_one) in zip(requests, rows, strict=True):
            dist = score_distribution(row, after_one[0])
            value = sum(s * p for s, p in enumerate(dist))
            mode = max(range(11), key=lambda s: dist[s])
            covered = sum(math.exp(x) for x in row)
            rationale = (
                f"expected score {value:.2f} from the coach's score-token probabilities "
                f"(mode {mode} at {dist[mode]:.0%}; score tokens held {covered:.0%} of the next-token mass)"
            )
            scores.append(request.verdict(self.model_name, round(value, 4), rationale))
        return scores
