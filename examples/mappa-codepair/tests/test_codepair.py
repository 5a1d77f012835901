"""CodePair's grading in mappa's sandbox: hidden tests count what passes, the reference solutions pass them
all, wrong or missing code passes none, and code cannot print a count of its own."""

import pytest
from mappa_codepair.env import _passed, _with_tests
from mappa_codepair.tasks import load_tasks

from mappa.envs.api import (
    Action,
    SandboxLimits,
    Trajectory,
    corruptions_for,
    extract_python_block,
    get_env_spec,
    run_python,
)

LIMITS = SandboxLimits(timeout_s=30, memory_mb=1024)  # room for a busy machine: no test is about timeouts


def hidden_tests_passed(code, problem, marker="m4rk3r"):
    return _passed(run_python(_with_tests(code, problem, marker), None, LIMITS), marker)


@pytest.mark.parametrize("split", ["train", "eval"])
def test_every_reference_solution_passes_its_hidden_tests(split):
    for problem in load_tasks(f"builtin:{split}"):
        assert hidden_tests_passed(problem.answer, problem) == len(problem.meta["tests"]), problem.id


def test_wrong_missing_and_cheating_code_pass_nothing():
    square = next(p for p in load_tasks("builtin:train") if p.id == "square")
    assert hidden_tests_passed("def square(x):\n    return x + x\n", square) == 1  # only square(0) == 0
    assert hidden_tests_passed(None, square) == 0
    assert hidden_tests_passed("def square(x) return", square) == 0  # a syntax error
    cheat = "print('m4rk3r 4')\nimport sys\nsys.exit(0)\n"
    assert hidden_tests_passed(cheat, square) == 0


def test_a_malformed_task_file_names_the_row_and_field(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "a", "problem": "p", "answer": "x", "meta": {"entry_point": "f"}}\n')
    with pytest.raises(ValueError, match=r"row 1 lacks meta.example, meta.tests"):
        load_tasks(str(path))


def test_the_blame_check_plants_this_packages_own_corruption():
    """A corruption declared by a plug-in env is found through the registry, with no edit in mappa/."""
    spec = get_env_spec("codepair")  # the entry point this package registers
    square = next(p for p in load_tasks("builtin:train") if p.id == "square")
    coder = Action(
        "t",
        square.id,
        "coder",
        0,
        0,
        "",
        "",
        "```python\ndef square(x):\n    return x * x\n```\n",
        (),
        (),
        (),
    )
    trajectory = Trajectory("t", square, (coder,), None, False)
    found = corruptions_for(spec.corruptions(), "coder")
    assert [c.name for c in found] == ["wrong-body", "empty", "cut", "echo"]
    wrong = found[0].apply(coder, trajectory)
    assert wrong == "```python\ndef square(x):\n    return None\n```\n"
    assert hidden_tests_passed(extract_python_block(wrong), square) == 0
