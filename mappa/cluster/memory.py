"""Handing memory that a process freed back to the OS, so that workers sharing one machine do not each
keep their peak."""

from __future__ import annotations

import ctypes
import sys


def release_freed_memory() -> None:
    """Hand memory that torch freed (activations of a training step, a received copy of weights) back to
    the OS.

    glibc keeps freed heap pages by default, so each worker would keep the peak of its last update, and on
    one machine the workers' peaks would add up (measured: 18 GB for three SmolLM2 agents without this).
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            return
