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

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BODY_SINK",
    "DIRECT",
    "ON_DISCONNECT",
    "RAW_HEADER_NAMES",
    "RESPOND",
    "Answer",
    "BodySink",
    "DirectLink",
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
#: scope key holding ``respond(status, content_type, body, headers=())``: sends a whole
#: response with a ``Content-Type``, the ASGI ``headers`` given (lower-case names) and a
#: ``Content-Length`` in one synchronous call and one write, instead of ASGI ``send``
#: messages. ``body`` is bytes or a list of buffers, sent in order. It returns None when
#: the response is done, or (the client reads slowly, or the body is empty) an awaitable
#: the application must await
RESPOND = "tritonhttp.respond"
#: scope key holding ``direct()``: a :class:`DirectLink` through which another process
#: may write this request's ``200`` response on the client's socket itself, or None when
#: it cannot now (the response must then be sent as usual). Once handed out, the
#: application must end the response with ``DirectLink.finish`` or send it as usual
DIRECT = "tritonhttp.direct"
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


@dataclass(slots=True)
class DirectLink:
    """A client connection another process may answer on (see :data:`DIRECT`).

    ``fd`` is a descriptor of the connection's socket, to pass on with ``SCM_RIGHTS``
    (it stays valid while the connection is open); ``key`` names the connection, never
    reused. ``json_head`` and ``binary_head`` are the response heads, ``%d`` where the
    numbers go: ``json_head % len(body)`` and ``binary_head % (len(json), len(body))``
    (``Inference-Header-Content-Length`` first). ``finish(rest)``: the other process
    wrote the response but ``rest``; the server sends ``rest`` and goes on (it returns
    None, or an awaitable to await: the client reads slowly). ``on_close(callback)``
    registers a callback for the connection's end (the descriptors passed on should be
    closed then).
    """

    key: int
    fd: int
    json_head: bytes
    binary_head: bytes
    finish: Callable[[bytes], Awaitable[None] | None]
    on_close: Callable[[Callable[[], None]], None]
