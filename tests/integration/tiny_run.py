"""The run config the integration tests share: every seat on the tiny random model, two problems of 16
new tokens, one torch thread per worker, global whitening (a random model fails every problem alike, so
the rubric gives each agent one constant score and per-agent whitening would, rightly, give zero
advantages; across agents scores differ). A test states only what it changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MATHCHAT_SEATS = ("solver", "executor", "verifier")
NO_RETRIES = {stage: 0 for stage in ("rollout", "score", "advantages", "update", "report")}


def scripted_coach(base_url: str, **settings: Any) -> dict[str, Any]:
    """The coach section for the scripted OpenAI-compatible test server (no client retries, no waiting
    through an outage: a test that stops the server sets `outage_budget_s`)."""
    return {
        "type": "openai",
        "base_url": base_url,
        "model": "scripted-coach",
        "max_retries": 0,
        "outage_budget_s": 0,
        **settings,
    }


def write_tiny_config(
    path: Path, tiny_model: Path, root: str | Path, seats: tuple[str, ...] = MATHCHAT_SEATS, **sections: Any
) -> Path:
    """Write the shared config, with `sections` merged in (a dict section one level deep), to `path`."""
    config: dict[str, Any] = {
        "iterations": 1,
        "agents": {seat: {"model": str(tiny_model)} for seat in seats},
        "coach": {"type": "rubric", "use_ground_truth": True},
        "rollout": {"problems_per_iteration": 2, "max_new_tokens": 16},
        "algo": {"whiten_scope": "global"},
        "storage": {"root": str(root)},
        # one thread per worker: two test files share two cores, and a model this small gains nothing
        # from a second thread but the time its threads spend waiting for each other (13 s of CPU less
        # for a two-iteration run)
        "cluster": {"torch_threads": 1},
    }
    for name, value in sections.items():
        merge = isinstance(value, dict) and isinstance(config.get(name), dict) and name != "coach"
        config[name] = {**config[name], **value} if merge else value
    path.write_text(yaml.safe_dump(config))
    return path
