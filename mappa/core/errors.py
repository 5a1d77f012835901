"""One line for an exception, for the CLI and the run's events: the message a user acts on, without the
traceback (which goes to the run's log file)."""

from __future__ import annotations


def error_line(exc: BaseException) -> str:
    """The error's first line of message, prefixed by its type unless it is one of mappa's own errors or a
    ValueError/FileNotFoundError (whose messages name the thing and the fix). A Ray worker's error is
    unwrapped to the worker's own exception (`RayTaskError.cause`)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    message = lines[0] if lines else ""
    plain = type(exc).__module__.startswith("mappa.") or isinstance(exc, ValueError | FileNotFoundError)
    if not message:
        return type(exc).__name__
    return message if plain else f"{type(exc).__name__}: {message}"


def worth_retrying(exc: BaseException) -> bool:
    """Whether a stage retry could help: not for an error that says it already waited out its own budget
    (`waited_out = True`, e.g. a coach endpoint down for longer than coach.outage_budget_s), where a retry
    would only wait as long again."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    return not getattr(exc, "waited_out", False)
