r"""The rubric coach's rules for MathChat (`mappa.coach.rubric` applies them): each returns (rule id, score,
what it checked), and the rationale names the rule that fired. Rules marked [gt] look at the outcome (the
team's final answer against the reference) and apply only with `use_ground_truth`; without it the rubric
judges the action alone. With ground truth the rubric is an outcome-style baseline: it blames the upstream
seat whose output carried the wrong final answer, and credits an upstream seat that had the right one.

Checked in order, the first match fires:

| seat     | rule id               | condition                                                  | score |
|----------|-----------------------|------------------------------------------------------------|-------|
| solver   | solver.empty          | blank response                                             | 0     |
| solver   | solver.gt_correct     | [gt] the team's final answer is correct                    | 9     |
| solver   | solver.gt_led_wrong   | [gt] wrong; states the team's final answer, not the ref.   | 2     |
| solver   | solver.gt_had_right   | [gt] wrong; states the reference answer                    | 7     |
| solver   | solver.gt_wrong       | [gt] wrong otherwise                                       | 4     |
| solver   | solver.truncated      | cut at the token limit (finish_reason = length)            | 3     |
| solver   | solver.reasoned       | otherwise                                                  | 6     |
| executor | executor.no_code      | no code block, so no tool call                             | 1     |
| executor | executor.sandbox      | the sandbox refused or killed the run (memory, limits)     | 1     |
| executor | executor.timeout      | the code timed out                                         | 1     |
| executor | executor.crashed      | non-zero exit status                                       | 2     |
| executor | executor.silent       | ran but printed nothing                                    | 3     |
| executor | executor.gt_correct   | [gt] ran and printed; the team's final answer is correct   | 9     |
| executor | executor.gt_had_right | [gt] printed the reference answer; the team is still wrong | 8     |
| executor | executor.gt_led_wrong | [gt] printed the team's wrong final answer, not the ref.   | 2     |
| executor | executor.gt_printed_wrong | [gt] printed, but not the reference answer         | 3     |
| executor | executor.printed      | ran and printed something                                  | 7     |
| verifier | verifier.placeholder  | boxed no number where the answer is one (`\boxed{answer}`) | 0     |
| verifier | verifier.gt_unboxed_right | [gt] nothing boxed; its last number is the reference   | 3     |
| verifier | verifier.unboxed_agrees | nothing boxed; its last number is in the last good stdout | 2     |
| verifier | verifier.no_boxed     | no final answer: no non-empty \boxed{...} (nor, with      | 0     |
|          |                       | `env.answer_format: last_number`, a last number)           |       |
| verifier | verifier.gt_correct   | [gt] the team's final answer is correct                    | 10    |
| verifier | verifier.gt_reported  | [gt] wrong, but what the last good run printed (upstream)  | 3     |
| verifier | verifier.gt_wrong     | [gt] the team's final answer is wrong                      | 1     |
| verifier | verifier.agrees       | boxed answer occurs in the last successful executor stdout | 8     |
| verifier | verifier.disagrees    | boxed answer absent from the last successful stdout        | 3     |
| verifier | verifier.unchecked    | no successful executor output to compare with              | 5     |

The verifier's rules credit content, not form: a box around the placeholder the prompt used to show
(`\boxed{answer}`) earns nothing, a box around the wrong number little, the right number unboxed a
little, the right number boxed everything (measured: a rubric that scored any box above none taught the
verifier to write `\boxed{answer}` verbatim within two iterations).

"States an answer" means: for numbers, some number in the text equals it (as a fraction: 0.75 = 3/4,
1,000 = 1000); otherwise the answer's text occurs in the text with spaces removed. A solver that lists
many numbers may state an answer by chance: these are heuristics, stated so they can be argued with.

Not covered: judging reasoning quality (that is what the LLM coaches are for).
"""

from __future__ import annotations

import re
from fractions import Fraction

from mappa.envs.api import Action, Trajectory, Verdict
from mappa.envs.mathchat.grading import extract_flexible

# --- answers in text ---------------------------------------------------------------------------------

_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")


def _as_number(text: str) -> Fraction | None:
    text = text.strip().strip("$").replace(",", "").rstrip(".")
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def states_answer(text: str, answer: str | None) -> bool:
    """Whether `text` states `answer`: numbers compared as fractions, other answers as text without spaces."""
    if not answer or not answer.strip():
        return False
    number = _as_number(answer)
    if number is not None:
        return any(_as_number(token) == number for token in _NUMBER.findall(text))
    return re.sub(r"\s+", "", answer) in re.sub(r"\s+", "", text)


def last_boxed(text: str) -> str | None:
    r"""Content of the last `\boxed{...}` (nested braces allowed), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 1, start + len("\\boxed{")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


# --- MathChat seats ----------------------------------------------------------------------------------


def _outcome_wrong_led(output: str, trajectory: Trajectory) -> tuple[bool, bool]:
    """(output states the team's wrong final answer and not the reference, output states the reference)."""
    reference = states_answer(output, trajectory.problem.answer)
    led = states_answer(output, trajectory.final_answer) and not reference
    return led, reference


def mathchat_solver(action: Action, trajectory: Trajectory, use_gt: bool) -> Verdict:
    if not action.response.strip():
        return "solver.empty", 0, "the response is blank"
    if use_gt:
        if trajectory.correct:
            return "solver.gt_correct", 9, "the team's final answer is correct"
        led, had_right = _outcome_wrong_led(action.response, trajectory)
        if led:
            return "solver.gt_led_wrong", 2, "the team is wrong and this response states its final answer"
        if had_right:
            return "solver.gt_had_right", 7, "the team is wrong, but this response states the reference"
        return "solver.gt_wrong", 4, "the team's final answer is wrong"
    if action.finish_reason == "length":
        return "solver.truncated", 3, "the response was cut at the token limit"
    return "solver.reasoned", 6, "a non-empty, complete response (reasoning not judged by the rubric)"


def mathchat_executor(action: Action, trajectory: Trajectory, use_gt: bool) -> Verdict:
    result = action.tool_result
    if action.tool_call is None or result is None:
        return "executor.no_code", 1, "no code block, so nothing ran"
    if result.error:
        return "executor.sandbox", 1, f"the sandbox refused or killed the run: {result.error[:120]}"
    if result.timed_out:
        return "executor.timeout", 1, "the code timed out"
    if result.exit_code != 0:
        return "executor.crashed", 2, f"the code exited with status {result.exit_code}"
    if not result.stdout.strip():
        return "executor.silent", 3, "the code ran but printed nothing"
    if use_gt:
        if trajectory.correct:
            return "executor.gt_correct", 9, "the code ran and printed; the team's final answer is correct"
        led, had_right = _outcome_wrong_led(result.stdout, trajectory)
        if had_right:
            return "executor.gt_had_right", 8, "the code printed the reference; the team is still wrong"
        if led:
            return "executor.gt_led_wrong", 2, "the code printed the team's wrong final answer"
        return "executor.gt_printed_wrong", 3, "the code ran, but what it printed is not the reference"
    return "executor.printed", 7, "the code ran and printed output"


def mathchat_verifier(action: Action, trajectory: Trajectory, use_gt: bool) -> Verdict:
    boxed = last_boxed(action.response)
    stdout = _last_good_stdout(action, trajectory)
    reference = trajectory.problem.answer
    if boxed is not None and is_placeholder(boxed, reference):
        return "verifier.placeholder", 0, f"boxed a placeholder ({boxed.strip()[:40]!r}), not an answer"
    answer = boxed if boxed is not None and boxed.strip() else _answer_read_by_env(action, trajectory)
    if answer is None:
        last = extract_flexible(action.response)
        if use_gt and last is not None and states_answer(last, reference):
            return "verifier.gt_unboxed_right", 3, "nothing boxed, but its last number is the reference"
        if not use_gt and last is not None and stdout is not None and states_answer(stdout, last):
            return "verifier.unboxed_agrees", 2, "nothing boxed; its last number is the program's output"
        return "verifier.no_boxed", 0, "no non-empty \\boxed{} answer"
    if use_gt:
        if trajectory.correct:
            return "verifier.gt_correct", 10, "the team's final answer is correct"
        if stdout is not None and states_answer(stdout, answer):
            return "verifier.gt_reported", 3, "wrong, but what the executor's program printed (its fault)"
        return "verifier.gt_wrong", 1, "the team's final answer is wrong"
    if stdout is None:
        return "verifier.unchecked", 5, "a final answer; no successful executor output to compare with"
    if states_answer(stdout, answer):
        return "verifier.agrees", 8, "the final answer appears in the last successful executor output"
    return "verifier.disagrees", 3, "the final answer is absent from the last successful executor output"


def _answer_read_by_env(action: Action, trajectory: Trajectory) -> str | None:
    """The final answer the env read from this reply without a box (`env.answer_format: last_number`)."""
    is_last = action.index == len(trajectory.actions) - 1
    return trajectory.final_answer if is_last and trajectory.final_answer else None


def is_placeholder(boxed: str, reference: str | None) -> bool:
    """A box that holds no answer: blank, or no digit at all where the reference answer is a number."""
    text = boxed.strip()
    if not text:
        return False  # an empty box is "nothing boxed"
    numeric_reference = reference is not None and _as_number(reference) is not None
    return numeric_reference and not re.search(r"\d", text)


def _last_good_stdout(action: Action, trajectory: Trajectory) -> str | None:
    """stdout of the last successful, non-silent tool run before `action` in the trajectory."""
    for earlier in reversed(trajectory.actions[: action.index]):
        result = earlier.tool_result
        if result is not None and result.ok and result.stdout.strip():
            return result.stdout
    return None


RULES = {"solver": mathchat_solver, "executor": mathchat_executor, "verifier": mathchat_verifier}
