"""Notice a Ctrl-C even when a library swallows the KeyboardInterrupt it raised.

Python raises KeyboardInterrupt wherever the main thread happens to be when SIGINT arrives. When that is
inside pydantic's serializer (Prefect serializes task results through it), pydantic turns it into
`PydanticSerializationError: Error calling function ...: KeyboardInterrupt`, and the command would report a
failure with exit code 1 instead of an interrupt with 130. `watching_ctrl_c` wraps the SIGINT handler for
the block, so the command can tell that the error it caught came from the user's Ctrl-C.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class CtrlC:
    pressed: bool = False


@contextmanager
def watching_ctrl_c() -> Iterator[CtrlC]:
    """Within the block, SIGINT still does what the handler before it did (normally: raise
    KeyboardInterrupt), and `pressed` records that it came. Off the main thread, where handlers cannot be
    set, `pressed` stays False."""
    seen = CtrlC()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    before = signal.getsignal(signal.SIGINT)

    def note_then_pass_on(signum, frame):
        seen.pressed = True
        if callable(before):
            return before(signum, frame)
        if before == signal.SIG_DFL:
            raise KeyboardInterrupt
        return None  # SIG_IGN: ignored as before

    signal.signal(signal.SIGINT, note_then_pass_on)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, before)
