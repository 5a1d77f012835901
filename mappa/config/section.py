"""The base of every config section and the error a config that cannot run raises."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigError(ValueError):
    """A config that cannot run; the message names the field or file and the fix."""


class Section(BaseModel):
    """A config section: unknown fields are errors, and it never changes once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)
