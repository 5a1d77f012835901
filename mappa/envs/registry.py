"""Which envs exist: their seats, roles, task text, how to load their problems, run a batch of them, and
what ground truth the coach may see for an action.

Registry keys equal the config's `env.type` values. Env modules are imported only when their spec is asked
for (inside `get_env_spec`: DSBench's module loads scikit-learn), so config validation, which asks for an
env's seats, stays cheap. What a spec holds: `mappa.envs.spec`.
"""

from __future__ import annotations

from mappa.core.types import Problem
from mappa.envs.spec import EnvSpec

ENV_TYPES = ("mathchat", "dsbench")


def env_seats(env_type: str) -> tuple[str, ...]:
    return get_env_spec(env_type).seats


def get_env_spec(env_type: str) -> EnvSpec:
    if env_type == "mathchat":
        from mappa.envs import mathchat

        return mathchat.SPEC
    if env_type == "dsbench":
        from mappa.envs import dsbench

        return dsbench.SPEC
    raise ValueError(f"unknown env type {env_type!r}; known: {', '.join(ENV_TYPES)}")


def load_env_problems(env_type: str, source: str) -> list[Problem]:
    """The problems of `source` (an env's `train_data` / `eval_data` value) for env `env_type`."""
    return get_env_spec(env_type).load_problems(source)
