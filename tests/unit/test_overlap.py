"""Train/eval overlap, in the MAPPA authors' situation: an eval file whose problems partly repeat training
problems with other whitespace and numbering. Found by `mappa train` before anything starts; `env.overlap`
drops them from evaluations (the default), warns, or stops the command."""

import json

import pytest

from mappa.cli import main
from mappa.config import load_config
from mappa.core.types import Problem
from mappa.envs.mathchat import SPEC as MATHCHAT
from mappa.envs.overlap import find_overlap
from mappa.stages.evaluate import held_out_problems
from mappa.storage.run import Run

TRAIN = [
    "Let $f(x) = 3x^2 - 5x + 2$. Find the sum of all real values of $x$ for which $f(f(x)) = 2$, and express "
    "your answer as a common fraction in lowest terms.",
    "A circle of radius 5 is inscribed in a right triangle whose hypotenuse has length 26. What is the "
    "perimeter of the triangle?",
    "How many positive integers less than 1000 are divisible by 7 but not by 11?",
]
EVAL = [
    "12.   Let $f(x) = 3x^2 - 5x + 2$.  Find the sum of all real values of $x$ for which\n$f(f(x)) = 2$, and "
    "express your answer as a common fraction in lowest terms.",  # the first, renumbered and re-spaced
    "Problem 7: How many positive integers less than 1000 are divisible by 7 but not by 11?",  # exact
    "A circle of radius 5 is inscribed in a right triangle whose hypotenuse has length 26. What is the area "
    "of the triangle?",  # a near copy: most of its 13-word runs are the training problem's
    "What is the largest prime factor of 9991?",  # new
]


def write(path, questions, prefix):
    rows = [{"id": f"{prefix}-{i}", "problem": q, "answer": "1"} for i, q in enumerate(questions)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.fixture
def sources(tmp_path):
    return write(tmp_path / "train.jsonl", TRAIN, "train"), write(tmp_path / "eval.jsonl", EVAL, "eval")


def test_repeats_with_other_whitespace_and_numbering_are_found(sources):
    train, held_out = (MATHCHAT.load_problems(source) for source in sources)
    found = {o.eval_id: (o.train_id, o.how) for o in find_overlap(train, held_out)}
    assert found == {
        "eval-0": ("train-0", "exact"),
        "eval-1": ("train-2", "exact"),
        "eval-2": ("train-1", "13-gram"),
    }


def test_the_default_drops_them_from_evaluations(sources, tmp_path):
    settings = [f"env.train_data={sources[0]}", f"env.eval_data={sources[1]}", f"storage.root={tmp_path}"]
    run = Run.create(load_config("configs/mathchat-cpu.yaml", settings), "overlap")
    problems, dropped = held_out_problems(run)
    assert [p.id for p in problems] == ["eval-3"] and dropped == 3
    warned = Run.create(load_config("configs/mathchat-cpu.yaml", [*settings, "env.overlap=warn"]), "warn")
    problems, dropped = held_out_problems(warned)
    assert len(problems) == 4 and dropped == 0


def test_mappa_train_reports_the_overlap_before_it_starts_or_stops(sources, tmp_path, capsys):
    settings = [
        f"env.train_data={sources[0]}",
        f"env.eval_data={sources[1]}",
        f"storage.root={tmp_path / 'r'}",
    ]
    args = [part for setting in [*settings, "env.overlap=error"] for part in ("--set", setting)]
    assert main(["train", "configs/mathchat-cpu.yaml", *args]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "3 of 4 held-out problems" in out and "eval-1 ~ train-2 (exact)" in out and "env.overlap=drop" in out
    )
    assert not (tmp_path / "r").exists()  # nothing was started or written


def test_arithmetic_operators_are_part_of_the_text():
    # "What is 15 - 9?" is not "What is 15 + 9?": without its operator the normalised text would be equal
    train = [Problem("t", "What is 15 + 9?", "24")]
    assert find_overlap(train, [Problem("e", "What is 15 - 9?", "6")]) == []
    assert len(find_overlap(train, [Problem("e", "what is 15+9 ?", "24")])) == 1
