"""Finds a baseline estimator by the config's `algo.baseline`: a built-in, a plug-in, or an import path.

    none, siblings                  the built-ins (`mappa.core.baselines:NONE`, `:SIBLINGS`)
    <name>                          an estimator an installed package registers in the entry-point group
                                    `mappa.baselines` (pyproject: `[project.entry-points."mappa.baselines"]
                                    loo = "my_team.loo:BASELINE"`)
    <package.module>:<NAME>         an import path to a `BaselineEstimator` (no registration; e.g. a module
                                    of your own on PYTHONPATH)

An estimator is loaded the first time it is asked for and kept. A name that is none of these, or a plug-in
that fails to import or holds no `BaselineEstimator`, raises `BaselineNotFound` / `BaselinePluginError`
with one line naming the estimator, the package and what failed. What an estimator is:
`mappa.core.baselines`. Standard library only (the core stays pure).
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from mappa.core.baselines import BaselineEstimator

ENTRY_POINT_GROUP = "mappa.baselines"
BUILTIN_BASELINES = {"none": "mappa.core.baselines:NONE", "siblings": "mappa.core.baselines:SIBLINGS"}


class BaselineNotFound(ValueError):
    """`algo.baseline` names no built-in, no registered plug-in and no import path."""


class BaselinePluginError(ValueError):
    """An estimator was found but could not be loaded: its module failed to import, or it holds no
    `BaselineEstimator`."""


def registered_baselines() -> dict[str, str]:
    """Every estimator `algo.baseline` can name, by name: the built-ins, then the installed plug-ins."""
    plugins = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**plugins, **BUILTIN_BASELINES}


@cache
def get_baseline(name: str) -> BaselineEstimator:
    target, origin = _target(name)
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a plug-in's import error, whatever it is, is reported in one line
        raise BaselinePluginError(
            f"baseline {name!r} ({origin}): importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    estimator = getattr(module, attribute, None) if attribute else None
    if callable(estimator) and not isinstance(estimator, BaselineEstimator):
        estimator = estimator()  # a factory returning the estimator
    if not isinstance(estimator, BaselineEstimator):
        found = "nothing" if estimator is None else type(estimator).__name__
        raise BaselinePluginError(
            f"baseline {name!r} ({origin}): {target} holds {found}, not a "
            "mappa.core.baselines.BaselineEstimator; point it at the module's estimator, as "
            "`package.module:BASELINE`"
        )
    return estimator


def _target(name: str) -> tuple[str, str]:
    """(`module:attribute`, where that came from, for messages)."""
    if name in BUILTIN_BASELINES:
        return BUILTIN_BASELINES[name], "built in"
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
        package = ep.dist.name if ep.dist is not None else "an installed package"
        return ep.value, f"registered by package {package} as {ep.value}"
    if ":" in name:
        return name, "an import path"
    known = ", ".join(sorted(registered_baselines()))
    raise BaselineNotFound(
        f"unknown baseline {name!r}: baselines are {known} (built in, or registered by installed packages "
        f"in the entry-point group {ENTRY_POINT_GROUP!r}), or an import path `package.module:BASELINE`; "
        "check the spelling, or install the package that provides it (pip install -e path/to/it)"
    )
