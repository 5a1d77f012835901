"""The `mappa` command: train | resume | retry | inspect | runs | evaluate | rescore | serve | models.

`mappa train CONFIG --set k=v --run-id ID` validates the config before anything starts, runs the Prefect
flow in this process (against PREFECT_API_URL when set, else Prefect's embedded server; Ray workers never
talk to Prefect, so no per-worker servers start), streams one line per stage and ends with a table per
agent (mean coach score, KL, loss) and per iteration (success rate, stage times). With `--dry-run` it
stops after the pre-flight, having printed the resolved config and the verdict.

The package: `parser` (the arguments), `commands` (what each command does; `inspect_run`: inspect and runs),
`dry_run` (the config a train runs with, and the dry run), `render` (tables and text on the console); the
checks before a run are `mappa.preflight`'s. This module holds `main`: the one place that turns a bad
input into one `error:` line and exit code 2.
"""

from __future__ import annotations

import os

from mappa.config import ConfigError
from mappa.resources import ResourceError
from mappa.sandbox import SandboxUnavailableError


def _prefect_defaults() -> None:
    """Offline-friendly Prefect settings; must run before prefect is imported."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


from mappa.cli.parser import build_parser  # noqa: E402  (after the defaults' definition; imports no Prefect)
from mappa.cli.render import console  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    _prefect_defaults()
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, FileNotFoundError, ValueError, SandboxUnavailableError, ResourceError) as exc:
        console.print(f"[bold red]error:[/bold red] {exc}")
        return 2
