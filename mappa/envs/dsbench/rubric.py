"""The rubric coach's rules for the DSBench pipeline env: blame goes to the agent that caused a failure.

An agent is *blocked* when a file it needs was missing from the workspace when it acted (the files of the
last program run before it, or the task's public files): the fault is upstream's, so a blocked agent is
never scored below 4, and gets 5 when it names the missing file (reporting an upstream failure is good
work). The upstream agent that did not save the file is scored low by its own rule (saved none / some).
Rules marked [gt] read the graded submission and apply only with `use_ground_truth`, to the Analyst.

| seat | rule id | condition (checked in order, the first match fires) | score |
|---|---|---|---|
| any | <seat>.blocked_reported | an input file was missing; its text names that file | 5 |
| any | <seat>.blocked | an input file was missing | 4 |
| any | <seat>.no_code | no code block, so nothing ran | 1 |
| any | <seat>.sandbox | the sandbox refused or killed the run (memory, limits) | 1 |
| any | <seat>.timeout | the code timed out | 1 |
| any | <seat>.crashed | non-zero exit status, inputs present: its own fault | 2 |
| data_engineer | data_engineer.saved_all | X_train.pkl, y_train.pkl, X_test.pkl all exist afterwards | 8 |
| modeler | modeler.saved_all | model.pkl exists afterwards | 8 |
| analyst | analyst.gt_invalid | [gt] wrote submission.csv; the final one is invalid | 2 |
| analyst | analyst.gt_valid | [gt] valid final submission: 7 + 3 x relative score (<=1) | 7-10 |
| analyst | analyst.saved_all | submission.csv exists afterwards | 7 |
| any | <seat>.saved_some | some of its files exist afterwards | 4 |
| any | <seat>.saved_none | ran, but none of its files exist afterwards | 3 |

Not covered: whether features, model or predictions are good (the LLM coach judges that; the [gt] rule
sees only the final score).
"""

from __future__ import annotations

from mappa.envs.api import Action, Trajectory, Verdict
from mappa.envs.dsbench.task import OUTPUTS, PUBLIC_FILES

INPUTS = {
    "data_engineer": ("train.csv", "test.csv"),
    "modeler": ("X_train.pkl", "y_train.pkl"),
    "analyst": ("model.pkl", "X_test.pkl"),
}


def files_before(action: Action, trajectory: Trajectory) -> set[str]:
    """The workspace's files when `action` was taken: the last earlier run's listing, else the public
    files."""
    for earlier in reversed(trajectory.actions[: action.index]):
        if earlier.tool_result is not None:
            return set(earlier.tool_result.files)
    return set(PUBLIC_FILES)


def judge_seat(action: Action, trajectory: Trajectory, use_gt: bool) -> Verdict:
    seat = action.agent
    missing = [name for name in INPUTS[seat] if name not in files_before(action, trajectory)]
    if missing:
        return _blocked(seat, action, missing)
    result = action.tool_result
    if action.tool_call is None or result is None:
        return f"{seat}.no_code", 1, "no code block, so nothing ran"
    if result.error:
        return f"{seat}.sandbox", 1, f"the sandbox refused or killed the run: {result.error[:120]}"
    if result.timed_out:
        return f"{seat}.timeout", 1, "the code timed out"
    if result.exit_code != 0:
        return (
            f"{seat}.crashed",
            2,
            f"its inputs were there, but its code exited with status {result.exit_code}",
        )
    saved = [name for name in OUTPUTS[seat] if name in result.files]
    if seat == "analyst" and saved and use_gt and _is_last_of_seat(action, trajectory):
        return _graded(trajectory)
    if len(saved) == len(OUTPUTS[seat]):
        return f"{seat}.saved_all", 7 if seat == "analyst" else 8, f"saved {', '.join(saved)}"
    if saved:
        lacking = sorted(set(OUTPUTS[seat]) - set(saved))
        return f"{seat}.saved_some", 4, f"saved {', '.join(saved)} but not {', '.join(lacking)}"
    return f"{seat}.saved_none", 3, f"ran, but saved none of {', '.join(OUTPUTS[seat])}"


def _blocked(seat: str, action: Action, missing: list[str]) -> Verdict:
    result = action.tool_result
    said = action.response + (result.stdout + result.stderr if result is not None else "")
    names = ", ".join(missing)
    if any(name in said for name in missing):
        return f"{seat}.blocked_reported", 5, f"upstream left {names} missing; this agent reported it"
    return f"{seat}.blocked", 4, f"upstream left {names} missing (not this agent's fault)"


def _graded(trajectory: Trajectory) -> Verdict:
    outcome = trajectory.outcome
    if not outcome.get("valid"):
        return "analyst.gt_invalid", 2, f"the final submission is invalid: {outcome.get('problem')}"
    fair = min(max(float(outcome.get("fair_score") or 0.0), 0.0), 1.0)
    return "analyst.gt_valid", round(7 + 3 * fair, 2), f"valid submission, relative score {fair:.2f}"


def _is_last_of_seat(action: Action, trajectory: Trajectory) -> bool:
    return not any(a.agent == action.agent for a in trajectory.actions[action.index + 1 :])


RULES = {seat: judge_seat for seat in OUTPUTS}
