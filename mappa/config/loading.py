"""Reading a config: YAML, then dotted `a.b=value` overrides, then validation whose every problem is one
line naming the field and the fix (`ConfigError`, worded by `mappa.config.errors`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from mappa.config.errors import format_validation_error
from mappa.config.origins import ORIGINS, Origins
from mappa.config.run import RunConfig
from mappa.config.section import ConfigError


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `a.b.c=value` overrides (value parsed as YAML) to a nested dict, returning a new dict."""
    data = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override `{item}` is not of the form key.path=value (e.g. algo.beta=0.02)")
        parts = key.strip().split(".")
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override `{item}`: `{part}` holds a value, not a section")
            node = child
        node[parts[-1]] = yaml.safe_load(raw)
    return data


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    """Read YAML, apply overrides, validate; every problem raises `ConfigError` naming the field and fix."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            where = "" if path.is_absolute() else f" (relative to {Path.cwd()}, where this process runs)"
            raise ConfigError(f"config file {path} does not exist{where}; see configs/ for ready ones")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(
                f"config file {path} must hold a mapping of sections, not {type(data).__name__}"
            )
    data = apply_overrides(data, overrides or [])
    return validate_config(data, str(path) if path else "config", overrides)


def validate_config(
    data: dict[str, Any], source: str = "config", overrides: list[str] | None = None
) -> RunConfig:
    """Validate a config's data: `source` (the file, or the stored run's config.yaml) with `overrides` (the
    `--set` items already applied to it), so that settings are reset or refused by where they came from
    (`mappa.config.origins`) and every error names it."""
    origins = Origins.of_overrides(source, overrides or [])
    try:
        return RunConfig.model_validate(data, context={ORIGINS: origins})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, origins, data)) from None


def override_config(config: RunConfig, overrides: list[str], source: str = "config") -> RunConfig:
    """`config` (read from `source`, e.g. a run's config.yaml) changed by `--set` overrides, validated."""
    data = apply_overrides(config.model_dump(mode="json"), overrides)
    return validate_config(data, source, overrides)


def dump_config(config: RunConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
