"""Reading a config: YAML, then dotted `a.b=value` overrides, then validation whose every problem is one
line naming the field and the fix (`ConfigError`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

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
    return validate_config(data, source=str(path) if path else "config")


def validate_config(data: dict[str, Any], source: str = "config") -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def format_validation_error(exc: ValidationError, source: str) -> str:
    lines = [f"{source} is not valid ({exc.error_count()} problem(s)):"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        hint = _hint(err)
        lines.append(f"  - {field}: {err['msg']}{hint}")
    return "\n".join(lines)


def _hint(err: dict[str, Any]) -> str:
    kind = err["type"]
    name = str(err["loc"][-1]).lower() if err["loc"] else ""
    if kind == "extra_forbidden" and any(word in name for word in ("key", "secret", "token", "password")):
        return (
            " (secrets are never read from a config: put the value in an environment variable; the coach's "
            "key in the one that coach.api_key_env names, S3 credentials in AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY)"
        )
    if kind == "extra_forbidden" and err["loc"][:1] == ("env",):
        return " (unknown field: check its spelling against the env's section, its EnvSpec.config)"
    if kind == "extra_forbidden":
        return " (unknown field: check its spelling against `mappa.config` or the configs/ examples)"
    if kind == "missing":
        return " (add this field)"
    if kind.startswith(("greater", "less")):
        return f" (got {err.get('input')!r}; change it with --set)"
    if kind in {"literal_error", "union_tag_invalid"}:
        return f" (got {err.get('input')!r})"
    return ""


def dump_config(config: RunConfig) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
