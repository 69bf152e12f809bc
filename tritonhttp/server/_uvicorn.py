"""uvicorn, tuned for this server.

* Responses go out in one ``write`` (status line, headers and body together) instead of
  uvicorn's two, which halves the syscalls and packets of a small response.
* 405 carries Triton's reason phrase ``Not Allowed``.
* Large request bodies arrive in bigger pieces (fewer receive round trips).
* Request header names are also kept as sent (``scope[RAW_HEADER_NAMES]``), for
  ``--http-header-forward-pattern``.
* A large request body can be received straight into the application's buffer
  (``scope[BODY_SINK]``, see :class:`BodySink`) instead of through uvicorn's
  accumulate-then-copy chunks: two copies of every byte fewer.
* A client that goes away while its request is in progress is reported at once through
  ``scope[ON_DISCONNECT]`` (a callable the application may set), without the
  application having to keep a ``receive()`` waiting.

Everything here leans on uvicorn's httptools protocol internals; when they are not what
this module expects, the stock protocol is used unchanged.
"""

from __future__ import annotations

import logging
import os
import select
import time
from typing import Any

__all__ = [
    "BODY_SINK",
    "ON_DISCONNECT",
    "RAW_HEADER_NAMES",
    "BodySink",
    "http_protocol_class",
    "patch_uvicorn",
]

#: scope key holding the request header names with their original case, in order
RAW_HEADER_NAMES = "tritonhttp.raw_header_names"
#: scope key present (value None) when the server calls ``scope[ON_DISCONNECT]()`` if the
#: client disconnects before the response is complete
ON_DISCONNECT = "tritonhttp.on_disconnect"
#: scope key present (value None) when the server can write the rest of the request body
#: into a :class:`BodySink` the application puts there
BODY_SINK = "tritonhttp.body_sink"


class BodySink:
    """Where the rest of a request body goes: a writable buffer, filled in order."""

    __slots__ = ("closed", "filled", "view")

    def __init__(self, view: memoryview, filled: int) -> None:
        self.view = view
        self.filled = filled
        self.closed = False

    def take(self, chunk: bytes) -> bool:
        """Copy ``chunk`` in; False (nothing copied, now or later: the order of the bytes
        must hold) once a chunk did not fit."""
        end = self.filled + len(chunk)
        if self.closed or end > len(self.view):
            self.closed = True
            return False
        self.view[self.filled : end] = chunk
        self.filled = end
        return True


class _CoalescingTransport:
    """Holds a response's status line and headers until its first body write."""

    __slots__ = ("_pending", "_transport")

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._pending: bytes | None = None

    def write(self, data: Any) -> None:
        pending = self._pending
        if pending is not None:
            self._pending = None
            if data:
                self._transport.write(pending + bytes(data) if len(data) < 65536 else pending)
                if len(data) >= 65536:
                    self._transport.write(data)
            else:
                self._transport.write(pending)
            return
        if isinstance(data, bytes) and data.startswith(b"HTTP/") and b" 100 " not in data[:13]:
            self._pending = data
            return
        self._transport.write(data)

    def flush(self) -> None:
        pending = self._pending
        if pending is not None:
            self._pending = None
            self._transport.write(pending)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


#: a connection polls for its next request only while that many connections are open
_SPIN_MAX_CONNECTIONS = 8


def http_protocol_class(keep_raw_header_names: bool = True, busy_wait_us: int = 0) -> Any:
    """uvicorn's httptools protocol with coalesced response writes (or the stock one).

    ``keep_raw_header_names`` records the header names as sent (a Python call per
    header: only worth it when headers are forwarded). ``busy_wait_us``: after answering,
    a connection that is the only one busy polls the open connections for the next
    request that long before the event loop may go to sleep, while its client has been
    sending requests back to back. A sleeping core takes tens of microseconds to wake on
    a virtual machine, more than this server needs for a small request; polling trades
    a little CPU for that latency (the default process isolation's workers do the same).
    """
    # (polling needs select.poll and os.sched_yield: not on Windows)
    spin_s = busy_wait_us / 1e6 if hasattr(select, "poll") and hasattr(os, "sched_yield") else 0.0
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover
        return "httptools"

    class CoalescingHttpToolsProtocol(HttpToolsProtocol):
        if keep_raw_header_names:

            def on_header(self, name: bytes, value: bytes) -> None:
                # ASGI lower-cases header names; header forwarding wants them as sent
                scope = getattr(self, "scope", None)
                if scope is not None:
                    scope.setdefault(RAW_HEADER_NAMES, []).append(name)
                super().on_header(name, value)

        _fd = -1
        _answered = 0.0
        _quick = False

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            self._fd = sock.fileno() if sock is not None else -1

        def on_headers_complete(self) -> None:
            if spin_s:
                # the client sends back to back: worth polling for its next request
                self._quick = time.perf_counter() - self._answered < spin_s
            before = getattr(self, "cycle", None)
            scope = getattr(self, "scope", None)
            if scope is not None:
                scope[ON_DISCONNECT] = None
                scope[BODY_SINK] = None
            super().on_headers_complete()
            cycle = getattr(self, "cycle", None)
            if cycle is not None and cycle is not before and hasattr(cycle, "transport"):
                cycle.transport = _CoalescingTransport(cycle.transport)

        def on_body(self, body: bytes) -> None:
            cycle: Any = getattr(self, "cycle", None)
            sink = cycle.scope.get(BODY_SINK) if cycle is not None else None
            if sink is None or cycle.response_complete or not sink.take(body):
                super().on_body(body)  # (what does not fit arrives through receive())
                return
            cycle.message_event.set()

        def connection_lost(self, exc: Exception | None) -> None:
            cycle = getattr(self, "cycle", None)
            if cycle is not None and not getattr(cycle, "response_complete", True):
                callback = cycle.scope.get(ON_DISCONNECT)
                if callback is not None:
                    cycle.scope[ON_DISCONNECT] = None
                    try:
                        callback()
                    except Exception:  # never let a callback break the connection's end
                        logging.getLogger("tritonhttp.server").exception(
                            "disconnect callback failed"
                        )
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            cycle = getattr(self, "cycle", None)
            transport = getattr(cycle, "transport", None)
            if isinstance(transport, _CoalescingTransport):
                transport.flush()
            super().on_response_complete()
            if spin_s:
                self._poll_next()
                self._answered = time.perf_counter()

        def _poll_next(self) -> None:
            state = self.server_state
            if not self._quick or len(state.tasks) > 1:
                return
            connections = state.connections
            if len(connections) > _SPIN_MAX_CONNECTIONS:
                return
            poller = select.poll()  # (no FD_SETSIZE limit, unlike select())
            for c in connections:
                fd = getattr(c, "_fd", -1)
                if fd >= 0:
                    poller.register(fd, select.POLLIN)
            deadline = time.perf_counter() + spin_s
            while not poller.poll(0):
                if time.perf_counter() >= deadline:
                    return
                os.sched_yield()  # whoever else wants this core goes first

    return CoalescingHttpToolsProtocol


def patch_uvicorn() -> None:
    """Triton's 405 reason phrase and larger receive chunks for big bodies."""
    try:
        from uvicorn.protocols.http import httptools_impl

        httptools_impl.STATUS_LINE[405] = b"HTTP/1.1 405 Not Allowed\r\n"
        limit = getattr(httptools_impl, "HIGH_WATER_LIMIT", 0)
        httptools_impl.HIGH_WATER_LIMIT = max(limit, 16 * 1024 * 1024)  # type: ignore[attr-defined]
    except (ImportError, AttributeError):  # pragma: no cover - other uvicorn layouts
        pass
