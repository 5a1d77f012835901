"""One picture of several learning-benchmark results: per held-out set, the base team's success and each
source's after training, a dot per seed and a bar for the mean over seeds.

    python benchmarks/plot_learning.py A.json B.json [...] --out docs/learning.png

Reads each `learning.py --out` file's `summary` rows (its primary held-out set) and `other_sets` (each
`--also-eval` file), so results of separate invocations (other seeds, other sources) share one figure. The
base team's success on a set, and a (source, seed) found in two files, must agree between files: a
disagreement means another experiment. Not covered: intervals (the files' `lifts`, and
`combine_learning.py` for runs of several files, hold them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # learning, beside this file
from learning import held_out_sets  # noqa: E402

KEY = "heldout_success_flexible"  # the team's answer as the env grades it (the verifier's last number)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="learning.py JSON files")
    parser.add_argument("--out", required=True, help="the PNG to write")
    parser.add_argument("--title", help="default: the first file's config and machine")
    return parser.parse_args(argv)


def collect(paths: list[str]) -> tuple[dict[str, float], dict[str, dict[str, dict[int, float]]]]:
    """(base success per set, {set: {source: {seed: success after training}}}) over every file."""
    base: dict[str, float] = {}
    after: dict[str, dict[str, dict[int, float]]] = {}
    for path in paths:
        report = json.loads(Path(path).read_text())
        for name, rows in held_out_sets(report, "summary").items():
            last = max(row["iteration"] for row in rows)
            for row in rows:
                if row["iteration"] == 0:
                    _agree(base, name, row[KEY], f"{path}: the base team's success on {name!r}")
                elif row["iteration"] == last:
                    seeds = after.setdefault(name, {}).setdefault(row["source"], {})
                    _agree(
                        seeds,
                        row["seed"],
                        row[KEY],
                        f"{path}: {row['source']} seed {row['seed']} on {name!r}",
                    )
    return base, after


def _agree(into: dict, key, value: float, what: str) -> None:
    if key in into and abs(into[key] - value) > 1e-9:
        raise SystemExit(f"error: {what} is {value:.4f} here and {into[key]:.4f} in an earlier file")
    into[key] = value


def plot(base: dict[str, float], after: dict, out: str, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5 * len(after), 4), layout="constrained")
    FigureCanvasAgg(figure)
    panels = figure.subplots(1, len(after), squeeze=False)[0]
    for axes, (name, sources) in zip(panels, after.items()):
        columns = [
            ("base", {0: base[name]}),
            *sorted(sources.items(), key=lambda kv: (kv[0] == "outcome", kv[0])),
        ]
        for x, (label, seeds) in enumerate(columns):
            mean = statistics.fmean(seeds.values())
            axes.bar(x, mean, color="lightgray" if label == "base" else f"C{x - 1}", alpha=0.7)
            axes.scatter([x] * len(seeds), list(seeds.values()), color="black", s=14, zorder=3)
            axes.annotate(f"mean {mean:.1%}", (x, 0), ha="center", va="bottom", xytext=(0, 4),
                          textcoords="offset points", fontsize=8)  # fmt: skip
        axes.set_xticks(range(len(columns)), [label for label, _ in columns])
        seeds = sorted({seed for _, s in columns[1:] for seed in s})
        axes.set(title=f"{name} (dots: seeds {seeds})", ylabel="success (flexible): base, and after training")
        axes.set_ylim(0, max(v for _, s in columns for v in s.values()) * 1.2)
    figure.suptitle(title, fontsize=9)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110, bbox_inches="tight")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base, after = collect(args.results)
    first = json.loads(Path(args.results[0]).read_text())
    title = (
        args.title
        or f"{Path(first['settings']['config']).name}, {first['settings']['iterations']} iterations"
    )
    plot(base, after, args.out, title)
    for name, sources in after.items():
        means = ", ".join(f"{source} {statistics.fmean(s.values()):.1%}" for source, s in sources.items())
        print(f"{name}: base {base[name]:.1%}, {means}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
