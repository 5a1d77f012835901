"""Watching the coach for bias the agents can exploit, iteration by iteration.

Two checks, both on figures the score and rollout stages already record:

- **Score drift** (`drift_warnings`): a category (an agent, or a task kind where the env grades by kind)
  whose mean coach score rose by at least `score_rise` points over the last `window` iterations while its
  ground-truth success rose by less than `success_rise`. That is the exploit the MAPPA paper saw on
  DSBench: the coach rated regression above classification, the agents learned to please it, real
  success did not move. An agent's success is its team's (every agent of a trajectory shares it).
- **Answer collapse** (`answer_shares`, `collapse_warnings`): per agent, the share of its actions whose
  final answer is the agent's most common one (across different problems, a team that answers the same
  everywhere has stopped solving), and the share whose final answer is text of its prompt's instructions,
  found neither in the problem nor in its input (an upstream agent's answer repeated is fine; a CPU
  probe taught the verifier to write the placeholder `\\boxed{answer}` verbatim, which a rubric rewarded
  over no box). A warning when either share jumps.

Not covered: telling an exploit from honest progress on a category that really got easier; the warning
says where to look (`mappa inspect RUN --iteration K`), not what happened.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from mappa.core.types import Trajectory
from mappa.envs.grading import extract_flexible, normalize_answer

MIN_ANSWERS = 4
"""Fewer answers of an agent in an iteration than this: no share is reported (too few to mean anything)."""


def drift_warnings(
    history: dict[str, list[tuple[int, float, float]]],
    window: int = 3,
    score_rise: float = 1.0,
    success_rise: float = 0.05,
) -> list[dict[str, Any]]:
    """`history`: {category: [(iteration, mean score, success rate), ...]} in iteration order. One warning
    per category whose last `window` iterations (consecutive) show the score up and success flat."""
    warnings = []
    for category, points in sorted(history.items()):
        last = points[-window:]
        if len(last) < window or last[-1][0] - last[0][0] != window - 1:
            continue
        (first, score0, success0), (end, score1, success1) = last[0], last[-1]
        if score1 - score0 >= score_rise and success1 - success0 < success_rise:
            warnings.append(
                {
                    "category": category,
                    "iterations": [first, end],
                    "score_change": round(score1 - score0, 3),
                    "success_change": round(success1 - success0, 3),
                    "message": (
                        f"coach bias? {category}: mean coach score {score0:.2f} -> {score1:.2f} over "
                        f"iterations {first}-{end} while success went {success0:.0%} -> {success1:.0%}; "
                        f"look at its actions (mappa inspect RUN --iteration {end})"
                    ),
                }
            )
    return warnings


def final_answer(text: str) -> str | None:
    answer = extract_flexible(text)
    return normalize_answer(answer) if answer else None


def answer_shares(trajectories: Sequence[Trajectory]) -> dict[str, dict[str, Any]]:
    """{agent: {answers, most_common, repeated_share, copied_from_prompt_share}} over the agent's actions
    with a final answer; agents with fewer than MIN_ANSWERS answers are left out."""
    answers: dict[str, list[str]] = defaultdict(list)
    copied: Counter = Counter()
    for trajectory in trajectories:
        question = normalize_answer(trajectory.problem.question)
        for action in trajectory.actions:
            answer = final_answer(action.response)
            if answer is None:
                continue
            answers[action.agent].append(answer)
            from_input = answer in question or answer in normalize_answer(action.observation)
            if answer in normalize_answer(action.prompt) and not from_input:  # the instructions' text
                copied[action.agent] += 1
    shares = {}
    for agent, values in sorted(answers.items()):
        if len(values) < MIN_ANSWERS:
            continue
        common, count = Counter(values).most_common(1)[0]
        shares[agent] = {
            "answers": len(values),
            "most_common": common,
            "repeated_share": round(count / len(values), 3),
            "copied_from_prompt_share": round(copied[agent] / len(values), 3),
        }
    return shares


def collapse_warnings(
    previous: dict[str, dict[str, Any]] | None, current: dict[str, dict[str, Any]], jump: float = 0.3
) -> list[dict[str, Any]]:
    """A warning per agent whose repeated-answer or copied-from-prompt share rose by `jump` or more since
    the previous iteration's `answer_shares` (none for the first iteration)."""
    warnings = []
    for agent, now in sorted(current.items()):
        before = (previous or {}).get(agent)
        if before is None:
            continue
        for field, what in (("repeated_share", "the same final answer"), ("copied_from_prompt_share", "")):
            rise = now[field] - before[field]
            if rise < jump:
                continue
            said = what or "a final answer copied from its prompt"
            if field == "repeated_share":
                said += f" ({now['most_common']!r})"
            warnings.append(
                {
                    "category": agent,
                    "field": field,
                    "change": round(rise, 3),
                    "message": (
                        f"answer collapse? {agent}: {now[field]:.0%} of its answers are {said}, up from "
                        f"{before[field]:.0%}"
                    ),
                }
            )
    return warnings
