"""A TCP proxy on loopback that a test cuts at a chosen request and brings back: the endpoint of a server
that goes away mid-request and returns with its data.

moto's S3 server keeps its objects in memory (moto 5.2 has no persistence for S3), so stopping it loses
the bucket, which no real outage does to acknowledged writes. The proxy stands in front of it instead:
`cut_at(pattern)` waits for a client to send `pattern` (an HTTP request line, say), forwards up to
`forward_bytes` of that connection (part of a body: the server sees a request cut short), then resets
every connection and closes its port, so new connections are refused, as with a server that died; `restore()`
listens on the same port again. The server behind it stays real: every request that gets through is
answered by it.

Not covered: a server that hangs (accepts and never answers) or answers 503: only refusals and resets.
"""

from __future__ import annotations

import socket
import struct
import threading
import time


class CutProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.port = 0
        self.cut = threading.Event()
        self.cut_at_time = 0.0
        self._pattern: bytes | None = None
        self._forward_bytes = 0
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.restore()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        """Listen (again, on the same port) and forward new connections to the server."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self.cut.clear()
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut_at(self, pattern: bytes, forward_bytes: int = 0) -> None:
        """Go down when a client sends `pattern`, after forwarding `forward_bytes` of that connection."""
        with self._lock:
            self._pattern, self._forward_bytes = pattern, forward_bytes

    def close(self) -> None:
        self._go_down()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed: the proxy is down
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # went down meanwhile
                    client.close()
                    server.close()
                    return
                self._connections |= {client, server}
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        tail = b""
        left: int | None = None  # bytes still to forward before the cut, once the pattern was seen
        try:
            while chunk := source.recv(65536):
                if from_client and left is None:
                    with self._lock:
                        pattern, forward = self._pattern, self._forward_bytes
                    if pattern is not None and pattern in tail + chunk:
                        with self._lock:
                            self._pattern = None
                        left = forward
                    tail = chunk[-256:]
                if left is not None:
                    target.sendall(chunk[:left])
                    left -= min(left, len(chunk))
                    if left == 0:
                        self._go_down()
                        return
                    continue
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for end in (source, target):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _go_down(self) -> None:
        """Close the port and reset every connection (RST, not FIN: as a killed server's kernel does)."""
        with self._lock:
            listener, self._listener = self._listener, None
            connections, self._connections = self._connections, set()
        if listener is not None:
            listener.close()
        for connection in connections:
            try:
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                connection.shutdown(socket.SHUT_RDWR)  # wakes the pumps blocked in recv
                connection.close()
            except OSError:
                pass
        if listener is not None:
            self.cut_at_time = time.monotonic()
            self.cut.set()
