"""How sure is a held-out lift? Paired bootstrap intervals over problems, the spread over seeds, and the
problems gained and lost: for `benchmarks/learning.py` and `mappa inspect RUN --evaluations`.

Inputs are per-problem correctness (1/0) on one fixed list of held-out problems: the base team's (greedy,
the same for every seed) and each trained run's. For a source trained with seeds s = 1..S:

    lift        = mean over seeds of (success after training - base success)
    vs another  = mean over seeds of (success of this source - success of the other), paired by seed
                  (the two were trained at equal samples with the same seed)

Three 95% intervals, each saying how far the figure moves with another draw of something:

    ci95                 problems only: resamples the problems with replacement (the same draw for the base
                         and every run: paired), 10,000 times, 2.5th and 97.5th percentiles of the mean
    seed_ci95            seeds only: Student's t over the per-seed values (n - 1 degrees of freedom; None
                         with one seed). The SEED-LEVEL interval: a claim is "met" only when it says so
    ci95_seeds_problems  both: a two-level bootstrap that resamples the seeds and, for each draw, the problems
                         (paired as above); used to flag a kind of problem that got significantly worse

With three seeds the t interval is wide (t = 4.30); the two-level bootstrap is tighter, and under-covers
with so few seeds (the variance of a 3-point resample is 2/3 of the seeds'). So a lift is called met on
the first and a regression flagged on the second: both choices err against a claimed lift. Gained / lost:
per seed, the problems the base got wrong and the trained team right, and the other way round.

Per kind (`lifts_by_kind`): the same figures on the problems of each kind (MathChat: the operation and the
form, `mappa.envs.mathchat.kinds`); a kind whose two-level interval lies below 0 is a regression.

Not covered: multiple-comparison corrections over kinds.
"""

from __future__ import annotations

import numpy as np

RESAMPLES = 10_000
# Student's t, 97.5th percentile, by degrees of freedom (1-30; beyond, the normal's 1.96 is within 4%)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)  # fmt: skip


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
    return {
        **_intervals(after - base),
        "gained": [int(((base == 0) & (row == 1)).sum()) for row in after],
        "lost": [int(((base == 1) & (row == 0)).sum()) for row in after],
        "problems": int(base.size),
    }


def difference(one: np.ndarray, other: np.ndarray) -> dict:
    """One source against another, paired by seed and problem: both (seeds x problems), 0/1."""
    one, other = np.atleast_2d(np.asarray(one, dtype=float)), np.atleast_2d(np.asarray(other, dtype=float))
    if one.shape != other.shape:
        raise ValueError(f"paired sources need the same seeds and problems: {one.shape} vs {other.shape}")
    return _intervals(one - other)


def _intervals(differences: np.ndarray) -> dict:
    """The mean of `differences` (seeds x problems), its three intervals (module docstring), and each
    seed's value with its own interval over problems."""
    mean, low, high = bootstrap_interval(differences)
    per_seed = differences.mean(axis=1).tolist()
    return {
        "mean": mean,
        "ci95": [low, high],
        "seed_ci95": seed_interval(per_seed),
        "ci95_seeds_problems": list(two_level_interval(differences)[1:]),
        "per_seed": per_seed,
        "per_seed_ci95": _per_seed_intervals(differences),
    }


def seed_interval(per_seed: list[float]) -> list[float] | None:
    """Student's t 95% interval of the mean over seeds (paired: each value one seed's change); None for one
    seed, whose spread is unknown."""
    values = np.asarray(per_seed, dtype=float)
    if values.size < 2:
        return None
    degrees = values.size - 1
    t = _T975[degrees - 1] if degrees <= len(_T975) else 1.96
    half = t * values.std(ddof=1) / np.sqrt(values.size)
    return [float(values.mean() - half), float(values.mean() + half)]


def two_level_interval(
    differences: np.ndarray, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of `differences` (seeds x problems) and its 95% two-level bootstrap interval: each resample
    draws the seeds with replacement, then the problems (one draw for all its seeds: paired)."""
    differences = np.atleast_2d(np.asarray(differences, dtype=float))
    seeds, problems = differences.shape
    rng = np.random.default_rng(seed)
    seed_counts = _draw_counts(rng, resamples, seeds)  # (R, S): how often each seed is drawn
    problem_counts = _draw_counts(rng, resamples, problems)  # (R, P)
    totals = np.einsum("rs,sp,rp->r", seed_counts, differences, problem_counts)
    statistics = totals / (seeds * problems)
    low, high = np.percentile(statistics, [2.5, 97.5])
    return float(differences.mean()), float(low), float(high)


def _draw_counts(rng: np.random.Generator, resamples: int, size: int) -> np.ndarray:
    """(resamples, size): how many times each index is drawn in `size` draws with replacement."""
    draws = rng.integers(0, size, size=(resamples, size))
    counts = np.zeros((resamples, size))
    np.add.at(counts, (np.arange(resamples)[:, None], draws), 1)
    return counts


def lifts_by_kind(kinds: list[str], base: np.ndarray, runs: dict[tuple[str, int], np.ndarray]) -> dict:
    """{kind: {"problems": n, "sources": lifts_by_source on that kind's problems}} for `kinds` (one label
    per problem, in the order of `base` and each run's values)."""
    labels = np.asarray(kinds)
    base = np.asarray(base, dtype=float)
    if labels.shape != base.shape:
        raise ValueError(f"one kind per problem: {labels.size} kinds for {base.size} problems")
    report = {}
    for kind in sorted(set(kinds)):
        mask = labels == kind
        subset = {key: np.asarray(values, dtype=float)[mask] for key, values in runs.items()}
        report[kind] = {"problems": int(mask.sum()), "sources": lifts_by_source(base[mask], subset)}
    return report


def regressions(by_kind: dict) -> list[dict]:
    """The kinds where a source is significantly worse than the base (two-level interval below 0)."""
    found = []
    for kind, figures in by_kind.items():
        for source, lifts in figures["sources"].items():
            low, high = lifts["vs_base"]["ci95_seeds_problems"]
            if high < 0:
                change = lifts["vs_base"]["mean"]
                found.append({"kind": kind, "source": source, "change": change, "ci95": [low, high]})
    return found


def met(figures: dict, at_least: float) -> bool:
    """Whether a change's mean reaches `at_least` and its seed-level interval lies above 0."""
    interval = figures.get("seed_ci95")
    return interval is not None and figures["mean"] >= at_least and interval[0] > 0


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


def change_rows(before: np.ndarray, after: np.ndarray, kinds: list[str] | None = None) -> list[dict]:
    """One team against another on the same problems (say the base and a checkpoint; 0/1 per problem, one
    seed): all problems, then each kind of `kinds` (one label per problem). Per row: problems, right
    before and after, the change with its 95% paired interval over problems, gained and lost, and `worse`
    when the interval lies below 0."""
    before, after = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    groups = {"all": np.ones(before.size, dtype=bool)}
    if kinds is not None:
        labels = np.asarray(kinds)
        groups |= {kind: labels == kind for kind in sorted(set(kinds))}
    rows = []
    for name, mask in groups.items():
        figures = lift(before[mask], after[mask][None, :])
        low, high = figures["ci95"]
        rows.append(
            {
                "kind": name,
                "problems": int(mask.sum()),
                "before": int(before[mask].sum()),
                "after": int(after[mask].sum()),
                "change": figures["mean"],
                "ci95": [low, high],
                "gained": figures["gained"][0],
                "lost": figures["lost"][0],
                "worse": high < 0,
            }
        )
    return rows
