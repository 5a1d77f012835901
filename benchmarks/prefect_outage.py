"""What a Prefect outage costs a run (issue 51): a tiny two-iteration `mappa train` against a real `prefect
server start`, the server crashed (SIGKILL) at a chosen moment, kept away for `--outage-s` seconds, then
started again on the same port and database. Prefect's client keeps its default retries (5 with doubling
waits: about a minute).

Moments (`--moments`, each a fresh run and server):

    mid-rollout     iteration 0's rollout has started (the outage begins inside a stage)
    after-score     iteration 0's score stage has finished (the next stage starts during the outage)
    mid-update      iteration 0's update has started
    after-iter0     iteration 0's retention has finished (the next iteration's subflow run starts during it)

For each: the command's exit code and wall time, whether the run finished, the wait lines it printed, its
last line when it stopped, the stages started more than once, the processes left after it ended, the flow
runs the server still shows running once the command ended (none, when every state reached it). When a run
stops, `mappa resume` is run (server up) and whether it finished is recorded. Prints a line per moment and
writes `--out` JSON; `--table JSON` prints a written JSON's markdown table (docs/outages.md).

    .venv/bin/python benchmarks/prefect_outage.py --outage-s 150 --out benchmarks/results/prefect-outage.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))  # the suite's process and server helpers

from mappa_process import MappaProcess, child_env  # noqa: E402
from prefect_api import post  # noqa: E402
from server_process import PrefectServer  # noqa: E402
from tiny_run import NO_RETRIES, write_tiny_config  # noqa: E402

from mappa.storage.run import Run  # noqa: E402

MOMENTS = {  # moment: (iteration, stage, event kind) that triggers the crash
    "mid-rollout": (0, "rollout", "started"),
    "after-score": (0, "score", "finished"),
    "mid-update": (0, "update", "started"),
    "after-iter0": (0, "retention", "finished"),
}
TIMEOUT_S = 1800


def one_outage(moment: str, outage_s: float, work: Path, tiny_model: Path) -> dict:
    root, run_id = work / "runs", f"outage-{moment}"
    config = write_tiny_config(
        work / f"{moment}.yaml",
        tiny_model,
        root,
        name=run_id,
        iterations=2,
        retries=NO_RETRIES,
        cluster={"num_cpus": 2, "torch_threads": 1},
    )
    with PrefectServer(work / f"prefect-{moment}") as server:
        env = child_env(server.url, PREFECT_LOGGING_LEVEL="INFO")
        started = time.monotonic()
        train = MappaProcess(["train", str(config), "--run-id", run_id], env, work / f"{moment}.txt")
        train.wait_for_event(root, run_id, MOMENTS[moment], TIMEOUT_S)
        crashed = time.monotonic()
        server.crash()
        time.sleep(outage_s)
        server.start()
        outage = time.monotonic() - crashed  # the server's start-up included
        code = train.wait(TIMEOUT_S)
        wall = time.monotonic() - started
        lines = [line.strip() for line in train.output().splitlines() if line.strip()]
        record = {
            "moment": moment,
            "outage_s": round(outage, 1),
            "exit_code": code,
            "wall_s": round(wall, 1),
            "finished": code == 0,
            "wait_lines": [line for line in lines if "the Prefect API at" in line and "error:" not in line],
            "stop_line": next((line for line in reversed(lines) if line.startswith("error: run")), None),
            "left": train.left,
        }
        running = post(
            server.url, "flow_runs/filter", {"flow_runs": {"state": {"type": {"any_": ["RUNNING"]}}}}
        )
        record["flow_runs_left_running"] = sorted(run["name"] for run in running)
        if code != 0:
            resume = MappaProcess(["resume", run_id, "--root", str(root)], env, work / f"{moment}-resume.txt")
            record["resume_exit_code"] = resume.wait(TIMEOUT_S)
    kinds = Counter((e["iteration"], e["stage"], e["kind"]) for e in Run.open(str(root), run_id).events())
    record["stages_redone"] = sorted(
        f"{stage} {iteration}" for (iteration, stage, kind), n in kinds.items() if kind == "started" and n > 1
    )
    return record


def markdown(result: dict) -> str:
    """The records as the table docs/outages.md shows."""
    rows = [
        "| server crashed when | away (s) | exit code | command's time (s) | stages redone | wait lines |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["records"]:
        rows.append(
            f"| {r['moment']} | {r['outage_s']:.0f} | {r['exit_code']} | {r['wall_s']:.0f} | "
            f"{', '.join(r['stages_redone']) or 'none'} | {len(r['wait_lines'])} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outage-s", type=float, default=150.0)
    parser.add_argument("--moments", nargs="+", choices=sorted(MOMENTS), default=list(MOMENTS))
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "prefect-outage.json")
    parser.add_argument("--table", type=Path, help="print the markdown table of this JSON and stop")
    args = parser.parse_args()
    if args.table:
        print(markdown(json.loads(args.table.read_text())))
        return
    from mappa.models.tiny_model import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="prefect-outage-"))
    tiny_model = build_tiny_model(work / "tiny-model")
    records = []
    for moment in args.moments:
        record = one_outage(moment, args.outage_s, work, tiny_model)
        records.append(record)
        stop = record["stop_line"] or "-"
        print(
            f"{moment:12s} outage {record['outage_s']:6.1f} s  exit {record['exit_code']}  "
            f"{record['wall_s']:6.1f} s  redone {record['stages_redone'] or '-'}  {stop}",
            flush=True,
        )
    result = {
        "benchmark": "prefect_outage",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version()},
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip(),
        "outage_s": args.outage_s,
        "work": str(work),
        "records": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
