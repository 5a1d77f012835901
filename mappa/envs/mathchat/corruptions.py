"""MathChat's corruptions for the blame check (`mappa.envs.corruption`): one mistake per seat's role.

    solver    wrong-number     its reasoning states a wrong number: the reference answer where the text
                               has it (else its last number) becomes the wrong number W
              wrong-operation  its first arithmetic sign is swapped (+ <-> -, * -> +, / -> *)
    executor  prints-wrong     its program's last print prints W instead (a program with no print gets one)
              raises           its program raises before printing (ZeroDivisionError on its first line)
    verifier  wrong-final      its final answer is W (in \\boxed{} where it boxed, else its last number)

W is the reference answer plus one (for a non-integer reference: 7, or 8 where the reference is 7), so the
corrupted team is wrong for certain. Not covered: subtler slips (an off-by-one in a loop).
"""

from __future__ import annotations

import re

from mappa.envs.api import Action, Corruption, Trajectory, replace_python_block

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_SIGN = re.compile(r"(?<=[\d)\s])([-+*/])(?=[\s(\d])")
_SWAP = {"+": "-", "-": "+", "*": "+", "/": "*"}
_PRINT = re.compile(r"print\((.*)\)")
_BOXED = re.compile(r"\\boxed\{[^{}]*\}")


def wrong_number(answer: str) -> str:
    """A number that is certainly not the answer."""
    try:
        return str(int(answer.strip()) + 1)
    except ValueError:
        return "8" if answer.strip() == "7" else "7"


def _solver_wrong_number(action: Action, trajectory: Trajectory) -> str | None:
    answer, text = trajectory.problem.answer.strip(), action.response
    wrong = wrong_number(answer)
    with_answer = re.sub(rf"(?<![\d.]){re.escape(answer)}(?![\d.])", wrong, text)
    if with_answer != text:
        return with_answer
    numbers = list(_NUMBER.finditer(text))
    if not numbers:
        return None
    last = numbers[-1]
    return text[: last.start()] + wrong + text[last.end() :]


def _solver_wrong_operation(action: Action, trajectory: Trajectory) -> str | None:
    match = _SIGN.search(action.response)
    if match is None:
        return None
    text = action.response
    return text[: match.start()] + _SWAP[match.group(1)] + text[match.end() :]


def _executor_prints_wrong(action: Action, trajectory: Trajectory) -> str | None:
    wrong = f"print({wrong_number(trajectory.problem.answer)})"

    def rewrite(code: str) -> str:
        prints = list(_PRINT.finditer(code))
        if not prints:
            return code.rstrip("\n") + "\n" + wrong + "\n"
        last = prints[-1]
        return code[: last.start()] + wrong + code[last.end() :]

    return replace_python_block(action.response, rewrite)


def _executor_raises(action: Action, trajectory: Trajectory) -> str | None:
    return replace_python_block(action.response, lambda code: "x = 1 / 0\n" + code)


def _verifier_wrong_final(action: Action, trajectory: Trajectory) -> str | None:
    wrong, text = wrong_number(trajectory.problem.answer), action.response
    boxes = list(_BOXED.finditer(text))
    if boxes:
        last = boxes[-1]
        return text[: last.start()] + f"\\boxed{{{wrong}}}" + text[last.end() :]
    numbers = list(_NUMBER.finditer(text))
    if not numbers:
        return text.rstrip() + f" The answer is {wrong}."
    last = numbers[-1]
    return text[: last.start()] + wrong + text[last.end() :]


CORRUPTIONS = (
    Corruption("wrong-number", "solver", _solver_wrong_number, "the solver states a wrong number"),
    Corruption("wrong-operation", "solver", _solver_wrong_operation, "the solver uses the wrong operation"),
    Corruption("prints-wrong", "executor", _executor_prints_wrong, "the program prints a wrong number"),
    Corruption("raises", "executor", _executor_raises, "the program raises an error"),
    Corruption("wrong-final", "verifier", _verifier_wrong_final, "the verifier states a wrong final answer"),
)
