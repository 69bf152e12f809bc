"""What the bundled HTTP server offers the application beyond plain ASGI.

Each is a ``scope`` key; an application that finds a key missing (any other ASGI server,
``httpx.ASGITransport``) falls back to plain ASGI.

And one the server looks for on the application: a method ``immediate_answer(scope)``
(see :data:`ImmediateAnswer`). Before it runs the application for a request whose whole
body has arrived and is empty, the bundled server calls it; when it returns an answer
``(status, headers, body)`` instead of None, the server sends that answer itself and the
application is not called (no coroutine, no ASGI messages). It is for answers that need
no I/O and no waiting (server liveness and readiness), which must be the same bytes as
the application's own answer to that request (if it raises, the error is logged and the
application runs).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

__all__ = [
    "BODY_SINK",
    "ON_DISCONNECT",
    "RAW_HEADER_NAMES",
    "RESPOND",
    "Answer",
    "BodySink",
    "ImmediateAnswer",
]

#: a whole response: status, ASGI-style headers (lower-case names), body
Answer = tuple[int, tuple[tuple[bytes, bytes], ...], bytes]
#: ``app.immediate_answer``: the request's scope -> its answer, or None to run the app
ImmediateAnswer = Callable[[MutableMapping[str, Any]], "Answer | None"]

#: scope key holding the request header names with their original case, in order
RAW_HEADER_NAMES = "tritonhttp.raw_header_names"
#: scope key present (value None) when the server calls ``scope[ON_DISCONNECT]()`` if the
#: client disconnects before the response is complete
ON_DISCONNECT = "tritonhttp.on_disconnect"
#: scope key holding ``respond(status, content_type, body)``: sends a whole response with
#: a ``Content-Type`` and a ``Content-Length`` header in one synchronous call, instead of
#: the two ASGI ``send`` messages. It returns None when the response is done, or (the
#: client reads slowly, or the body is empty) an awaitable the application must await
RESPOND = "tritonhttp.respond"
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
