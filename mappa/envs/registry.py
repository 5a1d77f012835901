"""Which envs exist: their seats, roles, task text and how to load their problems.

Registry keys equal the config's `env.type` values. Kept free of heavy imports so that config validation
can ask for an env's seats cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

from mappa.core.types import Problem


@dataclass(frozen=True)
class EnvSpec:
    type: str
    seats: tuple[str, ...]
    roles: dict[str, str]
    task: str


def env_seats(env_type: str) -> tuple[str, ...]:
    return get_env_spec(env_type).seats


def get_env_spec(env_type: str) -> EnvSpec:
    if env_type == "mathchat":
        from mappa.envs import mathchat

        return EnvSpec("mathchat", mathchat.SEATS, mathchat.ROLES, mathchat.TASK)
    raise ValueError(f"unknown env type {env_type!r}; known: mathchat")


def load_env_problems(source: str) -> list[Problem]:
    """`builtin:<split>` or a JSON/JSONL/Parquet file (local path or fsspec URL)."""
    from mappa.envs.math_problems import load_builtin, load_problems

    if source.startswith("builtin:"):
        return load_builtin(source.removeprefix("builtin:"))
    return load_problems(source)
