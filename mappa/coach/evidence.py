"""What a one-fact question of the criteria coach is asked about, when the template names it.

A criteria line may start with an evidence tag, `[response]`, `[program]` or `[final]`:

    executor: [program] Did the program print the number ${answer}?
    solver: [response] Does the text contain the number ${answer}?
    verifier: [final] Is the final answer ${answer}?

and the question is then asked about that piece alone, under a label, instead of the whole rendered
action (the template's context):

    response   TEXT: the agent's output (reasoning blocks stripped, its last `limit` characters)
    program    PROGRAM OUTPUT: what the latest program up to this action printed (the action's own, or
               the upstream one it was shown): stdout's tail, and the error's tail when it failed;
               "(no program)" where none ran yet
    final      The team's final answer: the trajectory's final answer as the env extracted it, one line

In a question, `${answer}` is the reference answer (with ground truth only), `${final}` the team's
final answer and `${wrong_final}` the team's final answer where it is wrong (with ground truth only). A
question whose placeholder has no value (no final answer; for `${wrong_final}` also a right one) is not
asked but answered No by rule (`mappa.coach.criteria.missing_value`).

Measured with Qwen2.5-Coder-0.5B (pairwise AUC against the rubric, `benchmarks/coach_signal.py`;
mathchat-facts on 1,728 stored actions of six learning runs: executor 0.89, solver 0.92, verifier 0.97): a
question about a short piece is both sharper and about 10x cheaper than the same question after the
whole action (the executor's "printed ${answer}?" 0.86 alone against 0.51 in context; 0.2 s per question
against 2.6 s per action), because a 0.5B model compares two numbers well and reads a page of code and
prose poorly. (Its P(Yes) stays in a narrow band, 0.13-0.5: it orders actions well, and advantages are
whitened per agent, so the band's width does not matter.)

Not covered: evidence an env defines for itself (the three pieces are what every env's actions have).
"""

from __future__ import annotations

import re

from mappa.core.types import Action, Trajectory

LABELS = {"response": "TEXT", "program": "PROGRAM OUTPUT", "final": "The team's final answer"}
_TAG = re.compile(r"^\[(\w+)\]\s*(.+)$", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)


def split_tag(question: str) -> tuple[str | None, str]:
    """(evidence tag or None, the question without it); an unknown tag is a ValueError naming the tags."""
    match = _TAG.match(question.strip())
    if match is None:
        return None, question
    tag, text = match.group(1), match.group(2).strip()
    if tag not in LABELS:
        known = ", ".join(f"[{name}]" for name in sorted(LABELS))
        raise ValueError(f"criteria question {question!r}: unknown evidence [{tag}]; use one of {known}")
    return tag, text


def evidence_text(tag: str, action: Action, trajectory: Trajectory, limit: int = 600) -> str:
    """The piece of `action` (of `trajectory`) that an evidence tag names, labelled, within `limit` chars."""
    if tag == "response":
        text = _THINK.sub("", action.response).strip() or "(empty)"
    elif tag == "program":
        text = program_output(latest_program(action, trajectory), limit)
    else:  # one short line, as a small model reads a fact best
        return f"{LABELS[tag]}: {trajectory.final_answer if trajectory.final_answer else '(none)'}"
    return f"{LABELS[tag]}:\n{text[-limit:]}"


def latest_program(action: Action, trajectory: Trajectory) -> Action | None:
    """The last action up to and including `action` that ran a program (None if none did)."""
    latest = None
    for earlier in trajectory.actions:
        if earlier.tool_call is not None:
            latest = earlier
        if earlier.id == action.id:
            break
    return latest


def program_output(action: Action | None, limit: int) -> str:
    """What an action's program printed: stdout's tail, then the error's tail if it failed."""
    if action is None:
        return "(no program)"
    result = action.tool_result
    if result is None:
        return "(no result recorded)"
    printed = (result.stdout or "").strip()[-(limit // 2) :] or "(nothing printed)"
    failed = result.timed_out or bool(result.error) or (result.exit_code not in (0, None))
    if failed:
        why = result.error or ("timed out" if result.timed_out else (result.stderr or "").strip())
        printed += f"\nERROR: {why[-(limit // 3) :]}"
    return printed
