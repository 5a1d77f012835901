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


def markdown_tables(report: dict) -> str:
    """The tables README and docs/learning.md show, from a learning JSON (`learning.py --replot
    --markdown`): per held-out set, each source's success before and after with its change over the base
    and over outcome-only (both intervals: over problems, and Student's t over seeds), then the change per
    kind; and the targets. Figures are never typed by hand."""
    roles = report.get("set_roles", {})
    sets = {next(iter(report["eval_sets"])): report}
    sets.update(report.get("other_sets", {}))
    lines = [
        "| set | source | base -> after (per seed) | vs base [problems] [seeds] | gained / lost "
        "| vs outcome-only [problems] [seeds] |",
        "|---|---|---|---|---|---|",
    ]
    for name, figures in sets.items():
        after = _after_by_source(figures["summary"])
        for source, lift in figures["lifts"]["correct_flexible"].items():
            base, other = lift["vs_base"], lift.get("vs_outcome")
            seeds = " / ".join(f"{value:.1%}" for value in after[source])
            lines.append(
                f"| {name} ({roles.get(name, 'file')}, {report['eval_sets'][name]}) | `{source}` "
                f"| {after['base']:.1%} -> {seeds} | {_md_lift(base)} "
                f"| {sum(base['gained'])} / {sum(base['lost'])} | {_md_lift(other) if other else '-'} |"
            )
    for name, figures in sets.items():
        lines += _md_kind_tables(name, list(figures["lifts"]["correct_flexible"]), figures["kinds"])
    lines += [
        "",
        "| set | best coach | over base | over outcome-only | no kind worse | met |",
        "|---|---|---|---|---|---|",
    ]
    for name, target in report["targets"].items():
        checks = target.get("checks", {})
        cells = [
            f"{'met' if checks.get(check) else 'missed'}"
            for check in ("over_base", "over_outcome", "no_kind_worse")
        ]
        lines.append(
            f"| {name} | `{target['coach']}` | {' | '.join(cells)} | {'yes' if target['met'] else 'no'} |"
        )
    return "\n".join(lines)


def combined_markdown(report: dict) -> str:
    """The lifts table of a `combine_learning.py --out` JSON (runs of several invocations, paired by
    problem): per held-out set and source, its seeds, the change over the base and over outcome-only (over
    problems, and Student's t over seeds), the problems gained and lost; then the change per kind."""
    lines = [
        "| set | source | seeds | vs base [problems] [seeds] | gained / lost "
        "| vs outcome-only [problems] [seeds] |",
        "|---|---|---|---|---|---|",
    ]
    for name, figures in report["lifts"].items():
        for source, lift in figures["correct_flexible"].items():
            base, other = lift["vs_base"], lift.get("vs_outcome")
            seeds = ", ".join(str(seed) for seed in lift["seeds"])
            lines.append(
                f"| {name} | `{source}` | {seeds} | {_md_lift(base)} | {sum(base['gained'])} / "
                f"{sum(base['lost'])} | {_md_lift(other) if other else '-'} |"
            )
    for name, kinds in report.get("kinds", {}).items():
        lines += _md_kind_tables(name, list(report["lifts"][name]["correct_flexible"]), kinds)
    return "\n".join(lines)


def _md_kind_tables(name: str, sources: list[str], kinds: dict) -> list[str]:
    """One held-out set's change over the base per kind, a table per grouping, a column per source."""
    lines = []
    for grouping in GROUPINGS:
        lines += ["", f"{name}, change over the base per {grouping} [seeds x problems]:", ""]
        lines.append(f"| {grouping} | n | " + " | ".join(f"`{s}`" for s in sources) + " |")
        lines.append("|---|---|" + "---|" * len(sources))
        for kind, by_kind in kinds[grouping].items():
            cells = [_md_kind(by_kind["sources"][s]["vs_base"]) for s in sources]
            lines.append(f"| {kind} | {by_kind['problems']} | " + " | ".join(cells) + " |")
    return lines


def _after_by_source(summary: list[dict]) -> dict:
    """{source: [each seed's final flexible success]} and {'base': the base's}, from summary rows."""
    out: dict = {}
    for row in summary:
        if row["iteration"] == 0:
            out["base"] = row["heldout_success_flexible"]
        else:
            out.setdefault(row["source"], []).append(row["heldout_success_flexible"])
    return out


def _md_lift(lift: dict) -> str:
    low, high = lift["ci95"]
    seeds = lift.get("seed_ci95")
    seed_part = "[one seed]" if seeds is None else f"[{seeds[0] * 100:+.1f}, {seeds[1] * 100:+.1f}]"
    return f"{lift['mean'] * 100:+.1f} [{low * 100:+.1f}, {high * 100:+.1f}] {seed_part}"


def _md_kind(lift: dict) -> str:
    low, high = lift["ci95_seeds_problems"]
    flag = " **worse**" if high < 0 else ""
    return f"{lift['mean'] * 100:+.1f} [{low * 100:+.1f}, {high * 100:+.1f}]{flag}"
