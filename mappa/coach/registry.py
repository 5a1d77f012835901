"""Finds a coach's `CoachSpec` by the config's `coach.type`: a built-in, a plug-in, or an import path.

    local, openai, rubric, outcome  the built-ins (`mappa.coach.local:COACH`, ...)
    <name>                          a coach an installed package registers in the entry-point group
                                    `mappa.coaches` (pyproject: `[project.entry-points."mappa.coaches"]
                                    judge = "my_team.judge:COACH"`)
    <package.module>:<NAME>         an import path to a `CoachSpec` (no registration; e.g. a module of your
                                    own on PYTHONPATH)

A spec is loaded the first time it is asked for and kept. A name that is none of these, or a plug-in that
fails to import or holds no `CoachSpec`, raises `CoachNotFound` / `CoachPluginError` with one line naming
the coach, the package and what failed. What a spec declares: `mappa.coach.spec`.

This module imports no coach: the config validates `coach.type` here without loading the coach stack.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from mappa.coach.spec import CoachSpec

ENTRY_POINT_GROUP = "mappa.coaches"
BUILTIN_COACHES = {
    "local": "mappa.coach.local:COACH",
    "openai": "mappa.coach.openai:COACH",
    "rubric": "mappa.coach.rubric:COACH",
    "outcome": "mappa.coach.outcome:COACH",
}


class CoachNotFound(ValueError):
    """`coach.type` names no built-in, no registered plug-in and no import path."""


class CoachPluginError(ValueError):
    """A coach was found but could not be loaded: its module failed to import, or it holds no `CoachSpec`."""


def registered_coaches() -> dict[str, str]:
    """Every coach `coach.type` can name, by name: the built-ins, then the installed plug-ins."""
    plugins = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return {**plugins, **BUILTIN_COACHES}


@cache
def get_coach_spec(coach_type: str) -> CoachSpec:
    target, origin = _target(coach_type)
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a plug-in's import error, whatever it is, is reported in one line
        raise CoachPluginError(
            f"coach {coach_type!r} ({origin}): importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    spec = getattr(module, attribute, None) if attribute else None
    if callable(spec) and not isinstance(spec, CoachSpec):
        spec = spec()  # a factory returning the spec
    if not isinstance(spec, CoachSpec):
        found = "nothing" if spec is None else type(spec).__name__
        raise CoachPluginError(
            f"coach {coach_type!r} ({origin}): {target} holds {found}, not a mappa.coach.spec.CoachSpec; "
            "point it at the module's CoachSpec, as `package.module:COACH`"
        )
    return spec


def _target(coach_type: str) -> tuple[str, str]:
    """(`module:attribute`, where that came from, for messages)."""
    if coach_type in BUILTIN_COACHES:
        return BUILTIN_COACHES[coach_type], "built in"
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=coach_type):
        package = ep.dist.name if ep.dist is not None else "an installed package"
        return ep.value, f"registered by package {package} as {ep.value}"
    if ":" in coach_type:
        return coach_type, "an import path"
    known = ", ".join(sorted(registered_coaches()))
    raise CoachNotFound(
        f"unknown coach type {coach_type!r}: coaches are {known} (built in, or registered by installed "
        f"packages in the entry-point group {ENTRY_POINT_GROUP!r}), or an import path "
        "`package.module:COACH`; check the spelling, or install the package that provides it "
        "(pip install -e path/to/it)"
    )
