"""uvicorn, tuned for this server.

* Responses go out in one ``write`` (status line, headers and body together) instead of
  uvicorn's two, which halves the syscalls and packets of a small response.
* 405 carries Triton's reason phrase ``Not Allowed``.
* Large request bodies arrive in bigger pieces (fewer receive round trips).
* Request header names are also kept as sent (``scope[RAW_HEADER_NAMES]``), for
  ``--http-header-forward-pattern``.
* A client that goes away while its request is in progress is reported at once through
  ``scope[ON_DISCONNECT]`` (a callable the application may set), without the
  application having to keep a ``receive()`` waiting.

Everything here leans on uvicorn's httptools protocol internals; when they are not what
this module expects, the stock protocol is used unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["ON_DISCONNECT", "RAW_HEADER_NAMES", "http_protocol_class", "patch_uvicorn"]

#: scope key holding the request header names with their original case, in order
RAW_HEADER_NAMES = "tritonhttp.raw_header_names"
#: scope key present (value None) when the server calls ``scope[ON_DISCONNECT]()`` if the
#: client disconnects before the response is complete
ON_DISCONNECT = "tritonhttp.on_disconnect"


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


def http_protocol_class(keep_raw_header_names: bool = True) -> Any:
    """uvicorn's httptools protocol with coalesced response writes (or the stock one).

    ``keep_raw_header_names`` records the header names as sent (a Python call per
    header: only worth it when headers are forwarded).
    """
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

        def on_headers_complete(self) -> None:
            before = getattr(self, "cycle", None)
            scope = getattr(self, "scope", None)
            if scope is not None:
                scope[ON_DISCONNECT] = None
            super().on_headers_complete()
            cycle = getattr(self, "cycle", None)
            if cycle is not None and cycle is not before and hasattr(cycle, "transport"):
                cycle.transport = _CoalescingTransport(cycle.transport)

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
