"""Requests to a Prefect server's REST API from tests, retried the way Prefect's own client retries them:
the server answers 503 while its SQLite database is locked by a concurrent writer, and 429/502 under load.
A plain httpx call would fail a test on what every Prefect client treats as a transient answer."""

from __future__ import annotations

import time

import httpx

RETRIED_STATUS = {429, 502, 503}


def api(method: str, url: str, attempts: int = 8, **kwargs) -> httpx.Response:
    """`httpx.request(method, url, **kwargs)`, retried with backoff (1, 2, 4 ... 15 s) on 429/502/503."""
    for attempt in range(attempts):
        response = httpx.request(method, url, timeout=30, **kwargs)
        if response.status_code not in RETRIED_STATUS:
            return response
        time.sleep(min(2**attempt, 15))
    return response


def post(url: str, path: str, body: dict) -> list[dict]:
    """A filter request's JSON answer (`POST <url>/<path>`), failing on an error status."""
    response = api("POST", f"{url}/{path}", json=body)
    response.raise_for_status()
    return response.json()


def iteration_runs(url: str, flow_run_ids: list[str]) -> dict[str, list[dict]]:
    """The `iteration-K` subflow runs of each of these `mappa-train` flow runs, by parent flow run id."""
    parents = {t["id"]: t["flow_run_id"] for t in post(url, "task_runs/filter", _of(flow_run_ids))}
    children = post(url, "flow_runs/filter", {"flows": {"name": {"any_": ["mappa-iteration"]}}})
    found: dict[str, list[dict]] = {run_id: [] for run_id in flow_run_ids}
    for child in sorted(children, key=lambda f: (f["name"], f["created"])):
        parent = parents.get(child["parent_task_run_id"])
        if parent is not None:
            found[parent].append(child)
    return found


def stage_task_runs(url: str, flow_run_ids: list[str]) -> list[dict]:
    """The stage task runs of these `mappa-train` flow runs: those of their iteration subflow runs."""
    children = [c["id"] for runs in iteration_runs(url, flow_run_ids).values() for c in runs]
    return post(url, "task_runs/filter", _of(children)) if children else []


def _of(flow_run_ids: list[str]) -> dict:
    return {"flow_runs": {"id": {"any_": list(flow_run_ids)}}}
