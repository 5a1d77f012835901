"""What `learning.py` reports beyond the lifts: the change per kind of problem, and the issue's targets.

Per kind: each held-out set's problems are labelled by `mappa.envs.mathchat.kinds` (operation: add, subtract,
multiply, two-step, ...; form: expression, phrased, word) and every source's change over the base is
computed on each operation's and each form's problems apart (`lift_stats.lifts_by_kind`), flexible
success. A kind whose two-level (seeds x problems) interval lies below 0 is a regression: a lift that
comes with one is reported as a regression, not a lift.

Targets (per set named in `TARGET_SETS`, when it was evaluated): the best coach (the source other than
outcome-only with the largest mean lift) reaches `LIFT_OVER_BASE` over the base and `LIFT_OVER_OUTCOME`
over outcome-only, each with its seed-level interval (Student's t over seeds) above 0, and no kind is a
regression for it. "met" is only ever computed here, from the JSON's own figures.

Not covered: envs other than MathChat (kinds are its problems'); corrections for testing many kinds.
"""

from __future__ import annotations

from mappa.core.lift_stats import lifts_by_kind, met, regressions
from mappa.core.types import Problem
from mappa.envs.mathchat.kinds import problem_form, problem_operation

LIFT_OVER_BASE = 0.10
LIFT_OVER_OUTCOME = 0.05
GROUPINGS = {"operation": problem_operation, "form": problem_form}


def kinds_of(problems: list[Problem]) -> dict[str, list[str]]:
    """{grouping: one label per problem}: the operation and the form of each problem, in order."""
    return {name: [label(problem) for problem in problems] for name, label in GROUPINGS.items()}


def kind_report(kinds: dict[str, list[str]], base, runs: dict[tuple[str, int], object]) -> dict:
    """Per grouping (operation, form): each kind's lifts by source; and the regressions found in any."""
    by = {name: lifts_by_kind(labels, base, runs) for name, labels in kinds.items()}
    found = [{"grouping": name, **item} for name, report in by.items() for item in regressions(report)]
    return {**by, "regressions": found}


def best_coach(lifts: dict) -> str | None:
    """The source other than outcome-only with the largest mean lift over the base."""
    coaches = {source: f["vs_base"]["mean"] for source, f in lifts.items() if source != "outcome"}
    return max(coaches, key=coaches.get) if coaches else None


def set_targets(lifts: dict, kinds: dict | None) -> dict:
    """The targets on one held-out set (flexible success): lifts and regressions of its best coach."""
    coach = best_coach(lifts)
    if coach is None:
        return {"coach": None, "met": False, "why": "no coach source besides outcome-only"}
    over_base = lifts[coach]["vs_base"]
    over_outcome = lifts[coach].get("vs_outcome")
    regressed = [r for r in (kinds or {}).get("regressions", []) if r["source"] == coach]
    checks = {
        "over_base": met(over_base, LIFT_OVER_BASE),
        "over_outcome": over_outcome is not None and met(over_outcome, LIFT_OVER_OUTCOME),
        "no_kind_worse": kinds is not None and not regressed,
    }
    return {
        "coach": coach,
        "over_base": _figures(over_base),
        "over_outcome": _figures(over_outcome) if over_outcome else None,
        "regressions": regressed,
        "checks": checks,
        "met": all(checks.values()),
    }


def _figures(lift: dict) -> dict:
    return {"mean": lift["mean"], "seed_ci95": lift["seed_ci95"], "ci95": lift["ci95"]}


def print_kinds(kinds: dict, name: str) -> None:
    """Per grouping, one line per kind and source: the change over the base with both intervals."""
    for grouping in GROUPINGS:
        print(f"\n{name}, change over the base per {grouping} (flexible; [95% seeds x problems], seeds)")
        for kind, figures in kinds[grouping].items():
            for source, lifts in figures["sources"].items():
                lift = lifts["vs_base"]
                low, high = lift["ci95_seeds_problems"]
                seeds = " ".join(f"{value:+.1%}" for value in lift["per_seed"])
                flag = "  REGRESSION" if high < 0 else ""
                print(
                    f"  {kind:<11} n={figures['problems']:<4} {source:<9} {lift['mean']:+6.1%} "
                    f"[{low:+.1%}, {high:+.1%}]  seeds {seeds}  gained {sum(lift['gained'])} "
                    f"lost {sum(lift['lost'])}{flag}"
                )


def print_targets(targets: dict) -> None:
    print("\ntargets (best coach; 'met' needs the seed-level interval above 0 and no kind worse):")
    for name, target in targets.items():
        if target["coach"] is None:
            print(f"  {name}: {target['why']}")
            continue
        checks = ", ".join(f"{check} {'met' if ok else 'MISSED'}" for check, ok in target["checks"].items())
        base = target["over_base"]
        line = f"  {name}: {target['coach']} over base {_interval(base)}"
        if target["over_outcome"]:
            line += f", over outcome {_interval(target['over_outcome'])}"
        print(f"{line}; {checks}")


def _interval(figures: dict) -> str:
    seeds = figures["seed_ci95"]
    spread = "one seed" if seeds is None else f"seeds [{seeds[0]:+.1%}, {seeds[1]:+.1%}]"
    return f"{figures['mean']:+.1%} ({spread})"
