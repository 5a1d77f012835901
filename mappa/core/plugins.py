"""Finding a plug-in by the name a config gives it: a built-in, an installed package's entry point, or an
import path. Written once for the three settings that name plug-ins:

    setting         what it names           entry-point group   registry
    env.type        an `EnvSpec`            mappa.envs          `mappa.envs.registry`
    coach.type      a `CoachSpec`           mappa.coaches       `mappa.config.coach_registry`
    algo.baseline   a `BaselineEstimator`   mappa.baselines     `mappa.core.baseline_registry`

Each registry describes its kind once (`PluginKind`: the group, its built-ins, the type a plug-in must
hold, the words of its messages) and asks `load_plugin` for a name, which it looks up in this order:

    <built-in name>                 the kind's own table (`PluginKind.builtins`; envs have none: mappa
                                    registers its own as an installed package does)
    <name>                          an entry point an installed package registers in the kind's group
                                    (pyproject: `[project.entry-points."mappa.envs"]
                                    debate = "my_team.env:SPEC"`)
    <package.module>:<NAME>         an import path (no registration; e.g. a module of your own on PYTHONPATH)

The attribute found is the plug-in, or a factory returning it. A name that is none of these raises the
kind's `not_found` error; a module that fails to import, or an attribute that holds something else, its
`plugin_error`; each is one line naming the plug-in, where it came from and what failed. Loading is not
cached here: each registry keeps what it loaded (`functools.cache` on its getter). Standard library only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any


@dataclass(frozen=True)
class PluginKind:
    """One setting's plug-ins: where they are found, what they must be, and the words of the errors about
    them (`env 'debate' (...)`, `unknown env type 'debat': envs are ...`)."""

    label: str
    """Names one plug-in in messages: `env`, `coach`, `baseline`."""
    group: str
    """The entry-point group installed packages register them in."""
    holds: type
    """What the attribute found must be (or a factory must return)."""
    attribute: str
    """The attribute an import path usually names (`package.module:SPEC`)."""
    not_found: type[ValueError]
    """Raised for a name that is no built-in, no entry point and no import path."""
    plugin_error: type[ValueError]
    """Raised for a plug-in found but not loaded: its module failed to import, or it holds something else."""
    builtins: Mapping[str, str] = field(default_factory=dict)
    """Built-in names and their `module:attribute`; looked up before the entry points."""
    setting: str = ""
    """Names the setting in an unknown name's message (default `<label> type`: `unknown env type 'debat'`)."""
    plural: str = ""
    """Names them all (default `<label>s`: `envs are mathchat, dsbench (...)`)."""
    holds_noun: str = ""
    """`point it at the module's <noun>` (default: the name of `holds`)."""
    unknown_hint: Callable[[str], str | None] | None = None
    """(an unknown name) -> a message that says more than the plain one, or None (envs: mappa's own entry
    points are missing)."""

    def __post_init__(self) -> None:
        defaults = {
            "setting": f"{self.label} type",
            "plural": f"{self.label}s",
            "holds_noun": self.holds.__name__,
        }
        for name, value in defaults.items():
            if not getattr(self, name):
                object.__setattr__(self, name, value)


def provider(group: str, name: str) -> str | None:
    """The distribution that registers `name` in `group`, or None where none does."""
    for ep in entry_points(group=group, name=name):
        return _distribution(ep)
    return None


def registered_plugins(kind: PluginKind) -> dict[str, str]:
    """Every name the setting can give, with its `module:attribute`: the installed plug-ins, then the
    built-ins (a built-in keeps its name)."""
    plugins = {ep.name: ep.value for ep in entry_points(group=kind.group)}
    return {**plugins, **kind.builtins}


def load_plugin(kind: PluginKind, name: str) -> Any:
    """The plug-in `name` names: found, imported, and checked to be a `kind.holds`."""
    target, origin = _target(kind, name)
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a plug-in's import error, whatever it is, is reported in one line
        raise kind.plugin_error(
            f"{kind.label} {name!r} ({origin}): importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    plugin = getattr(module, attribute, None) if attribute else None
    if callable(plugin) and not isinstance(plugin, kind.holds):
        plugin = plugin()  # a factory returning the plug-in
    if not isinstance(plugin, kind.holds):
        found = "nothing" if plugin is None else type(plugin).__name__
        holds_name = f"{kind.holds.__module__}.{kind.holds.__qualname__}"
        raise kind.plugin_error(
            f"{kind.label} {name!r} ({origin}): {target} holds {found}, not a {holds_name}; point it at "
            f"the module's {kind.holds_noun}, as `package.module:{kind.attribute}`"
        )
    return plugin


def _target(kind: PluginKind, name: str) -> tuple[str, str]:
    """(`module:attribute`, where that came from, for messages)."""
    if name in kind.builtins:
        return kind.builtins[name], "built in"
    for ep in entry_points(group=kind.group, name=name):
        return ep.value, f"registered by package {_distribution(ep)} as {ep.value}"
    if ":" in name:
        return name, "an import path"
    hint = kind.unknown_hint(name) if kind.unknown_hint is not None else None
    if hint is not None:
        raise kind.not_found(hint)
    known = ", ".join(sorted(registered_plugins(kind)))
    built_in = "built in, or " if kind.builtins else ""
    raise kind.not_found(
        f"unknown {kind.setting} {name!r}: {kind.plural} are {known} ({built_in}registered by installed "
        f"packages in the entry-point group {kind.group!r}), or an import path "
        f"`package.module:{kind.attribute}`; check the spelling, or install the package that provides it "
        "(pip install -e path/to/it)"
    )


def _distribution(ep: EntryPoint) -> str:
    return ep.dist.name if ep.dist is not None else "an installed package"
