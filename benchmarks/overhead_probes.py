"""Timing probes for `benchmarks/overhead.py`: every second of a real `train` flow given to one component.

How. Intervals (component, start, end) on one clock, `time.monotonic` (CLOCK_MONOTONIC on Linux: one clock
for every process of the machine, so driver and worker times compare directly), from two sides:
- the driver (the benchmark process, which runs the flow): mappa functions replaced by timed wrappers
  (`install`): the stage bodies the Prefect tasks call, every `ArtifactStore` method, sandbox runs,
  the advantage math, the coach's scoring, Ray start and worker start-up; and every actor call's time in
  flight (submitted -> result ready), through a proxy around the actor handles `ray_cluster._worker` returns;
- the workers: `TimedModelWorker`, a `ModelWorker` subclass that records each method's own run time (model
  loading, chat, logprobs, train, checkpoint save and load).
`attribute` then sweeps the timeline and gives each slice of time to the highest-priority component active
in it (`COMPONENTS`, highest first), so overlaps count once: concurrent sandbox runs, a worker computing
while the driver waits on its call (that wait is compute, not Ray), a checkpoint written inside a call.

Not covered: what a worker does that is not a method of its own (Ray's own threads, garbage collection);
artifact I/O inside workers other than checkpoints (there is none today); Prefect's own I/O (result
persistence, API calls), which counts as Prefect. The probes cost a little themselves (a future callback
per actor call, a list append per interval); their end-of-run collection is timed and left out.
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from mappa.cluster.model_worker import ModelWorker

# (component, kind), highest priority first. kinds: compute | overhead (recurs every iteration) |
# startup (once per run: a long run amortises it) | excluded (the benchmark's own probes).
COMPONENTS = (
    ("model loading", "startup"),
    ("generation", "compute"),
    ("coach model", "compute"),
    ("logprob passes", "compute"),
    ("trainer", "compute"),
    ("checkpoint I/O", "overhead"),
    ("sandbox", "compute"),
    ("advantage math", "compute"),
    ("artifact I/O", "overhead"),
    ("benchmark probes", "excluded"),
    ("Ray start", "startup"),
    ("worker start", "startup"),
    ("worker release", "startup"),
    ("Ray calls", "overhead"),
    ("coach scoring (driver)", "compute"),
    ("report", "overhead"),
    ("run summary", "startup"),
    ("stage glue", "overhead"),
    ("Prefect server start", "startup"),
    ("Prefect flow start/finish", "startup"),
    ("Prefect", "overhead"),
)
KIND = dict(COMPONENTS)
RANK = {name: rank for rank, (name, _) in enumerate(COMPONENTS)}
WORKER_METHODS = {  # worker method -> component (the coach worker's chat is the coach's)
    "load": "model loading",
    "reset": "model loading",
    "chat": "generation",
    "chat_next_token_logprobs": "coach model",
    "logprobs": "logprob passes",
    "release_memory": "logprob passes",  # the advantages stage's malloc_trim: part of that compute
    "train": "trainer",
    "save_checkpoint": "checkpoint I/O",
    "load_checkpoint": "checkpoint I/O",
    "ready": "Ray calls",
    "weights_checksum": "Ray calls",
}
STORE_METHODS = (
    "exists",
    "write_bytes",
    "read_bytes",
    "write_json",
    "read_json",
    "write_text",
    "read_text",
    "write_parquet",
    "read_parquet",
    "put_folder",
    "get_folder",
    "list",
)
STAGES = ("rollout", "score", "advantages", "update")


class TimedModelWorker(ModelWorker):
    """A ModelWorker that records (method, start, end) of its own work; nothing else changes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._probe: list[tuple[str, float, float]] = []
        started = time.monotonic()
        super().__init__(*args, **kwargs)
        self._probe.append(("load", started, time.monotonic()))

    def _timed(self, method: str, call, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return call(*args, **kwargs)
        finally:
            self._probe.append((method, started, time.monotonic()))

    def reset(self) -> None:
        return self._timed("reset", super().reset)

    def ready(self) -> dict[str, Any]:
        return self._timed("ready", super().ready)

    def chat(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed("chat", super().chat, *args, **kwargs)

    def chat_next_token_logprobs(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed("chat_next_token_logprobs", super().chat_next_token_logprobs, *args, **kwargs)

    def logprobs(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed("logprobs", super().logprobs, *args, **kwargs)

    def train(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed("train", super().train, *args, **kwargs)

    def release_memory(self) -> None:
        return self._timed("release_memory", super().release_memory)

    def save_checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed("save_checkpoint", super().save_checkpoint, *args, **kwargs)

    def load_checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed("load_checkpoint", super().load_checkpoint, *args, **kwargs)

    def weights_checksum(self) -> float:
        return self._timed("weights_checksum", super().weights_checksum)

    def probe_records(self) -> tuple[str, list[tuple[str, float, float]]]:
        return self.name, list(self._probe)

    def probe_ping(self) -> None:
        return None


@dataclass
class Call:
    """One actor call as the driver saw it."""

    actor: str
    method: str
    submitted: float
    done: float | None = None


@dataclass
class Timeline:
    intervals: list[tuple[str, float, float]] = field(default_factory=list)
    stage_spans: list[tuple[str, float, float]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    worker_records: dict[str, list[tuple[str, float, float]]] = field(default_factory=dict)
    ping_s: list[float] = field(default_factory=list)
    closed: bool = False  # after the flow: the benchmark's own reads of the artifacts are not recorded

    def add(self, component: str, started: float, ended: float) -> None:
        if not self.closed:
            self.intervals.append((component, started, ended))


# ---------------------------------------------------------------- driver-side wrappers


def _timed(timeline: Timeline, component: str, fn, stage: str | None = None):
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            ended = time.monotonic()
            timeline.add(component, started, ended)
            if stage and not timeline.closed:
                timeline.stage_spans.append((stage, started, ended))

    return wrapper


def _timed_async(timeline: Timeline, component: str, fn):
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return await fn(*args, **kwargs)
        finally:
            timeline.add(component, started, time.monotonic())

    return wrapper


def _first_then(timeline: Timeline, first: str, later: str, fn):
    """Times `fn` as `first` on its first call (creating workers), as `later` after that."""
    calls = []

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        component = first if not calls else later
        calls.append(1)
        return _timed(timeline, component, fn)(*args, **kwargs)

    return wrapper


class _TimedMethod:
    def __init__(self, method, actor: str, name: str, timeline: Timeline) -> None:
        self._method, self._actor, self._name, self._timeline = method, actor, name, timeline

    def remote(self, *args: Any, **kwargs: Any):
        call = Call(self._actor, self._name, time.monotonic())
        ref = self._method.remote(*args, **kwargs)
        ref.future().add_done_callback(lambda _future: setattr(call, "done", time.monotonic()))
        self._timeline.calls.append(call)
        return ref


class _TimedActor:
    """An actor handle whose method calls are timed from submission until their result is ready."""

    def __init__(self, handle, actor: str, timeline: Timeline) -> None:
        self._handle, self._actor, self._timeline = handle, actor, timeline

    def __getattr__(self, name: str) -> _TimedMethod:
        return _TimedMethod(getattr(self._handle, name), self._actor, name, self._timeline)


def install(timeline: Timeline) -> None:
    """Replace mappa's functions (in this process) by timed ones; workers become `TimedModelWorker`s."""
    from dataclasses import replace

    import ray

    import mappa.cluster.ray_cluster as cluster
    import mappa.flows.train as train_flow
    import mappa.stages.advantages as advantage_stage
    import mappa.stages.rollout as rollout
    import mappa.stages.score as coach_stage
    import mappa.stages.update as update_stage
    from mappa.stages import REGISTRY
    from mappa.storage.store import ArtifactStore

    # ray pickles the worker class by value, so the workers need not import this benchmark module
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster.ModelWorker = TimedModelWorker
    original_worker = cluster._worker

    def timed_worker(run, name: str, *args: Any, **kwargs: Any) -> _TimedActor:
        return _TimedActor(original_worker(run, name, *args, **kwargs), name, timeline)

    cluster._worker = timed_worker
    original_ensure = cluster.ensure_ray

    def ensure_ray(config) -> None:
        if ray.is_initialized():
            return original_ensure(config)
        return _timed(timeline, "Ray start", original_ensure)(config)

    cluster.ensure_ray = ensure_ray
    agent_workers = _first_then(timeline, "worker start", "Ray calls", cluster.agent_workers)
    for module in (cluster, rollout, advantage_stage, update_stage):
        module.agent_workers = agent_workers
    cluster.coach_worker = _first_then(timeline, "worker start", "Ray calls", cluster.coach_worker)
    for stage in STAGES:  # the tasks run a stage's registered `compute`, looked up at call time
        REGISTRY[stage] = replace(
            REGISTRY[stage], compute=_timed(timeline, "stage glue", REGISTRY[stage].compute, stage)
        )
    REGISTRY["report"] = replace(
        REGISTRY["report"], compute=_timed(timeline, "report", REGISTRY["report"].compute, "report")
    )
    train_flow.run_summary = _timed(timeline, "run summary", train_flow.run_summary)
    train_flow.release_workers = _releasing(timeline, train_flow.release_workers)
    for method in STORE_METHODS:
        setattr(ArtifactStore, method, _timed(timeline, "artifact I/O", getattr(ArtifactStore, method)))
    for module_name in ("mappa.envs.mathchat.team", "mappa.envs.dsbench.team"):
        module = sys.modules.get(module_name) or __import__(module_name, fromlist=["run_programs_async"])
        module.run_programs_async = _timed_async(timeline, "sandbox", module.run_programs_async)
    advantage_stage.compute_experiences = _timed(
        timeline, "advantage math", advantage_stage.compute_experiences
    )
    coach_stage.score_trajectories = _timed_async(
        timeline, "coach scoring (driver)", coach_stage.score_trajectories
    )


def _releasing(timeline: Timeline, release):
    """`release_workers` that first collects the workers' records and times a trivial round trip."""

    def wrapper(run_id: str, names: list[str]) -> None:
        started = time.monotonic()
        collect_worker_records(timeline, run_id, names)
        timeline.add("benchmark probes", started, time.monotonic())
        _timed(timeline, "worker release", release)(run_id, names)

    return wrapper


def collect_worker_records(timeline: Timeline, run_id: str, names: list[str], pings: int = 20) -> None:
    import ray

    if not ray.is_initialized():
        return
    handles = []
    for name in names:
        try:
            handles.append(ray.get_actor(f"mappa-{run_id}-{name}"))
        except ValueError:
            continue  # e.g. no coach worker under a rubric coach
    for handle in handles:
        name, records = ray.get(handle.probe_records.remote())
        timeline.worker_records[name] = records
    if handles:
        for _ in range(pings):  # a trivial call's round trip: the floor of a Ray call's cost
            started = time.monotonic()
            ray.get(handles[0].probe_ping.remote())
            timeline.ping_s.append(time.monotonic() - started)


# ---------------------------------------------------------------- attribution


def worker_intervals(timeline: Timeline) -> list[tuple[str, float, float]]:
    out = []
    for actor, records in timeline.worker_records.items():
        for method, started, ended in records:
            component = WORKER_METHODS.get(method, "Ray calls")
            if actor == "coach" and component == "generation":
                component = "coach model"
            out.append((component, started, ended))
    return out


def in_flight_intervals(timeline: Timeline) -> list[tuple[str, float, float]]:
    return [("Ray calls", c.submitted, c.done) for c in timeline.calls if c.done is not None]


def attribute(intervals: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """Slices (component, start, end) covering the union of `intervals`, each slice given to the
    highest-priority component active in it; neighbouring slices of one component merged."""
    events = sorted(
        [(start, 1, RANK[c]) for c, start, end in intervals if end > start]
        + [(end, -1, RANK[c]) for c, start, end in intervals if end > start]
    )
    active = [0] * len(COMPONENTS)
    slices: list[tuple[str, float, float]] = []
    previous = None
    for moment, change, rank in events:
        if previous is not None and moment > previous:
            top = next((r for r, count in enumerate(active) if count), None)
            if top is not None:
                name = COMPONENTS[top][0]
                if slices and slices[-1][0] == name and slices[-1][2] == previous:
                    slices[-1] = (name, slices[-1][1], moment)
                else:
                    slices.append((name, previous, moment))
        active[rank] += change
        previous = moment
    return slices


def split_prefect(
    slices: list[tuple[str, float, float]], spans: list[tuple[str, float, float]]
) -> list[tuple[str, float, float]]:
    """Prefect time before the first stage or after the last report is the flow's start and finish."""
    if not spans:
        return slices
    first, last = min(s for _, s, _ in spans), max(e for _, _, e in spans)
    out = []
    for name, start, end in slices:
        if name != "Prefect":
            out.append((name, start, end))
            continue
        parts = (
            ("Prefect flow start/finish", start, min(end, first)),
            ("Prefect", max(start, first), min(end, last)),
            ("Prefect flow start/finish", max(start, last), end),
        )
        out += [(label, lo, hi) for label, lo, hi in parts if hi > lo]
    return out


def stage_of(spans: list[tuple[str, float, float]], start: float, end: float) -> str:
    middle = (start + end) / 2
    return next((stage for stage, lo, hi in spans if lo <= middle < hi), "outside stages")


def ray_call_rows(timeline: Timeline) -> list[dict[str, Any]]:
    """Per (worker kind, method): calls, seconds in flight, seconds in the worker, and the overhead:
    per call (worker start - max(submitted, end of the worker's previous work)) + (ready - worker end),
    i.e. the call's time in flight minus its own work and minus queueing behind earlier calls."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for actor, records in timeline.worker_records.items():
        calls = [c for c in timeline.calls if c.actor == actor]
        previous_end = next((e for m, _, e in records if m == "load"), 0.0)
        work = [r for r in records if r[0] != "load"]
        for call, (method, started, ended) in zip(calls, work, strict=False):
            if call.method != method or call.done is None:
                raise ValueError(f"worker {actor}'s records do not match its calls ({call} vs {method})")
            kind = "coach" if actor == "coach" else "agent"
            row = groups.setdefault((kind, method), {"worker": kind, "method": method, "overheads": []})
            overhead = max(0.0, started - max(call.submitted, previous_end)) + max(0.0, call.done - ended)
            row["overheads"].append(overhead)
            row["calls"] = row.get("calls", 0) + 1
            row["in_flight_s"] = row.get("in_flight_s", 0.0) + (call.done - call.submitted)
            row["in_worker_s"] = row.get("in_worker_s", 0.0) + (ended - started)
            previous_end = ended
    rows = []
    for row in groups.values():
        overheads = row.pop("overheads")
        median_ms = 1e3 * statistics.median(overheads)
        rows.append({**row, "overhead_s": sum(overheads), "median_overhead_ms": median_ms})
    return sorted(rows, key=lambda r: (r["worker"], r["method"]))
