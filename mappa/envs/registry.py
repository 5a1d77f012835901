"""Finds an env's `EnvSpec` by the config's `env.type`: a registered plug-in, or an import path.

    <name>                          an env an installed package registers in the entry-point group
                                    `mappa.envs` (pyproject: `[project.entry-points."mappa.envs"]
                                    debate = "my_team.env:SPEC"`); mappa registers its own envs the same
                                    way (`mathchat`, `dsbench`: mappa's pyproject.toml)
    <package.module>:<NAME>         an import path to an `EnvSpec` (no registration; e.g. a module of your
                                    own on PYTHONPATH)

A spec is loaded the first time it is asked for and kept. A name that is none of these, or a plug-in that
fails to import or holds no `EnvSpec`, raises `EnvNotFound` / `EnvPluginError` with one line naming the env,
the package and what failed; where mappa's own entry points are missing (the source tree is not
installed, or its metadata predates them) the line says to install it. What a spec holds: `mappa.envs.spec`.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from mappa.core.types import Problem
from mappa.envs.spec import EnvSpec

ENTRY_POINT_GROUP = "mappa.envs"
MAPPA_DISTRIBUTION = "mappa"
DEFAULT_ENV = "mathchat"
"""The env of a config whose `env:` names no type."""


class EnvNotFound(ValueError):
    """`env.type` names no registered plug-in and no import path."""


class EnvPluginError(ValueError):
    """An env was found but could not be loaded: its module failed to import, or it holds no `EnvSpec`."""


def registered_envs() -> dict[str, str]:
    """Every env `env.type` can name, by name: the installed packages' entry points (`module:attr`)."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def registering_package(env_type: str) -> str | None:
    """The distribution that registers `env_type` (mappa's own envs: `mappa`), or None where none does."""
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=env_type):
        return ep.dist.name if ep.dist is not None else "an installed package"
    return None


def env_seats(env_type: str) -> tuple[str, ...]:
    return get_env_spec(env_type).seats


@cache
def get_env_spec(env_type: str) -> EnvSpec:
    target, origin = _target(env_type)
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a plug-in's import error, whatever it is, is reported in one line
        raise EnvPluginError(
            f"env {env_type!r} ({origin}): importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    spec = getattr(module, attribute, None) if attribute else None
    if callable(spec) and not isinstance(spec, EnvSpec):
        spec = spec()  # a factory returning the spec
    if not isinstance(spec, EnvSpec):
        found = "nothing" if spec is None else type(spec).__name__
        raise EnvPluginError(
            f"env {env_type!r} ({origin}): {target} holds {found}, not a mappa.envs.spec.EnvSpec; point it "
            "at the module's EnvSpec, as `package.module:SPEC`"
        )
    return spec


def load_env_problems(env_type: str, source: str) -> list[Problem]:
    """The problems of `source` (an env's `train_data` / `eval_data` value) for env `env_type`."""
    return get_env_spec(env_type).load_problems(source)


def _target(env_type: str) -> tuple[str, str]:
    """(`module:attribute`, where that came from, for messages)."""
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=env_type):
        package = ep.dist.name if ep.dist is not None else "an installed package"
        return ep.value, f"registered by package {package} as {ep.value}"
    if ":" in env_type:
        return env_type, "an import path"
    registered = registered_envs()
    if MAPPA_DISTRIBUTION not in map(registering_package, registered):
        raise EnvNotFound(
            f"unknown env type {env_type!r}: mappa's own envs are not registered (the entry-point group "
            f"{ENTRY_POINT_GROUP!r} of the installed mappa is missing: this source tree is not installed, or "
            "its install predates them); run `pip install -e .` in the mappa checkout (or ./scripts/setup.sh)"
        )
    raise EnvNotFound(
        f"unknown env type {env_type!r}: envs are {', '.join(sorted(registered))} (registered by installed "
        f"packages in the entry-point group {ENTRY_POINT_GROUP!r}), or an import path `package.module:SPEC`; "
        "check the spelling, or install the package that provides it (pip install -e path/to/it)"
    )
