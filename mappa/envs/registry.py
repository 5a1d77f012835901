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
installed, or its metadata predates them) the line says to install it. The lookup itself is the one all
plug-ins share (`mappa.core.plugins`). A run resolves its env once, from its config (`RunConfig.env_spec`),
and hands the spec to what needs it; nothing else asks for an env by name. What a spec holds:
`mappa.envs.spec`.
"""

from __future__ import annotations

from functools import cache

from mappa.core.plugins import PluginKind, load_plugin, provider, registered_plugins
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
    return registered_plugins(ENVS)


def registering_package(env_type: str) -> str | None:
    """The distribution that registers `env_type` (mappa's own envs: `mappa`), or None where none does."""
    return provider(ENTRY_POINT_GROUP, env_type)


@cache
def get_env_spec(env_type: str) -> EnvSpec:
    """The spec `env_type` names, loaded once and kept. A run resolves it once, from its config
    (`RunConfig.env_spec`), and hands the spec on."""
    return load_plugin(ENVS, env_type)


def _mappa_not_installed(env_type: str) -> str | None:
    """The message for an unknown env where mappa's own envs are not registered (None where they are)."""
    if MAPPA_DISTRIBUTION in map(registering_package, registered_envs()):
        return None
    return (
        f"unknown env type {env_type!r}: mappa's own envs are not registered (the entry-point group "
        f"{ENTRY_POINT_GROUP!r} of the installed mappa is missing: this source tree is not installed, or "
        "its install predates them); run `pip install -e .` in the mappa checkout (or ./scripts/setup.sh)"
    )


ENVS = PluginKind(
    "env", ENTRY_POINT_GROUP, EnvSpec, "SPEC", EnvNotFound, EnvPluginError, unknown_hint=_mappa_not_installed
)
