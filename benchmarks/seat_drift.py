"""What training changed in each seat's behaviour, on the same problems: two evaluations of a run compared
seat by seat (issue 46's diagnosis of a kind that regresses).

For each evaluation (a folder holding `results.parquet` and `trajectories.parquet`: `base/evaluate`,
`iter-K/evaluate`, `iter-K/evaluate-on/<name>`), on the problems both answered, optionally of one kind
prefix (`--kind multiply`): success and gained/lost problems; per seat, the share of problems where it
did its part, the share of its replies cut at the token limit (`finish_reason == "length"`), its mean reply
length in characters, and the share of its replies that open with a stock preamble ("To solve this
problem", "Let's break it down") instead of the computation; and the change per operation and per form of
problem (the `kind` column, `operation/form`), each with its 95% paired interval over problems and marked
worse when that lies below 0 (`mappa.core.lift_stats.change_rows`; one seed, so no seed-level interval).
Prints the tables and writes `--out` JSON.

    .venv/bin/python benchmarks/seat_drift.py RUN/base/evaluate RUN/iter-0001/evaluate-on/blind-multiply \
        --kind multiply --out benchmarks/results/seat-drift-llm-s0-multiply.json
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

from mappa.core.lift_stats import change_rows

PREAMBLE = re.compile(
    r"^\s*(to solve this problem|let's break (it|this) down|to find|we need to)", re.IGNORECASE
)


def load(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_parquet(folder / "results.parquet"), pd.read_parquet(folder / "trajectories.parquet")


def seat_figures(results: pd.DataFrame, trajectories: pd.DataFrame, seat: str) -> dict:
    replies = trajectories[
        (trajectories.agent == seat) & trajectories.trajectory_id.isin(results.trajectory_id)
    ]
    return {
        "did_its_part": round(float(results[f"seat_{seat}"].mean()), 4),
        "cut_at_token_limit": round(float((replies.finish_reason == "length").mean()), 4),
        "mean_reply_chars": round(float(replies.response.str.len().mean()), 1),
        "stock_preamble": round(float(replies.response.str.match(PREAMBLE).mean()), 4),
        "replies": len(replies),
    }


def compare(before_dir: Path, after_dir: Path, kind: str | None) -> dict:
    (before, before_t), (after, after_t) = load(before_dir), load(after_dir)
    shared = set(before.question) & set(after.question)
    if kind:
        shared &= set(after[after.kind.str.startswith(kind)].question)
    before, after = before[before.question.isin(shared)], after[after.question.isin(shared)]
    paired = before.merge(after, on="question", suffixes=("_before", "_after"))
    seats = [c.removeprefix("seat_") for c in after.columns if c.startswith("seat_")]
    return {
        "before": str(before_dir),
        "after": str(after_dir),
        "kind": kind,
        "problems": len(paired),
        "correct_before": int(paired.correct_before.sum()),
        "correct_after": int(paired.correct_after.sum()),
        "gained": int((~paired.correct_before & paired.correct_after).sum()),
        "lost": int((paired.correct_before & ~paired.correct_after).sum()),
        "by_kind": by_kind(paired),
        "seats": {
            seat: {
                "before": seat_figures(before, before_t, seat),
                "after": seat_figures(after, after_t, seat),
            }
            for seat in seats
        },
    }


def by_kind(paired: pd.DataFrame) -> dict[str, list[dict]]:
    """The change per operation and per form of problem (`kind` is `operation/form`)."""
    before, after = paired.correct_before.to_numpy(float), paired.correct_after.to_numpy(float)
    parts = paired.kind_after.str.split("/", n=1, expand=True).reindex(columns=[0, 1]).fillna("")
    return {
        "operation": change_rows(before, after, list(parts[0])),
        "form": change_rows(before, after, list(parts[1])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--kind", help="a kind prefix, e.g. multiply or multiply/word")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = compare(args.before, args.after, args.kind)
    print(
        f"{result['problems']} problems{' of kind ' + args.kind if args.kind else ''}: right "
        f"{result['correct_before']} -> {result['correct_after']} "
        f"(gained {result['gained']}, lost {result['lost']})"
    )
    for split, rows in result["by_kind"].items():
        print(
            f"per {split} (right before -> after of problems; change in points [95% interval over problems])"
        )
        for row in rows[1:]:
            low, high = (100 * bound for bound in row["ci95"])
            print(
                f"  {row['kind']:12s} {row['before']:>4} -> {row['after']:<4} of {row['problems']:<4} "
                f"{100 * row['change']:+6.1f} [{low:+.1f}, {high:+.1f}]  gained {row['gained']} lost "
                f"{row['lost']}{'  WORSE' if row['worse'] else ''}"
            )
    columns = ("did its part", "cut at limit", "reply chars", "stock preamble")
    print(f"{'seat':10s} " + " ".join(f"{column:>16s}" for column in columns))
    for seat, figures in result["seats"].items():
        b, a = figures["before"], figures["after"]
        cells = [
            f"{b[key]:.2f} -> {a[key]:.2f}" if key != "mean_reply_chars" else f"{b[key]:.0f} -> {a[key]:.0f}"
            for key in ("did_its_part", "cut_at_token_limit", "mean_reply_chars", "stock_preamble")
        ]
        print(f"{seat:10s} " + " ".join(f"{cell:>16s}" for cell in cells))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
