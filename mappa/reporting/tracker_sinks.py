"""Where a run's scalars go: TensorBoard event files (on by default), W&B and MLflow (`trackers` in the
config). Each sink takes `log(step, scalars)`; the step is the iteration; and `log_table(step, name, rows)`
(rows: dicts with the same keys), as a TensorBoard text summary (a markdown table), a `wandb.Table`, or an
MLflow table artifact (`NAME/iter-000K.json`).

- TensorBoard: an event file per call under `ROOT/RUN_ID/tensorboard/` (for a remote root written locally
  and copied there), so a killed process loses nothing it logged.
- W&B: one W&B run per mappa run (its id derived from the run id, resumed by a later process), scalars
  against an `iteration` axis (`define_metric`), the run's config as W&B's config. Files under
  `ROOT/RUN_ID/wandb/` (remote root: `~/.cache/mappa/wandb/RUN_ID`, copied into the run at the end);
  `mode: offline` uploads nothing (`wandb sync` that folder later).
- MLflow: one MLflow run per mappa run in `trackers.mlflow.experiment`, found again by its `mappa.run_id`
  tag; the config as params. Default store: `sqlite:///ROOT/RUN_ID/mlflow.db`, its artifacts in
  `ROOT/RUN_ID/mlflow-artifacts/` (a remote root needs a `tracking_uri`: a server, which keeps them).

W&B and MLflow sinks stay open for the process (`open_trackers`) and are closed by the flow
(`close_trackers`, or at exit). Only numbers derived from the artifacts and the config's settings (which
hold no secret: keys are named by environment variable, never stored) reach a tracker.

Not covered: which scalars (`mappa.reporting.trackers`), and logging the same iteration once (the report
stage runs once per iteration).
"""

from __future__ import annotations

import atexit
import hashlib
import netrc
import os
import re
import time
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from mappa.config import ConfigError, MlflowConfig, RunConfig, WandbConfig
from mappa.storage.run import Run

LOCAL_CACHE = Path.home() / ".cache" / "mappa"


class MetricsSink(Protocol):
    def log(self, step: int, scalars: dict[str, float]) -> None: ...

    def log_table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


class TensorBoardSink:
    """Event files in `folder` (torch's SummaryWriter: no TensorFlow needed)."""

    def __init__(self, folder: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder))

    def log(self, step: int, scalars: dict[str, float]) -> None:
        for name, value in sorted(scalars.items()):
            self.writer.add_scalar(name, value, global_step=step)

    def log_table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None:
        self.writer.add_text(name, markdown_table(rows), global_step=step)

    def close(self) -> None:
        self.writer.close()


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Rows (dicts with the same keys) as a markdown table; `|` escaped, line breaks as spaces."""
    columns = list(rows[0]) if rows else []

    def cell(value: Any) -> str:
        return " ".join(str(value).split()).replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def tracker_id(run_id: str) -> str:
    """The run id as W&B accepts it (letters, digits, '-', '_'; at most 64), a short hash appended when
    it had to change, so `a.b` and `a_b` stay apart."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", run_id)[:50]
    if slug != run_id:
        slug = f"{slug}-{hashlib.sha256(run_id.encode()).hexdigest()[:8]}"
    return slug


def flat_settings(config: RunConfig) -> dict[str, Any]:
    """The run's config as `section.field` -> value (lists and dicts inside a field stay one value)."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and node and prefix.count(".") < 2:
            for key, value in node.items():
                walk(f"{prefix}.{key}" if prefix else str(key), value)
        else:
            flat[prefix] = node

    walk("", config.model_dump(mode="json"))
    return flat


class WandbSink:
    def __init__(self, run: Run, settings: WandbConfig, folder: Path) -> None:
        import wandb

        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.run = wandb.init(
            project=settings.project,
            entity=settings.entity,
            id=tracker_id(run.run_id),
            name=run.run_id,
            resume="allow",  # a resumed mappa run continues its W&B run
            mode=settings.mode,
            dir=str(folder),
            config=flat_settings(run.config),
            tags=["mappa", f"env:{run.config.env.type}"],
            settings=wandb.Settings(console="off", silent=True),  # mappa's terminal stays its own
        )
        self.run.define_metric("iteration")
        self.run.define_metric("*", step_metric="iteration")

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self.run.log({**scalars, "iteration": step})

    def log_table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None:
        import wandb

        columns = list(rows[0]) if rows else []
        table = wandb.Table(columns=columns, data=[[row.get(c) for c in columns] for row in rows])
        self.run.log({name: table, "iteration": step})

    def close(self) -> None:
        self.run.finish()


class MlflowSink:
    def __init__(self, run: Run, settings: MlflowConfig, tracking_uri: str) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.client = client = MlflowClient(tracking_uri)
        experiment = client.get_experiment_by_name(settings.experiment)
        artifacts = None if settings.tracking_uri else mlflow_artifacts(run)
        if experiment is None:  # artifacts (the sampled-actions tables) next to the default store, not in ./
            experiment_id = client.create_experiment(settings.experiment, artifact_location=artifacts)
        else:
            experiment_id = experiment.experiment_id
        # (a default store made before artifacts went into the run would put tables in ./mlruns: none then)
        self.tables = artifacts is None or (experiment is None or experiment.artifact_location == artifacts)
        tag = f"tags.`mappa.run_id` = '{run.run_id}'"
        found = client.search_runs([experiment_id], filter_string=tag, max_results=1)
        if found:  # a resumed mappa run continues its MLflow run
            self.run_id = found[0].info.run_id
            client.update_run(self.run_id, status="RUNNING")
            return
        created = client.create_run(experiment_id, run_name=run.run_id, tags={"mappa.run_id": run.run_id})
        self.run_id = created.info.run_id
        params = [Param(key, str(value)[:6000]) for key, value in flat_settings(run.config).items()]
        for start in range(0, len(params), 100):  # MLflow takes 100 params a batch
            client.log_batch(self.run_id, params=params[start : start + 100])

    def log(self, step: int, scalars: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(name, value, now, step) for name, value in sorted(scalars.items())]
        for start in range(0, len(metrics), 1000):  # MLflow takes 1000 metrics a batch
            self.client.log_batch(self.run_id, metrics=metrics[start : start + 1000])

    def log_table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None:
        if not self.tables:
            return
        columns = list(rows[0]) if rows else []
        data = {c: [row.get(c) for row in rows] for c in columns}
        self.client.log_table(self.run_id, data=data, artifact_file=f"{name}/iter-{step:04d}.json")

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def mlflow_uri(run: Run, settings: MlflowConfig) -> str:
    if settings.tracking_uri:
        return settings.tracking_uri
    return f"sqlite:///{Path(run.store.path(run.run_id, 'mlflow.db')).resolve()}"


def mlflow_artifacts(run: Run) -> str:
    """Where the default store's runs keep their artifacts: `ROOT/RUN_ID/mlflow-artifacts/` (MLflow's own
    default, `./mlruns`, would be the current directory)."""
    return Path(run.store.path(run.run_id, "mlflow-artifacts")).resolve().as_uri()


def wandb_folder(run: Run) -> Path:
    if run.store.is_local:
        return Path(run.store.path(run.run_id))
    return LOCAL_CACHE / "wandb" / run.run_id


def wandb_logged_in() -> bool:
    """Whether W&B has a key: WANDB_API_KEY, or the netrc entry `wandb login` writes for its host."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


def check_trackers(config: RunConfig) -> None:
    """Refuse, before anything starts, a tracker that could not log: its package missing, W&B online
    without a login, MLflow's default store on a remote root."""
    wandb, mlflow = config.trackers.wandb, config.trackers.mlflow
    for enabled, module, name in (
        (wandb.enabled, "wandb", "wandb"),
        (mlflow.enabled, "mlflow", "mlflow-skinny"),
    ):
        if not enabled:
            continue
        try:
            __import__(module)
        except ImportError:
            raise ConfigError(
                f"trackers.{module}.enabled is set but {module} is not installed: "
                f"pip install 'mappa[trackers]' (or {name}), or set trackers.{module}.enabled=false"
            ) from None
    if wandb.enabled and wandb.mode == "online":
        if not wandb_logged_in():
            raise ConfigError(
                "trackers.wandb.mode=online needs a W&B login: run `wandb login` or set WANDB_API_KEY, "
                "or log locally with trackers.wandb.mode=offline (then `wandb sync` the run's wandb folder)"
            )
    if mlflow.enabled and not mlflow.tracking_uri and "://" in config.storage.root:
        raise ConfigError(
            f"trackers.mlflow needs a tracking_uri for a run stored at {config.storage.root} (the default, "
            "a SQLite file in the run's folder, needs a local root): set trackers.mlflow.tracking_uri to "
            "your MLflow server, e.g. http://mlflow:5000"
        )


_OPEN: dict[tuple[str, str], list[MetricsSink]] = {}


def open_trackers(run: Run) -> list[MetricsSink]:
    """The W&B and MLflow sinks the run's config asks for, opened once per process."""
    key = (run.store.url(), run.run_id)
    if key not in _OPEN:
        settings = run.config.trackers
        sinks: list[MetricsSink] = []
        if settings.wandb.enabled:
            sinks.append(WandbSink(run, settings.wandb, wandb_folder(run)))
        if settings.mlflow.enabled:
            sinks.append(MlflowSink(run, settings.mlflow, mlflow_uri(run, settings.mlflow)))
        _OPEN[key] = sinks
    return _OPEN[key]


def close_trackers(run: Run) -> None:
    """Close the run's open sinks (W&B's files of a remote root copied into the run)."""
    for sink in _OPEN.pop((run.store.url(), run.run_id), []):
        sink.close()
        if isinstance(sink, WandbSink) and not run.store.is_local:
            run.store.put_folder(sink.folder / "wandb", run.run_id, "wandb")


def _close_all() -> None:
    for store_url, run_id in list(_OPEN):
        for sink in _OPEN.pop((store_url, run_id)):
            sink.close()


atexit.register(_close_all)
