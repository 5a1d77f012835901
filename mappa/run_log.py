"""The log a `mappa train`, `resume` or `evaluate` command keeps of its run, and the one line it prints when
the run fails.

While the command runs, every log record (Prefect's flow and task lines, mappa's own, with their
tracebacks) also goes to a file under the run: `ROOT/RUN_ID/logs/<command>-<time>.log` for a local root;
for a remote root (s3://...) the file is written under `~/.cache/mappa/logs/RUN_ID/` and copied into the
run's `logs/` when the command ends (when the run stopped because that store does not answer, the last
line names the file on this machine instead, and the copy is tried once, quietly: `RunLog.place`). The
terminal keeps the progress lines but no traceback, none of Prefect's lines about a failure (each
repeats the error) and none of its event and log services' complaints while its API is away; the command
ends with one line naming the error, the stage it stopped in, the log file and the command that continues
the run (`mappa.cli.commands.failed`).
`--debug` hides nothing: the tracebacks print and the error is raised.

Not covered: runs started from the Prefect UI (`mappa serve`): their logs, tracebacks included, are in the
flow run's page, as Prefect shows them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mappa.storage.run import TIME_FORMAT
from mappa.storage.store import ArtifactStore

LOG_FORMAT = "%(asctime)s | %(levelname)-7s | %(name)s - %(message)s"
PREFECT_SERVICES = ("prefect.events", "prefect._internal")  # events and log shipping: never stop a run
LOCAL_CACHE = Path.home() / ".cache" / "mappa" / "logs"


@dataclass(frozen=True)
class RunLog:
    path: Path
    """The log file on this machine."""
    url: str
    """Where the log is kept with the run (the same as `path` for a local root)."""
    started: str
    """When the command started, as the run's events write times (`TIME_FORMAT`)."""
    store: ArtifactStore
    """The run's store, where the log is copied to (a remote root's, when the command ends)."""

    def place(self) -> str:
        """Where a user finds the log once the command ended: under the run, or the file on this machine
        when the run's store is out of reach (this process gave up on it: the copy will fail)."""
        return str(self.path) if self.store.given_up() else self.url


class _TerminalFilter(logging.Filter):
    """What the terminal shows of the log: every line without its traceback, none of Prefect's lines about
    the failure itself (the command ends with its own line about it) and none of its event and log
    services' complaints while its API is away (the flow says that once, `mappa.flows.prefect_outage`);
    the file has them all."""

    def filter(self, record: logging.LogRecord) -> bool:
        engine = record.name in ("prefect.flow_runs", "prefect.task_runs")
        message = record.getMessage()
        if engine and (record.levelno >= logging.ERROR or message.startswith("Finished in state Failed")):
            return False
        if record.name.startswith(PREFECT_SERVICES):
            return False
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


def _terminal_handlers(logger: logging.Logger) -> list[logging.Handler]:
    """The handlers of `logger` that write to a terminal: its stream handlers (Prefect's console)."""
    return [
        handler
        for handler in logger.handlers
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
    ]


@contextmanager
def run_log(root: str, run_id: str, command: str, debug: bool = False) -> Iterator[RunLog]:
    """Keep the command's log under the run while the block runs (see the module docstring)."""
    import prefect.logging.configuration  # noqa: F401 - Prefect sets up its handlers on import

    store = ArtifactStore(root)
    now = time.gmtime()
    name = f"{command}-{time.strftime('%Y%m%d-%H%M%S', now)}.log"
    if store.is_local:
        path = Path(store.path(run_id, "logs", name))
    else:
        path = LOCAL_CACHE / run_id / name
    path.parent.mkdir(parents=True, exist_ok=True)
    log = RunLog(path, store.url(run_id, "logs", name), time.strftime(TIME_FORMAT, now), store)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root_logger = logging.getLogger()
    internal = logging.getLogger("prefect._internal")  # its own console handler; it does not propagate
    for logger in (root_logger, internal):
        logger.handlers.insert(0, handler)  # before the terminal's handlers strip the traceback
    hide = _TerminalFilter()
    terminals = [] if debug else _terminal_handlers(root_logger) + _terminal_handlers(internal)
    for terminal in terminals:
        terminal.addFilter(hide)
    # Prefect's log shipping writes "--- Error logging to API ---" to stderr for each batch it cannot send
    # unless logging.raiseExceptions is off (the lines themselves are in the file)
    raise_exceptions, logging.raiseExceptions = logging.raiseExceptions, debug
    try:
        yield log
    finally:
        logging.raiseExceptions = raise_exceptions
        for terminal in terminals:
            terminal.removeFilter(hide)
        for logger in (root_logger, internal):
            logger.removeHandler(handler)
        handler.close()
        if not store.is_local:
            named_here = store.given_up()  # the command's last line named the file on this machine
            try:
                store.write_bytes(path.read_bytes(), run_id, "logs", name)
            except Exception:  # noqa: BLE001 - the local file stays; the run's error matters more
                if not named_here:
                    logging.getLogger("mappa").warning(
                        "could not copy the log to %s; it is at %s", log.url, path
                    )
