"""Finds a baseline estimator by the config's `algo.baseline`: a built-in, a plug-in, or an import path.

    none, siblings                  the built-ins (`mappa.core.baselines:NONE`, `:SIBLINGS`)
    <name>                          an estimator an installed package registers in the entry-point group
                                    `mappa.baselines` (pyproject: `[project.entry-points."mappa.baselines"]
                                    loo = "my_team.loo:BASELINE"`)
    <package.module>:<NAME>         an import path to a `BaselineEstimator` (no registration; e.g. a module
                                    of your own on PYTHONPATH)

An estimator is loaded the first time it is asked for and kept. A name that is none of these, or a plug-in
that fails to import or holds no `BaselineEstimator`, raises `BaselineNotFound` / `BaselinePluginError`
with one line naming the estimator, the package and what failed (the lookup all plug-ins share:
`mappa.core.plugins`). What an estimator is: `mappa.core.baselines`. Standard library only (the core
stays pure).
"""

from __future__ import annotations

from functools import cache

from mappa.core.baselines import BaselineEstimator
from mappa.core.plugins import PluginKind, load_plugin

ENTRY_POINT_GROUP = "mappa.baselines"
BUILTIN_BASELINES = {"none": "mappa.core.baselines:NONE", "siblings": "mappa.core.baselines:SIBLINGS"}


class BaselineNotFound(ValueError):
    """`algo.baseline` names no built-in, no registered plug-in and no import path."""


class BaselinePluginError(ValueError):
    """An estimator was found but could not be loaded: its module failed to import, or it holds no
    `BaselineEstimator`."""


@cache
def get_baseline(name: str) -> BaselineEstimator:
    """The estimator `algo.baseline` names: a built-in, a registered plug-in or an import path; loaded the
    first time it is asked for and kept (every name it can give: `registered_plugins(BASELINES)`)."""
    return load_plugin(BASELINES, name)


BASELINES = PluginKind(
    "baseline",
    ENTRY_POINT_GROUP,
    BaselineEstimator,
    "BASELINE",
    BaselineNotFound,
    BaselinePluginError,
    builtins=BUILTIN_BASELINES,
    setting="baseline",
    holds_noun="estimator",
)
