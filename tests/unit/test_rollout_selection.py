"""Which problems an iteration rolls out: deterministic per iteration, every problem once per epoch."""

from mappa.core.types import Problem
from mappa.stages.rollout import select_problems

PROBLEMS = [Problem(f"p{i}", f"q{i}", str(i)) for i in range(10)]


def test_same_iteration_same_problems():
    assert select_problems(PROBLEMS, 4, seed=0, iteration=3) == select_problems(
        PROBLEMS, 4, seed=0, iteration=3
    )


def test_an_epoch_covers_every_problem_once():
    first_epoch = [p.id for it in range(5) for p in select_problems(PROBLEMS, 2, seed=1, iteration=it)]
    assert sorted(first_epoch) == sorted(p.id for p in PROBLEMS)


def test_batches_cross_epoch_boundaries_and_wrap():
    chosen = select_problems(PROBLEMS, 4, seed=0, iteration=2)  # positions 8..11: end of epoch 0, start of 1
    assert len(chosen) == 4
    assert len(select_problems(PROBLEMS[:3], 7, seed=0, iteration=0)) == 7
