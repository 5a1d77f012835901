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
