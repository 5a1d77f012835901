"""Bounded capture of a child's stdout and stderr, and of its exit.

The child may print gigabytes; the parent keeps only the first and the last part of the text (the head
often holds the program's results, the tail its traceback) and states in the text how much it dropped.
Memory use is bounded by the limit plus one read chunk, whatever the child writes.

`CaptureProtocol` is an asyncio subprocess protocol rather than `asyncio.create_subprocess_exec` streams:
there `Process.wait()` returns only once the pipes are closed, so a grandchild that left the process group
while holding stdout would keep the parent waiting past the timeout; here the exit is seen at once.
"""

from __future__ import annotations

import asyncio
import codecs
from collections import deque


class OutputCapture:
    """Keeps the head and tail of a byte stream, decoded as UTF-8 with invalid bytes replaced."""

    def __init__(self, max_chars: int) -> None:
        if max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, got {max_chars}")
        self._max_chars = max_chars
        self._head_size = (max_chars + 1) // 2
        self._tail_size = max_chars // 2
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self._finished = False
        self.total_bytes = 0
        self.total_chars = 0

    def feed(self, data: bytes) -> None:
        """Adds one chunk of raw output."""
        self.total_bytes += len(data)
        self._add(self._decoder.decode(data))

    def text(self) -> str:
        """The captured text; when output was dropped, a line in the middle says how many characters."""
        if not self._finished:
            self._add(self._decoder.decode(b"", final=True))
            self._finished = True
        head = "".join(self._head)
        tail = "".join(self._tail)
        if self.total_chars <= self._max_chars:
            return head + tail
        kept_tail = tail[len(tail) - self._tail_size :]
        trimmed = self.total_chars - len(head) - len(kept_tail)
        return f"{head}\n[... trimmed {trimmed} chars ...]\n{kept_tail}"

    def _add(self, text: str) -> None:
        self.total_chars += len(text)
        room = self._head_size - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += min(room, len(text))
            text = text[room:]
        if not text:
            return
        self._tail.append(text)
        self._tail_len += len(text)
        # Drop whole chunks from the left while what remains still covers the tail we must keep.
        while self._tail and self._tail_len - len(self._tail[0]) >= self._tail_size:
            self._tail_len -= len(self._tail.popleft())


class CaptureProtocol(asyncio.SubprocessProtocol):
    """Feeds the child's stdout (fd 1) and stderr (fd 2) into captures and signals its exit.

    `flooded` is set once either stream passes `flood_bytes`; the caller decides what to do about it.
    """

    def __init__(self, max_chars: int, flood_bytes: int) -> None:
        self.stdout = OutputCapture(max_chars)
        self.stderr = OutputCapture(max_chars)
        self.exited = asyncio.Event()
        self.flooded = asyncio.Event()
        self.pipes_closed = asyncio.Event()
        self._flood_bytes = flood_bytes
        self._open_pipes = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        capture = self.stdout if fd == 1 else self.stderr
        capture.feed(data.encode() if isinstance(data, str) else data)
        if capture.total_bytes > self._flood_bytes:
            self.flooded.set()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open_pipes.discard(fd)
        if not self._open_pipes:
            self.pipes_closed.set()

    def process_exited(self) -> None:
        self.exited.set()
