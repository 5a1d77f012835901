"""How sure is a held-out lift? Paired bootstrap intervals over problems, the spread over seeds, and the
problems gained and lost, for `benchmarks/learning.py`.

Inputs are per-problem correctness (1/0) on one fixed list of held-out problems: the base team's (greedy,
the same for every seed) and each trained run's. For a source trained with seeds s = 1..S:

    lift        = mean over seeds of (success after training - base success)
    vs another  = mean over seeds of (success of this source - success of the other), paired by seed
                  (the two were trained at equal samples with the same seed)

The 95% interval resamples the problems with replacement (the same draw for the base and every run:
paired), 10,000 times, and takes the 2.5th and 97.5th percentiles of the recomputed statistic: it says
how much the figure moves with another draw of problems like these. It does not cover another draw of
seeds; the per-seed values, each with its own interval, are reported beside it for that. Gained / lost:
per seed, the problems the base got wrong and the trained team right, and the other way round.

Not covered: multiple-comparison corrections, hierarchical (problem x seed) bootstraps.
"""

from __future__ import annotations

import numpy as np

RESAMPLES = 10_000


def bootstrap_interval(
    differences: np.ndarray, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """Mean over seeds and problems of `differences` (seeds x problems) and its 95% paired-bootstrap
    interval over problems."""
    differences = np.atleast_2d(np.asarray(differences, dtype=float))
    problems = differences.shape[1]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, problems, size=(resamples, problems))
    per_problem = differences.mean(axis=0)  # the mean over seeds is linear: resample its columns
    statistics = per_problem[draws].mean(axis=1)
    low, high = np.percentile(statistics, [2.5, 97.5])
    return float(per_problem.mean()), float(low), float(high)


def lift(base: np.ndarray, after: np.ndarray) -> dict:
    """The lift of one source over the base: `base` (problems,), `after` (seeds x problems), 0/1."""
    base, after = np.asarray(base, dtype=float), np.atleast_2d(np.asarray(after, dtype=float))
    mean, low, high = bootstrap_interval(after - base)
    per_seed = (after.mean(axis=1) - base.mean()).tolist()
    return {
        "mean": mean,
        "ci95": [low, high],
        "per_seed": per_seed,
        "per_seed_ci95": _per_seed_intervals(after - base),
        "gained": [int(((base == 0) & (row == 1)).sum()) for row in after],
        "lost": [int(((base == 1) & (row == 0)).sum()) for row in after],
        "problems": int(base.size),
    }


def difference(one: np.ndarray, other: np.ndarray) -> dict:
    """One source against another, paired by seed and problem: both (seeds x problems), 0/1."""
    one, other = np.atleast_2d(np.asarray(one, dtype=float)), np.atleast_2d(np.asarray(other, dtype=float))
    if one.shape != other.shape:
        raise ValueError(f"paired sources need the same seeds and problems: {one.shape} vs {other.shape}")
    mean, low, high = bootstrap_interval(one - other)
    return {
        "mean": mean,
        "ci95": [low, high],
        "per_seed": (one - other).mean(axis=1).tolist(),
        "per_seed_ci95": _per_seed_intervals(one - other),
    }


def lifts_by_source(base: np.ndarray, runs: dict[tuple[str, int], np.ndarray]) -> dict:
    """Per source of `runs` ({(source, seed): 0/1 per problem}; in order of first appearance, outcome-only
    last): its seeds, its lift over `base` and, for every other source, the paired difference to
    outcome-only on the seeds both have."""
    sources = sorted(dict.fromkeys(source for source, _ in runs), key=lambda source: source == "outcome")
    report: dict = {}
    for source in sources:
        seeds = sorted(seed for s, seed in runs if s == source)
        report[source] = {"seeds": seeds, "vs_base": lift(base, np.array([runs[source, s] for s in seeds]))}
        shared = [seed for seed in seeds if ("outcome", seed) in runs]
        if source != "outcome" and shared:
            one = np.array([runs[source, seed] for seed in shared])
            other = np.array([runs["outcome", seed] for seed in shared])
            report[source]["vs_outcome"] = {"seeds": shared, **difference(one, other)}
    return report


def as_bits(values: np.ndarray) -> str:
    """0/1 per problem as a string of '0'/'1' (how the benchmark's JSON keeps them)."""
    return "".join("1" if value else "0" for value in np.asarray(values, dtype=float))


def from_bits(bits: str) -> np.ndarray:
    if set(bits) - {"0", "1"}:
        raise ValueError(f"per-problem results must be a string of 0 and 1, got {bits[:20]!r}...")
    return np.array([float(c) for c in bits])


def _per_seed_intervals(differences: np.ndarray) -> list[list[float]]:
    """Each seed's own 95% interval over problems (seeds x problems in)."""
    return [list(bootstrap_interval(row[None, :])[1:]) for row in differences]
