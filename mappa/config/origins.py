"""Where each setting of a config came from: the config file (or a stored run's config.yaml) or a `--set`
override on the command line.

Validation reads it (as pydantic's validation context, `ORIGINS`) for two things: a coach setting that
only another coach type can use is reset when it came from the file but is an error when the user wrote it
with `--set` (`mappa.config.coach`), and an error names where the setting at fault was written, so the
fix goes there. Not covered: which YAML line a setting is on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ORIGINS = "origins"
"""The key of the `Origins` in pydantic's validation context."""
SET = "--set"


@dataclass(frozen=True)
class Origins:
    """`source`: the file (or what else) the base config came from; `set_keys`: the dotted keys that
    `--set` overrides wrote (`coach` when a whole section was set)."""

    source: str = "config"
    set_keys: frozenset[str] = frozenset()

    @classmethod
    def of_overrides(cls, source: str, overrides: Iterable[str]) -> Origins:
        keys = {item.partition("=")[0].strip() for item in overrides if "=" in item}
        return cls(source, frozenset(key for key in keys if key))

    def set_by_user(self, key: str) -> bool:
        """Whether `--set` wrote the dotted `key`, itself or a section that holds it."""
        parts = key.split(".")
        return any(".".join(parts[: i + 1]) in self.set_keys for i in range(len(parts)))

    def of(self, key: str) -> str:
        """Where the dotted `key` was written: `--set`, or the source."""
        return SET if self.set_by_user(key) else self.source

    def fix(self, key: str, value: Any, beside: str | None = None) -> str:
        """How to write `key: value` where the user works on it: with `--set` when `key` (or, for a setting
        that is missing, the setting `beside` that needs it) came from `--set`, else in the file."""
        if self.set_by_user(beside or key) or self.source == "config":
            return f"--set {key}={value}"
        return f"{key}: {value} in {self.source} (or --set {key}={value})"


def origins_in(context: Any) -> Origins | None:
    """The `Origins` in a validation context, None when the config was built in code (no file, no --set)."""
    return context.get(ORIGINS) if isinstance(context, dict) else None
