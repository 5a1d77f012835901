"""Overhead of one training iteration: how much of the CPU demo's wall time is not compute (target <= 5%).

What it runs: one iteration of `configs/mathchat-cpu.yaml` (`iterations=1`, a fresh run id, the artifact root
in a temporary folder unless `--root`; `--set` passes more overrides) through the real flow,
`mappa.flows.train.train(config_path=..., overrides=[...], run_id=...)`, in this process: real Prefect, real
Ray workers, real artifacts. Prefect is set up the CLI's way (`mappa.cli._prefect_defaults`, then the flow
runs against PREFECT_API_URL if set, else Prefect's embedded server), with one change: without
PREFECT_API_URL, PREFECT_HOME is a temporary folder, so the embedded server has a database of its own (a
training run on the same machine keeps its own; a fresh database adds its migrations to "Prefect server
start"). Ray starts as `mappa train` starts it, with `MAPPA_RAY_TMP` in the temporary folder (a cluster of
its own). `--tiny` builds the tiny random model (`mappa.models.tiny_model`) and points every agent and
the local coach at it, with 2 problems of 16 new tokens.

How it measures (details in `benchmarks/overhead_probes.py`): timed wrappers around mappa's functions in
this process (stage bodies, every ArtifactStore method, sandbox runs, advantage math, coach scoring, Ray
and worker start-up), every actor call timed from submission until its result is ready, and workers that
record their own methods' run times; a sweep gives every slice of the wall time to one component, the most
specific active at that moment. First an empty flow runs (timed: the Prefect server's start), then the
training flow (timed from the outside). Components:
- compute: generation (agent workers' chat), sandbox (tool runs, overlapping runs counted once), coach
  model (the coach worker's calls) and coach scoring in the driver (prompts, parsing, rubric rules), logprob
  passes (old and reference logprobs), advantage math, trainer (the workers' train);
- overhead, every iteration: Prefect (task orchestration, result persistence, logging), Ray calls (a call in
  flight while its worker is not working for it: scheduling, (de)serialization, actor lookups), artifact I/O
  (the driver's store reads and writes), checkpoint I/O (the workers' checkpoint save, serialization
  included), report (Prefect artifacts and the curves PNG), stage glue (a stage's own driver code: data
  frames, prompts, result conversion);
- start-up, once per run (a long run amortises it): Prefect server start, the flow's start and finish,
  Ray start, worker start (actor processes) and model loading, run summary, worker release.
The non-compute share is reported with start-up and without it (the steady state of a long run); the
verdict against 5% is on the share without start-up.

Cross-checks from the artifacts: each stage's seconds from the run's events (`Run.events()`) and manifests
(`timings.total_s`) against the probes; generation seconds from the actions (`Action.generation_s` is the
call's `generate` time divided by its items, so a call's compute is that share times the call's items;
summed over actions it is the sum over calls); sandbox seconds (`tool_result.duration_s`, a sum over
overlapping runs); the trainer's own loop seconds (update metrics); a trivial Ray round trip times the
number of calls (a floor for the Ray overhead).

Not measured exactly (bounded, and stated in the output): a worker method's time counts as compute whole,
including its non-model work (chat templating, result conversion, memory trimming, handing new weights to
the engine), bounded by the cross-checks (worker chat vs generate-only, worker train vs the trainer loop);
deserializing a result in the driver after it is ready counts as stage glue, not Ray; the probes' own cost
(a callback per actor call, an append per interval) is inside the figures, their end-of-run collection is
not. Not covered: evaluation (`rollout.eval_every`; keep it 0), several iterations, vLLM, DeepSpeed, S3.

Full settings (SmolLM2-135M-Instruct, the CPU demo):  python benchmarks/overhead.py
Smoke run on a tiny random model:                     python benchmarks/overhead.py --tiny
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402 - the environment above must be set before any hub, Ray or Prefect import
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import overhead_probes as probes  # noqa: E402
from comparison import default_out, machine_info, print_facts, print_table, verdict, write_json  # noqa: E402

from mappa.stages import output_parts

REPO = Path(__file__).resolve().parents[1]
TARGET = 0.05  # at most this share of an iteration's wall time is not compute (the project's issue)
TINY = ("rollout.problems_per_iteration=2", "rollout.max_new_tokens=16", "coach.max_new_tokens=16")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="One iteration of the CPU demo through the real flow; its wall time split into compute "
        "per stage, Prefect, Ray calls, artifact I/O and start-up; the non-compute share against 5%.",
    )
    parser.add_argument("--config", default=str(REPO / "configs" / "mathchat-cpu.yaml"))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--tiny", action="store_true", help="agents and coach on a tiny random model")
    parser.add_argument("--run-id", help="default: overhead-<timestamp>")
    parser.add_argument("--root", help="artifact root to keep the run in (default: a temporary folder)")
    parser.add_argument("--out", default=default_out("overhead"), help="JSON result path")
    return parser.parse_args(argv)


def build_overrides(args: argparse.Namespace, scratch: Path, root: str) -> list[str]:
    from mappa.config import load_config

    overrides = ["iterations=1", f"storage.root={root}"]
    if args.tiny:
        from mappa.models.tiny_model import build_tiny_model

        tiny = build_tiny_model(scratch / "tiny-model")
        agents = load_config(args.config, []).agents
        overrides += [f"agents.{name}.model={tiny}" for name in agents] + [f"coach.model={tiny}", *TINY]
    overrides += args.set
    load_config(args.config, overrides)  # fails fast on a bad override, before Prefect or Ray start
    return overrides


def prepare_services(scratch: Path) -> None:
    """The CLI's Prefect settings; a Prefect database and a Ray temp folder of this benchmark's own."""
    from mappa.cli import _prefect_defaults

    if not os.environ.get("PREFECT_API_URL"):
        os.environ["PREFECT_HOME"] = str(scratch / "prefect")
    os.environ["MAPPA_RAY_TMP"] = str(scratch / "ray")
    _prefect_defaults()


def run_iteration(args, overrides: list[str], run_id: str, timeline: probes.Timeline) -> dict[str, float]:
    from prefect import flow

    from mappa.flows.train import train
    from mappa.reporting.progress import terminal_progress

    probes.install(timeline)

    @flow(name="overhead-warm-up")
    def warm_up() -> None:
        return None

    started = time.monotonic()
    warm_up()
    flow_started = time.monotonic()
    timeline.add("Prefect server start", started, flow_started)
    with terminal_progress():  # a bar per long stage, when this is a terminal
        train(config_path=args.config, overrides=overrides, run_id=run_id)
    ended = time.monotonic()
    timeline.add("Prefect", flow_started, ended)
    timeline.closed = True
    return {"warm_up_s": flow_started - started, "flow_s": ended - flow_started}


# ---------------------------------------------------------------- analysis


def attribute(timeline: probes.Timeline) -> dict[str, Any]:
    intervals = timeline.intervals + probes.worker_intervals(timeline) + probes.in_flight_intervals(timeline)
    slices = probes.split_prefect(probes.attribute(intervals), timeline.stage_spans)
    seconds: dict[str, float] = defaultdict(float)
    by_stage: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, start, end in slices:
        seconds[name] += end - start
        by_stage[probes.stage_of(timeline.stage_spans, start, end)][name] += end - start
    kinds: dict[str, float] = defaultdict(float)
    for name, value in seconds.items():
        kinds[probes.KIND[name]] += value
    total = sum(v for k, v in kinds.items() if k != "excluded")
    non_compute = kinds["overhead"] + kinds["startup"]
    steady = total - kinds["startup"]
    shares = {
        "with_startup": non_compute / total,
        "without_startup": kinds["overhead"] / steady if steady else float("nan"),
    }
    components = [
        {"component": name, "kind": kind, "seconds": seconds[name], "share": seconds[name] / total}
        for name, kind in probes.COMPONENTS
        if seconds.get(name)
    ]
    return {
        "total_s": total,
        "by_kind_s": dict(kinds),
        "shares": shares,
        "components": components,
        "by_stage_s": {stage: dict(values) for stage, values in by_stage.items()},
    }


def stage_rows(timeline: probes.Timeline, run, by_stage: dict[str, dict[str, float]]) -> list[dict]:
    """Per stage: seconds by the run's events, by its manifest and by the probes; compute inside it."""
    finished = {e["stage"]: e.get("seconds") for e in run.events() if e["kind"] == "finished"}
    spans = {stage: end - start for stage, start, end in timeline.stage_spans}
    rows = []
    for stage in (*probes.STAGES, "report"):
        inside = by_stage.get(stage, {})
        compute = sum(v for k, v in inside.items() if probes.KIND[k] == "compute")
        manifest = run.read_manifest(0, stage)["timings"]["total_s"] if stage in probes.STAGES else None
        rows.append(
            {
                "stage": stage,
                "events_s": finished.get(stage),
                "manifest_s": manifest,
                "probe_s": spans.get(stage),
                "compute_s": compute,
                "startup_s": sum(v for k, v in inside.items() if probes.KIND[k] == "startup"),
                "overhead_s": sum(v for k, v in inside.items() if probes.KIND[k] == "overhead"),
            }
        )
    return rows


def artifact_checks(timeline: probes.Timeline, run, seconds: dict[str, float], ray_rows) -> list[tuple]:
    """(what, from the run's records or a measured floor, from the probes, note) rows."""
    actions = run.store.read_parquet(*output_parts(run, 0, "rollout"))
    calls = actions.groupby(["agent", "turn"])["generation_s"].agg(["first", "size"])
    per_call = float((calls["first"] * calls["size"]).sum())  # one call per seat and turn in MathChat
    chat = sum(r["in_worker_s"] for r in ray_rows if r["worker"] == "agent" and r["method"] == "chat")
    tools = [t["duration_s"] for t in actions["tool_result"] if isinstance(t, dict) and t.get("duration_s")]
    agents = run.read_manifest(0, "update").get("agents", {})
    loop = sum(float(m.get("seconds", 0.0)) for m in agents.values())
    train = sum(r["in_worker_s"] for r in ray_rows if r["method"] == "train")
    calls_made = sum(r["calls"] for r in ray_rows)
    ping = statistics.median(timeline.ping_s) if timeline.ping_s else float("nan")
    return [
        ("generate s (actions: per-item share x items, per call)", per_call, chat, "probe: workers' chat"),
        ("  same, summed over actions", float(actions["generation_s"].sum()), chat, "equal by construction"),
        ("sandbox s (sum of tool_result.duration_s)", sum(tools), seconds.get("sandbox", 0.0), "union"),
        ("trainer s (update metrics' own loop)", loop, train, "probe: workers' train"),
        ("Ray floor: trivial round trip x calls", ping * calls_made, seconds.get("Ray calls", 0.0), ""),
        ("  trivial round trip ms (median of 20)", 1e3 * ping, "", f"{calls_made} actor calls"),
    ]


# ---------------------------------------------------------------- report


def report(result: dict[str, Any]) -> None:
    print_facts("Overhead benchmark: settings and machine", {**result["settings"], **result["machine"]})
    order = ("compute", "overhead", "startup", "excluded")
    ranked = sorted(result["components"], key=lambda c: (order.index(c["kind"]), -c["seconds"]))
    rows = [(c["component"], c["kind"], c["seconds"], f"{c['share']:.1%}") for c in ranked]
    columns = ("component", "kind", "s", "share")
    print_table("Wall time by component (each second counted once)", columns, rows)
    columns = ("stage", "events s", "manifest s", "probe s", "compute s", "overhead s", "start-up s")
    keys = ("stage", "events_s", "manifest_s", "probe_s", "compute_s", "overhead_s", "startup_s")
    stage_table = [tuple("" if r[k] is None else r[k] for k in keys) for r in result["stages"]]
    print_table("Per stage (events and manifests: the run's own records)", columns, stage_table)
    ray_columns = ("worker", "method", "calls", "in flight s", "in worker s", "overhead s", "median ms")
    ray_keys = ("worker", "method", "calls", "in_flight_s", "in_worker_s", "overhead_s", "median_overhead_ms")
    print_table("Ray calls", ray_columns, [tuple(r[k] for k in ray_keys) for r in result["ray_calls"]])
    columns = ("what", "run's records / floor", "probes", "note")
    print_table("Cross-checks (the run's own records against the probes)", columns, result["checks"])
    kinds, shares = result["by_kind_s"], result["shares"]
    print_table(
        "Result",
        ("figure", "value"),
        [
            ("wall s (warm-up flow + training flow, outside)", result["wall_s"]),
            ("attributed s", result["total_s"]),
            ("compute s", kinds.get("compute", 0.0)),
            ("overhead s (every iteration)", kinds.get("overhead", 0.0)),
            ("start-up s (once per run)", kinds.get("startup", 0.0)),
            ("non-compute share, with start-up", f"{shares['with_startup']:.1%}"),
            ("non-compute share, without start-up", f"{shares['without_startup']:.1%}"),
            ("target (without start-up)", f"<= {TARGET:.0%}"),
            ("verdict", result["verdict"]),
            ("verdict with start-up", result["verdict_with_startup"]),
        ],
    )
    for note in result["notes"]:
        print(f"note: {note}")


NOTES = (
    "Worker methods count as compute whole (templating, conversion, weight hand-over included): the "
    "cross-checks bound that part (workers' chat vs generate, workers' train vs the trainer loop).",
    "Ray calls: time in flight while the worker is not working for the call; result deserialization in "
    "the driver after the result is ready counts as stage glue.",
    "Prefect: flow time inside no other probe; its server start and the flow's start/finish are start-up.",
)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="mappa-bench-"))
    try:
        root = args.root or str(scratch / "runs")
        overrides = build_overrides(args, scratch, root)
        run_id = args.run_id or f"overhead-{time.strftime('%Y%m%d-%H%M%S')}"
        prepare_services(scratch)
        print(f"run {run_id} under {root}; overrides: {' '.join(overrides)}")
        timeline = probes.Timeline()
        walls = run_iteration(args, overrides, run_id, timeline)
        result = summarize(args, overrides, run_id, root, timeline, walls)
    finally:
        import ray

        ray.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)
    report(result)
    print(f"wrote {write_json(args.out, result)}")


def summarize(args, overrides, run_id: str, root: str, timeline, walls: dict[str, float]) -> dict[str, Any]:
    from mappa.storage.run import Run

    analysis = attribute(timeline)
    run = Run.open(root, run_id)
    seconds = {c["component"]: c["seconds"] for c in analysis["components"]}
    ray_rows = probes.ray_call_rows(timeline)
    config = run.config
    settings = {
        "config": args.config,
        "overrides": " ".join(overrides),
        "run_id": run_id,
        "artifacts": "kept" if args.root else "deleted (pass --root to keep them)",
        "problems": config.rollout.problems_per_iteration,
        "max_new_tokens": config.rollout.max_new_tokens,
        "coach": f"{config.coach.type} ({config.coach.scoring})",
        "prefect": os.environ.get("PREFECT_API_URL") or "embedded server, own PREFECT_HOME",
    }
    shares = analysis["shares"]
    return {
        "benchmark": "overhead",
        "settings": settings,
        "machine": machine_info(config.cluster.torch_threads or os.cpu_count() or 1),
        "wall_s": walls["warm_up_s"] + walls["flow_s"],
        **walls,
        **analysis,
        "stages": stage_rows(timeline, run, analysis["by_stage_s"]),
        "ray_calls": ray_rows,
        "checks": artifact_checks(timeline, run, seconds, ray_rows),
        "target": TARGET,
        "verdict": verdict(shares["without_startup"] <= TARGET),
        "verdict_with_startup": verdict(shares["with_startup"] <= TARGET),
        "notes": list(NOTES),
    }


if __name__ == "__main__":
    main()
