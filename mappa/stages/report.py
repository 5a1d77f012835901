"""The report stage: Prefect artifacts for a run, a report per finished iteration, and evaluation results.

`publish_iteration_report(run, K)` adds iteration K to the run's history (`mappa.storage.history`: one
file, so a report costs the same at iteration 1 and 100), writes the curves so far to the run as
`iter-000K/report/curves.png`, then creates, under keys derived from the run id (one key per kind, so the
UI's Artifacts page shows one collection per kind whose versions are the iterations):

    mappa-<run>-agents   table, one row per agent: coach score mean/std/min/max, KL, loss, clip fraction,
                         approx KL, grad norm, trainer tokens/s
    mappa-<run>-report   markdown: success rate, coach model and parse statuses, the actions left
                         unscored (no advantage) or scored by rule per agent, rubric agreement and
                         score gap when recorded, stage timings, the curves PNG, links to the files
    mappa-<run>-progress table, one row per finished iteration so far: success rate, mean coach score and
                         KL per agent, seconds per stage (the run's progress on one page)
    mappa-<run>-report-iter-000K   the iteration's markdown report under a key of its own
    mappa-<run>-kinds    table, one row per task kind (DSBench: regression, classification), where the
                         env grades by kind: success, relative score, metric means, coach mean per agent

`kind_rows_of(run, K)` (per task kind figures) reads the artifacts only, for the CLI as well.

`publish_evaluation(run, K, rows)` makes the table `mappa-<run>-evaluation` with an aggregate row.

How the PNG reaches the UI (checked in Prefect 3.7.7's bundled UIs): an image artifact
(`create_image_artifact`) is drawn as `<img src=URL>` above the URL as text, so it needs a URL the viewer's
browser can fetch; a store's URLs are local paths or s3:// and are not. So the report embeds the PNG as a
`data:image/png;base64` URI in its markdown: the default UI (v1, prefect-design's markdown renderer turns
image tokens into `<img>` unchanged) shows it; the experimental v2 UI (react-markdown's default URL filter
drops data: URIs) shows the alt text, and both show the link to the stored file. No image artifact is made:
with a data URI it would print ~70 kB of base64 under the picture, and presigned s3 URLs expire and carry a
credential-derived signature, which must not go into artifacts.

Failure policy: a report must not stop training. Files are written first and storage errors raise (the
store is the record; the artifacts are a view of it). Errors talking to the Prefect API (unreachable,
refused, HTTP errors) are logged as warnings and returned under "errors". Inside a flow or task run the
artifacts belong to that run; outside one they are created unattached, against PREFECT_API_URL or else
Prefect's ephemeral server, and Prefect 3.7 warns (FutureWarning) that this use is deprecated.

Not covered: deleting old versions, or artifacts for runs that never reached an update.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from uuid import UUID

import httpx
import pandas as pd
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.exceptions import MissingContextError
from prefect.logging import get_run_logger

from mappa.envs.outcome_summary import kind_rows
from mappa.reporting.curves import plot_curves
from mappa.reporting.trackers import log_iteration
from mappa.stages.stage import Stage, get_stage, register
from mappa.storage.history import SCORE_STATS, TIMED_STAGES, TRAINER_METRICS, record_iteration
from mappa.storage.run import MANIFEST, TRAINING, Run, iteration_label

AGENT_COLUMNS = ("agent", *SCORE_STATS, *TRAINER_METRICS)


def artifact_key(run_id: str, kind: str) -> str:
    """`mappa-<run id>-<kind>` as a valid Prefect key (lowercase letters, digits, dashes).

    A run id that needs changing gets a short hash of itself appended, so `a_b` and `a.b` stay apart.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-") or "run"
    if slug != run_id:
        slug = f"{slug}-{hashlib.sha256(run_id.encode()).hexdigest()[:6]}"
    return f"mappa-{slug}-{kind}"


def curves_png_parts(run: Run, iteration: int) -> tuple[str, ...]:
    return run.parts(iteration, "report", "curves.png")


def publish_iteration_report(run: Run, iteration: int) -> dict[str, Any]:
    """Write the curves PNG and create the iteration's table and markdown artifacts.

    Returns {"iteration", "png_url", "artifacts": {kind: {"key", "id"}}, "errors"}; an artifact whose
    creation failed has id None and its error listed. Raises ValueError if the iteration has not finished.
    """
    curves = record_iteration(run, iteration)  # the run's history up to this iteration: one file
    buffer = io.BytesIO()
    plot_curves(curves, buffer, title=f"run {run.run_id}, iterations 0-{iteration}")
    png = buffer.getvalue()
    run.store.write_bytes(png, *curves_png_parts(run, iteration))
    png_url = run.store.url(*curves_png_parts(run, iteration))
    errors: list[str] = []
    try:  # TensorBoard: a tracker must not stop training either
        log_iteration(run, iteration, curves)
    except (OSError, ValueError, KeyError) as exc:
        _logger().warning("TensorBoard scalars of iteration %d not written: %s", iteration, exc)
        errors.append(f"tensorboard: {exc}")
    agents = curves.loc[curves["iteration"] == iteration, list(AGENT_COLUMNS)]
    rows = [_rounded(row) for row in agents.to_dict("records")]
    markdown = _report_markdown(run, iteration, png, png_url)
    describe = f"run {run.run_id}, iteration {iteration}"
    artifacts = {
        "agents": create_artifact(
            artifact_key(run.run_id, "agents"),
            lambda key: create_table_artifact(rows, key=key, description=f"{describe}: agents", _sync=True),
            errors,
        ),
        "report": create_artifact(
            artifact_key(run.run_id, "report"),
            lambda key: create_markdown_artifact(markdown, key=key, description=describe, _sync=True),
            errors,
        ),
    }
    artifacts["iteration"] = create_artifact(  # each iteration's report under a key of its own
        artifact_key(run.run_id, f"report-{iteration_label(iteration)}"),
        lambda key: create_markdown_artifact(markdown, key=key, description=describe, _sync=True),
        errors,
    )
    progress = [_rounded(row) for row in progress_rows(curves)]
    artifacts["progress"] = create_artifact(
        artifact_key(run.run_id, "progress"),
        lambda key: create_table_artifact(
            progress, key=key, description=f"run {run.run_id}: one row per iteration", _sync=True
        ),
        errors,
    )
    kinds = [_rounded(row) for row in kind_rows_of(run, iteration)]
    if kinds:  # per task kind (DSBench: regression vs classification), where the env grades by kind
        artifacts["kinds"] = create_artifact(
            artifact_key(run.run_id, "kinds"),
            lambda key: create_table_artifact(
                kinds, key=key, description=f"{describe}: by task kind", _sync=True
            ),
            errors,
        )
    return {"iteration": iteration, "png_url": png_url, "artifacts": artifacts, "errors": errors}


def progress_rows(history: pd.DataFrame) -> list[dict[str, Any]]:
    """The run's progress, one row per finished iteration of the history (`mappa.storage.history`):
    success rate, each agent's mean coach score and KL, each stage's seconds."""
    rows = []
    for iteration, frame in history.groupby("iteration", sort=True):
        first = frame.iloc[0]
        row: dict[str, Any] = {"iteration": int(iteration), "success_rate": float(first["success_rate"])}
        agents = frame.to_dict("records")
        row |= {f"score {agent['agent']}": agent["mean_score"] for agent in agents}
        row |= {f"kl {agent['agent']}": agent["kl"] for agent in agents}
        row |= {f"{stage} s": float(first[f"{stage}_s"]) for stage in TIMED_STAGES}
        rows.append(row)
    return rows


def kind_rows_of(run: Run, iteration: int) -> list[dict[str, Any]]:
    """Per task kind figures of an iteration (DSBench: regression vs classification); [] for envs without."""
    manifests = {
        stage: run.read_manifest(iteration, stage)
        for stage in ("rollout", "score")
        if run.has_manifest(iteration, stage)
    }
    by_kind = manifests.get("rollout", {}).get("by_kind")
    return kind_rows(by_kind, manifests.get("score", {}).get("mean_score_by_kind"))


def publish_evaluation(
    run: Run,
    iteration: int,
    results: pd.DataFrame | Sequence[Mapping[str, Any]],
    stage: str = "evaluate",
) -> dict[str, Any]:
    """A table artifact of evaluation results (one row per problem, or per env/agent) plus an aggregate row.

    `iteration` is the evaluated checkpoint (-1: the base model). `results` is a DataFrame or a list of
    dicts, e.g. with problem_id, correct, final_answer, gold_answer (as `mappa evaluate` writes them).
    The aggregate row averages the numeric and boolean columns (so `correct` becomes the accuracy).
    `stage`: `evaluate` (the run's held-out set, artifact `...-evaluation`) or `evaluate-on/NAME` (another
    problem file, artifact `...-evaluation-on-NAME`).
    Returns {"artifacts": {"evaluation": {"key", "id"}}, "accuracy", "rows", "errors"}.
    """
    frame = results.copy() if isinstance(results, pd.DataFrame) else pd.DataFrame(list(results))
    if frame.empty:
        raise ValueError(f"no evaluation results to publish for run {run.run_id}, iteration {iteration}")
    aggregate = _aggregate_row(frame)
    rows = [_rounded(row) for row in frame.to_dict("records")] + [aggregate]
    accuracy = float(frame["correct"].astype(float).mean()) if "correct" in frame else None
    weights = "the base model" if iteration < 0 else f"the checkpoint of iteration {iteration}"
    problem_set = stage.partition("/")[2]
    describe = f"run {run.run_id}, evaluation of {weights}" + (f" on {problem_set}" if problem_set else "")
    if accuracy is not None:
        describe += f": accuracy {accuracy:.1%} on {len(frame)}"
    kind = "evaluation" + (
        f"-on-{re.sub(r'[^a-z0-9]+', '-', problem_set.lower()).strip('-')}" if problem_set else ""
    )
    errors: list[str] = []
    created = create_artifact(
        artifact_key(run.run_id, kind),
        lambda key: create_table_artifact(rows, key=key, description=describe, _sync=True),
        errors,
    )
    return {"artifacts": {"evaluation": created}, "accuracy": accuracy, "rows": len(rows), "errors": errors}


def create_artifact(
    key: str, create: Callable[[str], UUID], errors: list[str] | None = None
) -> dict[str, str | None]:
    """Run one artifact creation; an API failure becomes a warning (and an entry in `errors`)."""
    try:
        return {"key": key, "id": str(create(key))}
    except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: Prefect's "Failed to reach API at ..."
        _logger().warning("artifact %s not created, Prefect API error: %s", key, exc)
        if errors is not None:
            errors.append(f"{key}: {exc}")
        return {"key": key, "id": None}


def _logger() -> logging.Logger | logging.LoggerAdapter:
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def _rounded(row: Mapping[str, Any]) -> dict[str, Any]:
    """Floats to 4 significant digits (KL can be 1e-5, so not to fixed decimals), NaN to None."""
    return {key: _round(value) if isinstance(value, float) else value for key, value in row.items()}


def _round(value: float) -> float | None:
    return None if math.isnan(value) else float(f"{value:.4g}")


def _aggregate_row(frame: pd.DataFrame) -> dict[str, Any]:
    label = "problem_id" if "problem_id" in frame else frame.columns[0]
    row: dict[str, Any] = {}
    for column in frame.columns:
        values = frame[column]
        numeric = pd.api.types.is_bool_dtype(values) or pd.api.types.is_numeric_dtype(values)
        row[column] = _round(float(values.astype(float).mean())) if numeric and column != label else None
    row[label] = f"all (n={len(frame)})"
    return row


def _report_markdown(run: Run, iteration: int, png: bytes, png_url: str) -> str:
    lines = [f"## Run `{run.run_id}`, iteration {iteration}", "", *_summary_lines(run, iteration), ""]
    lines += ["### Stage timings", "", "| stage | seconds |", "| --- | ---: |"]
    for stage in TRAINING:
        if run.has_manifest(iteration, stage):
            seconds = run.read_manifest(iteration, stage).get("timings", {}).get("total_s")
            lines.append(f"| {stage} | {'n/a' if seconds is None else f'{seconds:.1f}'} |")
    image = f"data:image/png;base64,{base64.b64encode(png).decode()}"
    lines += ["", "### Curves so far", "", f"![training curves, iterations 0-{iteration}]({image})"]
    lines += ["", "### Files", ""]
    lines += [f"- {name}: {_path_or_link(url)}" for name, url in _file_urls(run, iteration, png_url)]
    return "\n".join(lines) + "\n"


def _summary_lines(run: Run, iteration: int) -> list[str]:
    rollout = run.read_manifest(iteration, "rollout")
    score = run.read_manifest(iteration, "score")
    success = rollout.get("success_rate")
    lines = [
        f"- success rate: {'n/a' if success is None else f'{success:.0%}'} "
        f"({rollout.get('trajectories', '?')} trajectories, {rollout.get('rows', '?')} actions)",
        f"- coach: `{score.get('coach_model', '?')}`, parse status: "
        + ", ".join(f"{status} {count}" for status, count in sorted(score.get("parse_status", {}).items())),
    ]
    lines += _unscored_lines(run, iteration, score)
    gap = (score.get("bias") or {}).get("gap")
    if gap is not None:
        lines.append(f"- coach score gap, correct minus incorrect trajectories: {gap:+.2f}")
    for row in kind_rows_of(run, iteration):
        relative = f", relative score {row['fair_score_mean']:.2f}" if "fair_score_mean" in row else ""
        lines.append(
            f"- {row['kind']}: success {row['success_rate']:.0%} of {row['trajectories']}{relative}, "
            f"coach mean {row.get('coach_all', math.nan):.2f}"
        )
    for warning in score.get("bias_warnings") or []:
        lines.append(f"- **warning**: {warning['message']}")
    agreement = score.get("rubric_agreement")
    if agreement:
        values = ", ".join(f"{a} {'n/a' if r is None else f'{r:.2f}'}" for a, r in sorted(agreement.items()))
        lines.append(f"- agreement with the rubric coach (Pearson r per agent): {values}")
    return lines


def _unscored_lines(run: Run, iteration: int, score: dict[str, Any]) -> list[str]:
    """The actions out of the gradient (the coach gave no score: no advantage), per trainable agent, and
    those scored by rule (no usable output)."""
    unscored = {}
    if run.has_manifest(iteration, "advantages"):
        unscored = run.read_manifest(iteration, "advantages").get("unscored") or {}
    lines = []
    if any(unscored.values()):
        counts = ", ".join(f"{agent} {n}" for agent, n in sorted(unscored.items()))
        lines.append(f"- unscored actions, no advantage (coach gave no parsable score): {counts}")
    ruled = {
        agent: counts.get("rule", 0) for agent, counts in (score.get("parse_status_by_agent") or {}).items()
    }
    if any(ruled.values()):
        counts = ", ".join(f"{agent} {n}" for agent, n in sorted(ruled.items()) if n)
        lines.append(f"- scored by rule, no usable output (blank or only reasoning): {counts}")
    return lines


def _path_or_link(url: str) -> str:
    """A link only where a browser can open it (http/https); a local path or an s3:// URL is shown as text
    (as a link, the Prefect UI would open it against its own server: a 404)."""
    return f"[{url}](<{url}>)" if url.startswith(("http://", "https://")) else f"`{url}`"


def _file_urls(run: Run, iteration: int, png_url: str) -> list[tuple[str, str]]:
    found = []
    for stage in TRAINING:
        for name in (get_stage(stage).output, MANIFEST):
            if run.store.exists(*run.parts(iteration, stage, name)):
                found.append((f"{stage}/{name}", run.store.url(*run.parts(iteration, stage, name))))
    return [*found, ("report/curves.png", png_url)]


def describe(result: dict[str, Any]) -> str:
    made = [kind for kind, artifact in result.get("artifacts", {}).items() if artifact.get("id")]
    failed = f", {len(result['errors'])} failed" if result.get("errors") else ""
    return f"artifacts {', '.join(made) or 'none'}{failed}"


STAGE = register(Stage("report", None, publish_iteration_report, describe, inputs=("update",)))
