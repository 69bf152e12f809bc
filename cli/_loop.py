"""``bench --mode loop``: one thread driving N keep-alive connections with ``selectors``.

The request body is encoded once by tritonhttp (``generate_request_body``, the public
API for sending requests with another HTTP stack) and written as is on every request;
responses are framed by ``httptools`` and only their status is checked (the error text
of a failed one is decoded). With no thread switching and no per-request encoding, the
client costs little CPU, so what is measured is the server -- like perf_analyzer or wrk.
"""

from __future__ import annotations

import collections
import json
import selectors
import socket
import ssl
import threading
import time
from urllib.parse import quote, urlsplit

import httptools

from ._settings import Settings

__all__ = ["LoopDriver", "build_request"]

_CLOSED = "the server closed the connection"
_RECEIVE = 262144  # bytes per receive, into one buffer reused for every response


def build_request(
    settings: Settings, model: str, version: str, body: bytes, json_size: int | None
) -> bytes:
    """The whole HTTP request (head + body) for one inference."""
    parts = urlsplit(settings.base_url)
    path = f"{parts.path.rstrip('/')}/v2/models/{quote(model)}"
    if version:
        path += f"/versions/{quote(version)}"
    lines = [
        f"POST {path}/infer HTTP/1.1",
        f"Host: {parts.netloc}",
        f"Content-Length: {len(body)}",
    ]
    if json_size is not None:
        lines.append(f"Inference-Header-Content-Length: {json_size}")
    else:
        lines.append("Content-Type: application/json")
    lines += [f"{k}: {v}" for k, v in settings.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _Connection:
    """One keep-alive connection with at most one request in flight."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.parser = httptools.HttpResponseParser(self)
        self.outgoing: memoryview | None = None
        self.waiting = False  # registered for readiness to write (a send did not finish)
        self.started = 0.0  # start (or scheduled) time of the request in flight
        self.busy = False
        self.complete = False
        self.keep_alive = True
        self.error_body: list[bytes] | None = None

    # httptools callbacks
    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()
        self.error_body = None if status == 200 else [f"HTTP {status}: ".encode()]

    def on_body(self, body: bytes) -> None:
        if self.error_body is not None:
            self.error_body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True

    def error_text(self) -> str | None:
        if self.error_body is None:
            return None
        head, *rest = self.error_body
        raw = b"".join(rest)
        try:
            message = str(json.loads(raw)["error"])
        except (ValueError, KeyError, TypeError):
            message = raw.decode("utf-8", errors="replace").strip()
        return head.decode() + " ".join(message.split())


class LoopDriver:
    """Sends ``request`` over up to ``connections`` sockets from the calling thread."""

    def __init__(self, settings: Settings, request: bytes, connections: int) -> None:
        self._settings = settings
        self._request = request
        self._limit = connections
        parts = urlsplit(settings.base_url)
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._tls = settings.ssl_context() if parts.scheme == "https" else None
        self._selector = selectors.DefaultSelector()
        self._idle: list[_Connection] = []
        self._all: list[_Connection] = []
        self._scratch = bytearray(_RECEIVE)
        self._view = memoryview(self._scratch)

    # -- connections -------------------------------------------------------------------

    def _open(self) -> _Connection:
        sock = socket.create_connection((self._host, self._port), self._settings.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls is not None:
            sock = self._tls.wrap_socket(sock, server_hostname=self._host)
        sock.setblocking(False)
        connection = _Connection(sock)
        self._selector.register(sock, selectors.EVENT_READ, connection)
        self._all.append(connection)
        return connection

    def _drop(self, connection: _Connection) -> None:
        self._selector.unregister(connection.sock)
        connection.sock.close()
        self._all.remove(connection)
        if connection in self._idle:
            self._idle.remove(connection)

    def close(self) -> None:
        """Close every connection."""
        for connection in list(self._all):
            self._drop(connection)
        self._selector.close()

    def _send(self, connection: _Connection, started: float) -> None:
        connection.started = started
        connection.busy = True
        connection.complete = False
        connection.outgoing = memoryview(self._request)
        self._flush(connection)

    def _flush(self, connection: _Connection) -> None:
        view = connection.outgoing
        while view is not None and len(view):
            try:
                sent = connection.sock.send(view)
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                if not connection.waiting:
                    self._selector.modify(
                        connection.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, connection
                    )
                    connection.waiting = True
                connection.outgoing = view
                return
            view = view[sent:]
        connection.outgoing = None
        if connection.waiting:  # sent at last: readiness to write no longer matters
            self._selector.modify(connection.sock, selectors.EVENT_READ, connection)
            connection.waiting = False

    def _receive(self, connection: _Connection) -> bool | str:
        """Read what is there: True when the response is complete, an error text when
        the connection failed, False when more is to come."""
        scratch, view = self._scratch, self._view
        while True:
            try:
                n = connection.sock.recv_into(scratch)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return False
            except OSError as e:
                return f"connection error: {e.strerror or e}"
            if not n:
                return _CLOSED
            try:
                connection.parser.feed_data(view[:n])
            except httptools.HttpParserError as e:
                return f"bad HTTP response: {e}"
            if connection.complete:
                return True
            pending = isinstance(connection.sock, ssl.SSLSocket) and connection.sock.pending()
            if not pending and n < _RECEIVE:
                return False

    # -- driving -----------------------------------------------------------------------

    def run(
        self,
        stop: threading.Event,
        records: list[tuple[float, float, str | None]],
        rate: float | None = None,
        t0: float = 0.0,
    ) -> None:
        """Closed loop (``rate`` None: every connection always busy) or open loop (one
        request per ``1/rate`` s from ``t0``, latency counted from that time); runs until
        ``stop`` is set, then lets the requests in flight finish."""
        clock = time.perf_counter
        timeout = self._settings.timeout
        backlog: collections.deque[float] = collections.deque()
        slot = 0
        last_scan = clock()
        try:
            if rate is None:
                for _ in range(self._limit):
                    self._send(self._open(), clock())
            while True:
                now = clock()
                stopping = stop.is_set()
                if rate is not None and not stopping:
                    waited = len(backlog)  # these found every connection busy
                    while t0 + slot / rate <= now:
                        backlog.append(t0 + slot / rate)
                        slot += 1
                    while backlog and (self._idle or len(self._all) < self._limit):
                        connection = self._idle.pop() if self._idle else self._open()
                        scheduled = backlog.popleft()
                        # A request that waited for a connection counts from its scheduled
                        # time; one sent on time counts from now (selectors' timeouts have
                        # millisecond granularity, which is not the server's latency).
                        self._send(connection, scheduled if waited > 0 else clock())
                        waited -= 1
                if now - last_scan > 0.05:
                    last_scan = now
                    if stopping and not any(c.busy for c in self._all):
                        return
                    for c in [c for c in self._all if c.busy and now - c.started > timeout]:
                        # A request that never ends is an error, not a hang.
                        records.append((c.started, now, f"no response in {timeout:g} s"))
                        self._drop(c)
                        if rate is None and not stopping:
                            self._send(self._open(), clock())
                wait = 0.05
                if rate is not None and not stopping:
                    wait = max(0.0, min(wait, t0 + slot / rate - clock()))
                for key, events in self._selector.select(wait):
                    self._handle(key.data, events, stop, records, rate, backlog)
        except OSError as e:  # connecting failed: report it once and give up
            records.append((clock(), clock(), f"connection error: {e.strerror or e}"))
            stop.set()
        finally:
            self.close()

    def _handle(
        self,
        connection: _Connection,
        events: int,
        stop: threading.Event,
        records: list[tuple[float, float, str | None]],
        rate: float | None,
        backlog: collections.deque[float],
    ) -> None:
        if events & selectors.EVENT_WRITE and connection.outgoing is not None:
            self._flush(connection)
        if not events & selectors.EVENT_READ:
            return
        outcome = self._receive(connection)
        if outcome is False:
            return
        end = time.perf_counter()
        reusable: _Connection | None = connection
        if outcome is True:
            records.append((connection.started, end, connection.error_text()))
            connection.busy = False
            if not connection.keep_alive:
                self._drop(connection)
                reusable = None
        else:
            if connection.busy:
                records.append((connection.started, end, str(outcome)))
            self._drop(connection)
            reusable = None
        if stop.is_set():
            return
        if rate is None:
            self._send(reusable or self._open(), time.perf_counter())
        elif reusable is not None:
            if backlog:
                self._send(reusable, backlog.popleft())
            else:
                self._idle.append(reusable)
