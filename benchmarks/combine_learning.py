"""Lifts over several learning-benchmark results: runs trained by separate `learning.py` invocations (other
seeds, other sources, another session) paired problem by problem, without their run folders.

    python benchmarks/combine_learning.py A.json B.json [...] --out combined.json
    python benchmarks/combine_learning.py combined.json --markdown     # its tables for README and docs

Each file is a `learning.py --out` JSON with per-problem results (`per_problem`, written since 2026-12-06).
The files must describe the same experiment: the same config, iterations and `--set` overrides, the same
precision (bf16 autocast or fp32, as resolved on each machine), the same held-out sets (problem ids) and
the same base team's answers on them (greedy on the same weights: a base that differs means another
model, precision or machine behaviour, and pairing would be wrong). A run (source, seed) found in two
files must have the same answers in both. Then, per held-out set: each source's lift over the base, over
its seeds, and each source against outcome-only on the seeds both have, with 95% paired bootstrap
intervals over problems (`mappa.core.lift_stats`), printed and written as JSON.

Not covered: files of older runs without `per_problem` (rerun their `learning.py` command over the same
`--root`: finished runs are reused and the JSON is written anew).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # learning, beside this file
from learning import COLUMNS, held_out_sets, print_lifts  # noqa: E402
from learning_report import (  # noqa: E402
    combined_markdown,
    kind_report,
    print_kinds,
    print_targets,
    set_targets,
)

from mappa.core.lift_stats import from_bits, lifts_by_source  # noqa: E402

SAME_EXPERIMENT = ("iterations", "set", "eval_data", "eval_problems")  # settings every file must share


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="learning.py JSON files")
    parser.add_argument("--out", help="write the combined figures here (JSON)")
    parser.add_argument(
        "--markdown", action="store_true", help="print the README/docs tables of one --out JSON; no pairing"
    )
    return parser.parse_args(argv)


def per_problem_sets(report: dict, path: str) -> dict[str, dict]:
    """{set name: per_problem record} of one result file: its primary set, then each --also-eval file."""
    if "per_problem" not in report:
        raise SystemExit(
            f"error: {path} has no per-problem results (written before they were kept): rerun its "
            "learning.py command over the same --root (finished runs are reused) to write them"
        )
    return held_out_sets(report, "per_problem")


def experiment(report: dict) -> dict:
    """What must agree for runs of two files to be paired: the config, its settings and the precision
    the runs resolved on their machine (bf16 or fp32)."""
    settings = report["settings"]
    return {
        "config": Path(settings["config"]).name,
        **{key: settings.get(key) for key in SAME_EXPERIMENT},
        "precision": report.get("precision"),
    }


def run_key(name: str, source: str) -> tuple[str, int]:
    match = re.search(r"-s(\d+)$", name)
    if match is None:
        raise SystemExit(f"error: run {name!r} does not end in -s<seed> as learning.py names its runs")
    return source, int(match.group(1))


def combine(paths: list[str]) -> dict:
    """{set: {"ids", column: {"base": bits, (source, seed): bits}}} over every file, checked to agree."""
    combined: dict[str, dict] = {}
    first_path, first = None, None
    for path in paths:
        report = json.loads(Path(path).read_text())
        sets = per_problem_sets(report, path)
        if first is None:
            first_path, first = path, experiment(report)
        elif experiment(report) != first:
            differs = [key for key, value in experiment(report).items() if first[key] != value]
            raise SystemExit(
                f"error: {path} and {first_path} were trained differently ({', '.join(differs)}): "
                "their runs cannot be paired"
            )
        for name, record in sets.items():
            into = combined.setdefault(name, {"ids": record["ids"], **{column: {} for column in COLUMNS}})
            if "kinds" in record:  # written since per-kind reports (2026-12-06)
                into["kinds"] = record["kinds"]
            if record["ids"] != into["ids"]:
                raise SystemExit(
                    f"error: {path}: held-out set {name!r} has other problems than {first_path}'s"
                )
            for column in COLUMNS:
                for run, bits in record[column].items():
                    key = "base" if run == "base" else run_key(run, report["run_sources"][run])
                    if key in into[column] and into[column][key] != bits:
                        what = "the base team" if key == "base" else f"run {run}"
                        raise SystemExit(
                            f"error: {path}: {what} answered {name!r} differently than in an earlier file "
                            f"({column}): not the same experiment, or not reproducible on this machine"
                        )
                    into[column][key] = bits
    return combined


def lifts_of(record: dict) -> dict:
    """`learning.py`'s `lifts` for one held-out set of the combined runs."""
    return {
        column: lifts_by_source(
            from_bits(record[column]["base"]),
            {key: from_bits(bits) for key, bits in record[column].items() if key != "base"},
        )
        for column in COLUMNS
    }


def kinds_of_record(record: dict) -> dict:
    """The per-kind lifts (`learning_report.kind_report`) of one held-out set of the combined runs."""
    bits = record["correct_flexible"]
    runs = {key: from_bits(value) for key, value in bits.items() if key != "base"}
    return kind_report(record["kinds"], from_bits(bits["base"]), runs)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        for path in args.results:
            print(combined_markdown(json.loads(Path(path).read_text())))
        return 0
    combined = combine(args.results)
    figures = {name: lifts_of(record) for name, record in combined.items()}
    kinds = {name: kinds_of_record(record) for name, record in combined.items() if "kinds" in record}
    targets = {name: set_targets(figures[name]["correct_flexible"], kinds.get(name)) for name in figures}
    for name, lifts in figures.items():
        seeds = {source: f["seeds"] for source, f in lifts["correct_flexible"].items()}
        print(f"\n{name}: {len(combined[name]['ids'])} problems, seeds {seeds}")
        print_lifts(lifts, name)
        if name in kinds:
            print_kinds(kinds[name], name)
    print_targets(targets)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        report = {"files": args.results, "lifts": figures, "kinds": kinds, "targets": targets}
        Path(args.out).write_text(json.dumps(report, indent=2))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
