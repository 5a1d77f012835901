"""Sandbox for model-written Python code: a limited child process, inside bubblewrap where available.

See `mappa.sandbox.runner` for what it protects against and what it does not.
"""

from mappa.sandbox.runner import (
    DEFAULT_LIMITS,
    SandboxLimits,
    SandboxUnavailableError,
    bwrap_available,
    check_isolation,
    run_programs_async,
    run_python,
    run_python_async,
)

__all__ = [
    "DEFAULT_LIMITS",
    "SandboxLimits",
    "SandboxUnavailableError",
    "bwrap_available",
    "check_isolation",
    "run_programs_async",
    "run_python",
    "run_python_async",
]
