"""How a config's validation errors read: one line per problem, naming the dotted field, where it was
written (`--set`, or the file for a field nobody knows), what is wrong (pydantic's "Value error, " prefix
left out) and the fix: for a misspelt key, the closest valid name of its section ("did you mean ...").

Not covered: the checks made after validation (data files, models, sandbox: `mappa.preflight`).
"""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from mappa.config.origins import Origins
from mappa.config.run import RunConfig

PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")


def format_validation_error(
    exc: ValidationError, origins: Origins | str, data: dict[str, Any] | None = None
) -> str:
    """The message of a `ConfigError`: a heading naming the source, then one line per problem."""
    if isinstance(origins, str):
        origins = Origins(origins)
    lines = [f"{origins.source} is not valid ({exc.error_count()} problem(s)):"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        written = err["loc"] and err["type"] != "extra_forbidden" and origins.set_by_user(field)
        where = " (written with --set)" if written else ""  # (an unknown field's hint says where)
        lines.append(f"  - {field}: {_message(err)}{where}{_hint(err, origins, data or {})}")
    return "\n".join(lines)


def _message(err: dict[str, Any]) -> str:
    message = err["msg"]
    for prefix in PYDANTIC_PREFIXES:
        message = message.removeprefix(prefix)
    return message


def _hint(err: dict[str, Any], origins: Origins, data: dict[str, Any]) -> str:
    kind = err["type"]
    name = str(err["loc"][-1]).lower() if err["loc"] else ""
    if kind == "extra_forbidden" and any(word in name for word in ("key", "secret", "token", "password")):
        return (
            " (secrets are never read from a config: put the value in an environment variable; the coach's "
            "key in the one that coach.api_key_env names, S3 credentials in AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY)"
        )
    if kind == "extra_forbidden":
        return _unknown_field_hint(err["loc"], origins, data)
    if kind == "missing":
        return " (add this field)"
    if kind.startswith(("greater", "less")):
        return f" (got {err.get('input')!r}; change it with --set)"
    if kind in {"literal_error", "union_tag_invalid"}:
        return f" (got {err.get('input')!r})"
    return ""


def _unknown_field_hint(loc: tuple[Any, ...], origins: Origins, data: dict[str, Any]) -> str:
    """` (unknown field, from FILE; did you mean `algo.beta`?)`, or where to look when nothing is close."""
    dotted = ".".join(str(p) for p in loc)
    where = f"unknown field, from {origins.of(dotted)}"
    names = _section_fields(loc[:-1], data)
    close = difflib.get_close_matches(str(loc[-1]), names or [], n=1, cutoff=0.6)
    if close:
        suggestion = ".".join([*(str(p) for p in loc[:-1]), close[0]])
        return f" ({where}; did you mean `{suggestion}`?)"
    if loc[:1] == ("env",):
        return f" ({where}: check its spelling against the env's section, its EnvSpec.config)"
    if names:
        return f" ({where}; the valid ones here: {', '.join(names)})"
    return f" ({where}: check its spelling against `mappa.config` or the configs/ examples)"


def _section_fields(path: tuple[Any, ...], data: dict[str, Any]) -> list[str] | None:
    """The field names of the section at `path` (e.g. ("agents", "solver")), None where it is unknown."""
    model: type[BaseModel] = RunConfig
    parts = list(path)
    while parts:
        part = str(parts.pop(0))
        if model is RunConfig and part == "env":
            model = _env_section_model(data)
            if model is None:
                return None
            continue
        field = model.model_fields.get(part)
        inner, containers = _section_model(field.annotation) if field else (None, 0)
        if inner is None:
            return None
        model = inner
        del parts[:containers]  # a dict's key or a list's index
    return list(model.model_fields)


def _section_model(annotation: Any) -> tuple[type[BaseModel] | None, int]:
    """The model a field holds and how many dicts or lists it is inside: dict[str, AgentConfig] ->
    (AgentConfig, 1); CoachConfig | None -> (CoachConfig, 0)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, 0
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (dict, list) and args:
        inner, depth = _section_model(args[-1])
        return inner, depth + 1
    for arg in args:  # a union, or an annotated type
        inner, depth = _section_model(arg)
        if inner is not None:
            return inner, depth
    return None, 0


def _env_section_model(data: dict[str, Any]) -> type[BaseModel] | None:
    from mappa.envs.registry import DEFAULT_ENV, get_env_spec

    env = data.get("env")
    env_type = env.get("type", DEFAULT_ENV) if isinstance(env, dict) else DEFAULT_ENV
    try:
        return get_env_spec(env_type).config
    except ValueError:
        return None
