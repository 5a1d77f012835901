"""Does a report cost the same at iteration 1 and iteration K? The report stage over a growing run.

Builds a run by hand (no model: each iteration's rollout, scores, experiences and update written as the
stages write them, 48 actions over three agents) and calls the report stage (`publish_iteration_report`,
with its Prefect artifacts against a local Prefect test server and its TensorBoard scalars) after each
new iteration, counting the artifact store's requests (reads, existence checks, listings, writes) and
timing it. Two ways, in one process:

    history   as mappa runs: the run's history file is appended once per iteration (`mappa.storage.history`)
    rebuild   the history file deleted before each report, so the report rebuilds the curves from every
              earlier iteration's manifests and scores (what every report did before the history file)

Prints a row per iteration and writes JSON (`--out`): per way and iteration, the store requests and
seconds. On an object store each request is a round trip (tens of milliseconds on S3), so the request
count is what grows the time there. Not covered: the evaluation's table (its own, one per evaluation).
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
AGENTS = ("solver", "executor", "verifier")
COUNTED = ("read_bytes", "exists", "list", "write_bytes", "put_folder")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "report_scaling.json"))
    return parser.parse_args()


def count_requests(counts: Counter) -> None:
    """Count every call of the store's request methods (class-wide: every store the report opens)."""
    from mappa.storage.store import ArtifactStore

    for name in COUNTED:
        method = getattr(ArtifactStore, name)

        def counted(self, *args, _method=method, _name=name, **kwargs):
            counts[_name] += 1
            return _method(self, *args, **kwargs)

        setattr(ArtifactStore, name, counted)


def write_iteration(run, iteration: int) -> None:
    """Iteration `iteration`'s stage outputs and manifests, as the stages write them (48 actions)."""
    from mappa.stages import output_parts, write_manifest

    rows = [
        {
            "action_id": f"t{t}/{agent}",
            "trajectory_id": f"i{iteration}-t{t}",
            "agent": agent,
            "score": float((t + iteration) % 11),
            "rationale": "r",
            "parse_status": "ok",
            "response_token_ids": [1, 2, 3],
            "rewards": [0.0, 0.0, 0.5],
            "returns": [0.5, 0.5, 0.5],
            "advantages": [0.1, 0.1, 0.1],
        }
        for t in range(16)
        for agent in AGENTS
    ]
    frame = pd.DataFrame(rows)
    for stage in ("rollout", "score", "advantages"):
        run.store.write_parquet(frame, *output_parts(run, iteration, stage))
    write_manifest(run, iteration, "rollout", 48, {"total_s": 40.0}, trajectories=16, success_rate=0.4)
    write_manifest(
        run, iteration, "score", 48, {"total_s": 5.0}, coach_model="rubric", parse_status={"ok": 48}
    )
    write_manifest(run, iteration, "advantages", 48, {"total_s": 30.0})
    metrics = {a: {"loss": 0.1, "kl": 0.01, "clip_fraction": 0.0, "approx_kl": 0.0, "grad_norm": 1.0,
                   "tokens_per_s": 200.0, "mean_score": 5.0} for a in AGENTS}  # fmt: skip
    run.store.write_json(metrics, *output_parts(run, iteration, "update"))
    write_manifest(run, iteration, "update", 3, {"total_s": 50.0}, agents=metrics)


def measure(way: str, iterations: int, folder: Path, counts: Counter) -> list[dict]:
    from mappa.config import load_config
    from mappa.stages.report import publish_iteration_report
    from mappa.storage.history import HISTORY
    from mappa.storage.run import Run

    config = load_config(str(REPO / "configs" / "mathchat-cpu-learn.yaml"), [f"storage.root={folder}"])
    run = Run.create(config, f"report-{way}")
    rows = []
    for iteration in range(iterations):
        write_iteration(run, iteration)
        if way == "rebuild":
            run.store.remove(run.run_id, HISTORY)
        counts.clear()
        started = time.perf_counter()
        result = publish_iteration_report(run, iteration)
        seconds = time.perf_counter() - started
        assert not result["errors"], result["errors"]
        requests = sum(counts.values())
        rows.append({"way": way, "iteration": iteration, "requests": requests, "seconds": seconds, **counts})
        print(
            f"{way:8s} iteration {iteration:3d}: {requests:4d} store requests, {seconds:5.2f} s", flush=True
        )
    return rows


def main() -> None:
    args = parse_args()
    from prefect.testing.utilities import prefect_test_harness

    logging.getLogger("prefect").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning)  # artifacts outside a flow run: deprecated
    counts: Counter = Counter()
    count_requests(counts)
    rows = []
    with prefect_test_harness(server_startup_timeout=180), tempfile.TemporaryDirectory() as tmp:
        for way in ("history", "rebuild"):
            rows += measure(way, args.iterations, Path(tmp), counts)
    summary = {}
    for way in ("history", "rebuild"):
        mine = [r for r in rows if r["way"] == way]
        summary[way] = {
            "requests_at_1": mine[1]["requests"],
            "requests_at_last": mine[-1]["requests"],
            "seconds_at_1": round(mine[1]["seconds"], 3),
            "seconds_at_last": round(mine[-1]["seconds"], 3),
        }
        print(f"{way}: {summary[way]}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps({"iterations": args.iterations, "summary": summary, "rows": rows}, indent=2)
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
