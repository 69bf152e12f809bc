"""Scripted HTTP servers on 127.0.0.1 threads (real sockets, misbehaving on purpose), and
ports that refuse or never answer a connection."""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import threading
from collections.abc import Callable, Iterator

from tritonhttp.testing._process import free_port as closed_port

__all__ = [
    "OK_JSON",
    "Handler",
    "ScriptedServer",
    "answer_ok",
    "closed_port",
    "full_backlog_port",
    "read_request",
    "serving",
]

Handler = Callable[[socket.socket, int, bytes], bool]  # -> keep the connection open?

OK_JSON = b'HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{"name":"ok"}'


def read_request(conn: socket.socket, buf: bytearray) -> bytes | None:
    """One whole request from ``conn`` (None when the client closed)."""
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, _, _ = bytes(buf).partition(b"\r\n\r\n")
    match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    total = len(head) + 4 + (int(match.group(1)) if match else 0)
    while len(buf) < total:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    request = bytes(buf[:total])
    del buf[:total]
    return request


class ScriptedServer:
    """Calls ``handler(conn, index_on_connection, request)`` for every request."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(32)
        self.port = self.sock.getsockname()[1]
        self.url = f"127.0.0.1:{self.port}"
        self.connections = 0
        self.requests: list[bytes] = []
        self.open: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
        except (OSError, ssl.SSLError):
            conn.close()
            return
        self.open.append(conn)
        buf = bytearray()
        index = 0
        with conn:
            while True:
                try:
                    request = read_request(conn, buf)
                except OSError:
                    return
                if request is None:
                    return
                self.requests.append(request)
                try:
                    if not self.handler(conn, index, request):
                        return
                except OSError:
                    return
                index += 1

    def take(self) -> list[bytes]:
        """The requests received since the last call (a request is recorded before the
        handler answers it)."""
        taken, self.requests = self.requests, []
        return taken

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self.sock.close()
        for conn in self.open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for t in self.threads:
            t.join(5)


@contextlib.contextmanager
def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> Iterator[ScriptedServer]:
    server = ScriptedServer(handler, tls)
    try:
        yield server
    finally:
        server.close()


def answer_ok(conn: socket.socket, index: int, request: bytes) -> bool:
    conn.sendall(OK_JSON)
    return True


@contextlib.contextmanager
def full_backlog_port() -> Iterator[int]:
    """A port whose listener's backlog is full: most kernels drop further SYNs, so a
    connect() to it hangs."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(8):
                s = socket.socket()
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    s.connect(("127.0.0.1", port))
                fillers.append(s)
            yield port
        finally:
            for s in fillers:
                s.close()
