"""The bundled server's HTTP/1.1 server: an asyncio protocol over httptools, running ASGI.

httptools (Node's llhttp) parses every request; this module does the rest of what an
HTTP/1.1 server does — keep-alive, pipelining, ``Expect: 100-continue``, chunked
responses, flow control both ways, disconnects, a clean shutdown — and runs the
application as ASGI 3, so the same application also runs under uvicorn
(``--http-server=uvicorn``) and in-process through ``httpx.ASGITransport``.

Why not uvicorn's protocol, which this server used before: on the 2-core machine a bare
"hello" ASGI app under uvicorn (httptools + uvloop) answered 12.0k req/s at one
connection and 19.5k at 16, where a plain asyncio protocol over the same parser answered
22.2k and 55.2k, and real Triton's health endpoint 21k at one connection: uvicorn's own
cost per request (~33 µs of CPU there) was more than the whole answer of a small
request. What makes the difference here:

* The application coroutine runs *eagerly*: its first step runs right away in the
  protocol callback, and a task is made only if it has to wait (a request that meets an
  idle in-process model instance never does).
* A response goes out in one write: status line, headers and body together (a
  multi-part binary body as one ``writelines``, its buffers not joined).
* While a single client sends requests back to back, the connection polls for the next
  one for ``busy_wait_us`` before letting the event loop sleep (a sleeping core takes
  tens of microseconds to wake on a virtual machine). The poll is a loop callback, so
  what the answered request still does after its ``send`` is done first, while the
  client reads the answer.

Plus the extensions of :mod:`._extensions`: a large body written straight into the
application's buffer, a disconnect reported at once, header names as sent, and answers
the application gives at once (``immediate_answer``: liveness and readiness are sent
without running the application: health at one connection +38-41% here).

Wire details follow real Triton's HTTP server (libevhtp): header names in Title-Case;
``Connection: close`` echoed when the client sent it, right after ``Content-Length`` (first,
for an empty body);
HTTP/1.0 answered in HTTP/1.0 and closed, unless keep-alive was asked for (then echoed),
with no ``Content-Length`` for an empty body; no ``Date`` or ``Server`` header; idle
keep-alive connections stay open. A client that ends its side of the connection has
gone away (its request in progress is cancelled, as under uvicorn). A request httptools
cannot parse gets a 400 and the connection is closed (Triton closes without an answer);
request heads are bounded (:data:`MAX_HEAD_BYTES`, else 431) and so is unread buffered
body (reading pauses).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import http
import itertools
import logging
import os
import select
import socket
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any
from urllib.parse import unquote

import httptools

from ..support._eager import resume
from ._extensions import (
    BODY_SINK,
    DIRECT,
    ON_DISCONNECT,
    RAW_HEADER_NAMES,
    RESPOND,
    Answer,
    DirectLink,
    ImmediateAnswer,
)

__all__ = ["MAX_HEAD_BYTES", "HttpServer"]

log = logging.getLogger("tritonhttp.server")

App = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Coroutine[Any, Any, MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Coroutine[Any, Any, None]],
    ],
    Coroutine[Any, Any, None],
]

#: the most bytes of request line and headers one request may have (431 beyond)
MAX_HEAD_BYTES = 1 << 20
#: unread request body buffered per connection before reading pauses
BUFFER_HIGH_WATER = 16 << 20
#: a connection polls for its next request only while that many connections are open
SPIN_MAX_CONNECTIONS = 8
#: how long a refused connection is read (and dropped) before it is closed
_LINGER_S = 2.0
#: response bodies up to this size are joined to the head for one write
_JOIN_BELOW = 1 << 16

_ASGI = {"version": "3.0", "spec_version": "2.3"}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_BAD_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 30\r\nConnection: close\r\n\r\nInvalid HTTP request received."
)
_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8"
    b"\r\nContent-Length: 31\r\nConnection: close\r\n\r\nRequest header fields too large."
)
_SERVER_ERROR = (
    b"Content-Type: text/plain; charset=utf-8\r\nContent-Length: 21\r\n",
    b"Internal Server Error",
)
_DISCONNECT: dict[str, Any] = {"type": "http.disconnect"}
#: the wire bytes of immediate answers: (answer, HTTP/1.0, keep-alive, HEAD) -> (bytes,
#: keep-alive after it)
_ANSWERS: dict[tuple[Answer, bool, bool, bool], tuple[bytes, bool]] = {}
#: the heads of ``respond``: (status, content type, HTTP/1.0, keep-alive) -> (the head up
#: to the Content-Length value, the rest of it, keep-alive after it)
_HEADS: dict[tuple[int, bytes, bool, bool], tuple[bytes, bytes, bool]] = {}
#: the heads of a direct answer, HTTP/1.1 keep-alive (see :class:`DirectLink`), once made
_DIRECT_HEADS: list[tuple[bytes, bytes]] = []
_KEYS = itertools.count(1)


def _reason(status: int) -> bytes:
    if status == 405:
        return b"Not Allowed"  # Triton's phrase
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


@functools.lru_cache(maxsize=1024)
def _status_line(http10: bool, status: int) -> bytes:
    version = b"HTTP/1.0" if http10 else b"HTTP/1.1"
    return b"%s %d %s\r\n" % (version, status, _reason(status))


@functools.lru_cache(maxsize=1024)
def _title(name: bytes) -> bytes:
    """``content-type`` -> ``Content-Type``, as Triton writes its header names."""
    return name.title()


class _Exchange:
    """One request and its response: the ASGI ``receive`` and ``send`` of one call."""

    __slots__ = (
        "body_left",
        "buffered",
        "chunked",
        "chunks",
        "complete",
        "conn",
        "delivered",
        "expect_continue",
        "finished",
        "handed",
        "head",
        "head_only",
        "http10",
        "keep_alive",
        "running",
        "scope",
        "started",
        "waiter",
    )

    def __init__(self, conn: _Connection) -> None:
        self.conn = conn
        self.scope: dict[str, Any] = {}
        self.chunks: list[bytes] = []
        self.buffered = 0
        #: the whole request body has arrived
        self.complete = False
        #: the last request message (more_body False) was handed to the application
        self.delivered = False
        self.expect_continue = False
        self.waiter: asyncio.Future[None] | None = None
        self.keep_alive = True
        self.http10 = False
        self.head_only = False
        #: its application is running (counted in ``HttpServer.active``)
        self.running = False
        #: response state
        self.started = False
        self.finished = False
        #: a DirectLink was handed out: another process may write the response
        self.handed = False
        self.chunked = False
        self.head: bytes | None = None
        #: bytes the declared Content-Length still expects (-1: none declared)
        self.body_left = -1

    # ---------------------------------------------------------------- request body

    def feed(self, body: bytes) -> None:
        if self.finished:
            return  # answered already: the rest of the body is read and dropped
        sink = self.scope.get(BODY_SINK)
        if sink is not None and not self.chunks and sink.take(body):
            return
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > BUFFER_HIGH_WATER:
            self.conn.pause_reading()
        self.wake()

    def end_of_body(self) -> None:
        self.complete = True
        self.wake()

    def wake(self) -> None:
        _settle(self.waiter)

    async def receive(self) -> dict[str, Any]:
        while True:
            if self.chunks or (self.complete and not self.delivered):
                chunks = self.chunks
                body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                self.chunks = []
                if self.buffered > BUFFER_HIGH_WATER:
                    self.conn.resume_reading()
                self.buffered = 0
                more = not self.complete
                if not more:
                    self.delivered = True
                return {"type": "http.request", "body": body, "more_body": more}
            if self.finished or self.conn.lost:
                return _DISCONNECT
            if self.expect_continue:
                self.expect_continue = False
                self.conn.write(_CONTINUE)
            loop = asyncio.get_running_loop()
            self.waiter = waiter = loop.create_future()
            try:
                await waiter
            finally:
                self.waiter = None

    # ---------------------------------------------------------------- response

    async def send(self, message: MutableMapping[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("the response has already started")
            self.started = True
            self._head(message["status"], message.get("headers") or ())
            return
        if kind != "http.response.body":
            raise RuntimeError(f"unexpected ASGI message {kind!r}")
        if not self.started or self.finished:
            raise RuntimeError("http.response.body outside a response")
        body = message.get("body", b"")
        more = bool(message.get("more_body", False))
        conn = self.conn
        size = body.nbytes if type(body) is memoryview else len(body)
        if self.body_left >= 0:
            self.body_left -= size
            if self.body_left < 0:
                self.keep_alive = False
                raise RuntimeError("response body longer than its Content-Length")
        if self.head_only:
            body = b""
            size = 0
        if not more:
            self.finished = True
            if self.body_left > 0:  # shorter than declared: the framing is lost
                self.keep_alive = False
        if conn.lost:
            if not more:
                conn.response_done(self)
            return
        head = self.head
        self.head = None
        if self.chunked:
            parts: list[Any] = [] if head is None else [head]
            if size:
                parts += (b"%x\r\n" % size, body, b"\r\n")
            if not more:
                parts.append(b"0\r\n\r\n")
            if parts:
                conn.write_parts(parts)
        elif head is not None:
            if not body:
                if more:
                    self.head = head  # hold the head for the first body bytes
                    return
                conn.write(head)
            elif size < _JOIN_BELOW:
                conn.write(head + bytes(body))
            else:
                conn.write_parts([head, body])
        elif body:
            conn.write(body)
        if conn.write_paused:
            await conn.drained()
        if not more:
            conn.response_done(self)

    def respond(self, status: int, content_type: bytes, body: bytes) -> Awaitable[None] | None:
        """A whole response with a Content-Type at once (see :data:`RESPOND`)."""
        if self.started:
            raise RuntimeError("the response has already started")
        size = len(body)
        if not size:  # (the head of an empty body has its own rules: the general path)
            self.started = True
            self._head(status, ((b"content-type", content_type), (b"content-length", b"0")))
            return self.send({"type": "http.response.body", "body": b""})
        self.started = self.finished = True
        key = (status, content_type, self.http10, self.keep_alive)
        parts = _HEADS.get(key)
        if parts is None:
            self._head(status, ((b"content-type", content_type), (b"content-length", b"1")))
            head = self.head or b""
            self.head = None
            before, _, after = head.partition(b"Content-Length: 1\r\n")
            parts = (before + b"Content-Length: ", b"\r\n" + after, self.keep_alive)
            if len(_HEADS) >= 256:
                _HEADS.clear()
            _HEADS[key] = parts
        before, after, self.keep_alive = parts
        conn = self.conn
        if not conn.lost:
            head = b"%s%d%s" % (before, size, after)
            if self.head_only:
                conn.write(head)
            elif size < _JOIN_BELOW:
                conn.write(head + body)
            else:
                conn.write_parts([head, body])
            if conn.write_paused:
                return self._drain_then_done()
        conn.response_done(self)
        return None

    async def _drain_then_done(self) -> None:
        await self.conn.drained()
        self.conn.response_done(self)

    def direct(self) -> DirectLink | None:
        """The connection, for another process to write this 200 response on (see
        :data:`DIRECT`); None when that cannot be done now."""
        conn = self.conn
        if (
            self.started
            or self.head_only
            or not self.keep_alive
            or self.http10
            or conn.lost
            or conn.write_paused
            or conn.transport.get_write_buffer_size()
        ):
            return None
        link = conn.direct_link()
        if link is not None:
            self.handed = True
        return link

    def direct_heads(self) -> tuple[bytes, bytes]:
        """(JSON, binary) heads of an HTTP/1.1 keep-alive 200 answer, ``%d`` for numbers."""
        if not _DIRECT_HEADS:
            assert not self.http10 and self.keep_alive
            made = []
            for headers in (
                ((b"content-type", b"application/json"), (b"content-length", b"7777777")),
                (
                    (b"content-type", b"application/octet-stream"),
                    (b"inference-header-content-length", b"8888888"),
                    (b"content-length", b"7777777"),
                ),
            ):
                self._head(200, headers)
                head = (self.head or b"").replace(b"%", b"%%")
                made.append(head.replace(b"8888888", b"%d").replace(b"7777777", b"%d"))
            self.head = None
            self.chunked = False
            self.body_left = -1
            _DIRECT_HEADS.append((made[0], made[1]))
        return _DIRECT_HEADS[0]

    def answer(self, answer: Answer) -> None:
        """Send a whole response at once, the application not running (its headers must
        hold the Content-Length). The bytes are made once per answer and request kind."""
        self.started = self.finished = True
        key = (answer, self.http10, self.keep_alive, self.head_only)
        cache = _ANSWERS
        made = cache.get(key)
        if made is None:
            status, headers, body = answer
            self._head(status, headers)
            head = self.head or b""
            self.head = None
            made = (head + body if not self.head_only else head, self.keep_alive)
            if len(cache) >= 256:
                cache.clear()
            cache[key] = made
        wire, self.keep_alive = made
        conn = self.conn
        if not conn.lost:
            conn.write(wire)
        conn.response_done(self)

    def _head(self, status: int, headers: Any) -> None:
        http10 = self.http10
        out = [_status_line(http10, status)]
        connection: bytes | None = None
        if not self.keep_alive:
            connection = None if http10 else b"Connection: close\r\n"
        elif http10:
            connection = b"Connection: keep-alive\r\n"
        length = -1
        chunked = False
        for name, value in headers:
            name = name.lower()
            if name == b"content-length":
                length = int(value)
                if length == 0 and connection is not None:
                    out.insert(1, connection)  # (libevhtp: first, for an empty body)
                    connection = None
                if http10 and length == 0:
                    continue  # Triton's HTTP/1.0 answer has none for an empty body
                out.append(b"Content-Length: " + value + b"\r\n")
                if connection is not None:
                    out.append(connection)
                    connection = None
                continue
            if name == b"transfer-encoding":
                if value.lower() != b"chunked":
                    raise RuntimeError(f"unsupported transfer-encoding {value!r}")
                chunked = True
                if http10:
                    continue  # HTTP/1.0: the body ends with the connection
            elif name == b"connection":
                if value.lower() == b"close":
                    self.keep_alive = False
                continue
            out.append(_title(name) + b": " + value + b"\r\n")
        if status < 200 or status in (204, 304):
            chunked = False  # (no body at all)
            length = 0
        elif length < 0 and not chunked and not self.head_only:
            chunked = True  # an open-ended body
            if not http10:
                out.append(b"Transfer-Encoding: chunked\r\n")
        if chunked and http10:
            # HTTP/1.0 has no chunks: the body ends with the connection
            self.keep_alive = False
            connection = None
            chunked = False
        if connection is not None:
            out.append(connection)
        out.append(b"\r\n")
        self.chunked = chunked
        self.body_left = length if not chunked else -1
        self.head = b"".join(out)


def _settle(waiter: asyncio.Future[None] | None, *_done: object) -> None:
    """Let whoever awaits ``waiter`` go on (nothing to do when it is None or done)."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class _Connection(asyncio.Protocol):
    """One client connection: parses requests with httptools, runs one at a time."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.transport: Any = None
        self.parser = httptools.HttpRequestParser(self)
        self.lost = False
        self.write_paused = False
        self._drain: asyncio.Future[None] | None = None
        self._read_paused = False
        #: requests whose head has arrived, the first one running or answered next
        self.queue: deque[_Exchange] = deque()
        self.current: _Exchange | None = None
        #: the request being parsed (its head, then its body)
        self._parsing: _Exchange | None = None
        self._url: list[bytes] = []
        self._headers: list[tuple[bytes, bytes]] = []
        self._raw_names: list[bytes] | None = None
        self._head_bytes = 0
        self._refused = False
        self._advancing = False
        self._fd = -1
        self._client: tuple[str, int] | None = None
        self._local: tuple[str, int] | None = None
        self._answered = 0.0
        self._quick = False
        #: (direct answers) a descriptor of our own, the link, and who to tell at the end
        self._dup: socket.socket | None = None
        self._link: DirectLink | None = None
        self._closers: list[Callable[[], None]] = []

    # ---------------------------------------------------------------- transport events

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._fd = sock.fileno()
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        self._client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        self._local = (str(local[0]), int(local[1])) if isinstance(local, tuple) else None
        self.server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # (closing: what the client still sends is dropped)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # no protocol switch here: answer what was asked, then close
            for ex in self.queue:
                ex.keep_alive = False
            self.pause_reading()
            if not self.queue:
                self.transport.close()
                return
        except httptools.HttpParserError:
            self._refuse(_BAD_REQUEST)
            return
        parsing = self._parsing
        if parsing is not None and not parsing.scope:
            # inside a request head (httptools keeps a header's value until it ends, so
            # count here what arrives, not in the callbacks)
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(_HEAD_TOO_LARGE)
                return
        self._advance()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.server.connections.discard(self)
        if self._dup is not None:
            self._end_direct()
        current = self.current
        if current is not None and not current.finished:
            callback = current.scope.get(ON_DISCONNECT)
            if callback is not None:
                current.scope[ON_DISCONNECT] = None
                try:
                    callback()
                except Exception:  # never let a callback break the connection's end
                    log.exception("disconnect callback failed")
            current.wake()
        self.queue.clear()
        self._wake_drain()

    # ---------------------------------------------------------------- direct answers

    def direct_link(self) -> DirectLink | None:
        """This connection's :class:`DirectLink` (made at its first use)."""
        link = self._link
        if link is None:
            if self._fd < 0 or self.lost:
                return None
            try:
                self._dup = socket.socket(fileno=os.dup(self._fd))
            except OSError:
                return None
            ex = self.current
            assert ex is not None
            json_head, binary_head = ex.direct_heads()
            link = self._link = DirectLink(
                next(_KEYS), self._dup.fileno(), json_head, binary_head,
                self._finish_direct, self._closers.append,
            )  # fmt: skip
        return link

    def _finish_direct(self, rest: bytes) -> Awaitable[None] | None:
        """The current response was written by another process but ``rest``."""
        ex = self.current
        assert ex is not None and ex.handed and not ex.started
        ex.started = ex.finished = True
        if rest and not self.lost:
            self.transport.write(rest)
            if self.write_paused:
                return ex._drain_then_done()
        self.response_done(ex)
        return None

    def _end_direct(self) -> None:
        """The connection is over: end it for every process holding it too (a shutdown
        sends the FIN whoever else still has a descriptor), and tell them."""
        dup = self._dup
        assert dup is not None
        self._dup = None
        with contextlib.suppress(OSError):
            dup.shutdown(socket.SHUT_RDWR)
        dup.close()
        closers, self._closers = self._closers, []
        for callback in closers:
            try:
                callback()
            except Exception:  # never let a callback break the connection's end
                log.exception("connection close callback failed")

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake_drain()

    def _wake_drain(self) -> None:
        _settle(self._drain)

    async def drained(self) -> None:
        """Wait until the transport takes more (or the client is gone)."""
        while self.write_paused and not self.lost:
            self._drain = asyncio.get_running_loop().create_future()
            try:
                await self._drain
            finally:
                self._drain = None

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def write_parts(self, parts: list[Any]) -> None:
        if len(parts) == 1:
            self.transport.write(parts[0])
        else:
            self.transport.writelines(parts)

    def pause_reading(self) -> None:
        if not self._read_paused and not self.lost:
            self._read_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self._read_paused and not self.lost:
            self._read_paused = False
            self.transport.resume_reading()

    def _refuse(self, answer: bytes) -> None:
        """A request that cannot be served: answer (unless a response is under way) and
        close, reading on for a moment so that the answer is not lost to a reset."""
        self._refused = True
        self.queue.clear()
        transport = self.transport
        if self.current is not None and (self.current.started or self.current.handed):
            transport.close()
            return
        transport.write(answer)
        if transport.can_write_eof():
            transport.write_eof()
            asyncio.get_running_loop().call_later(_LINGER_S, transport.close)
        else:  # pragma: no cover
            transport.close()

    def shutdown(self) -> None:
        """Close when idle; a request in progress finishes first (and closes)."""
        if self.current is None and not self.queue:
            self.transport.close()
            return
        for ex in self.queue:
            ex.keep_alive = False

    # ---------------------------------------------------------------- parser callbacks

    def on_message_begin(self) -> None:
        self._parsing = _Exchange(self)
        self._url = []
        self._headers = []
        self._raw_names = [] if self.server.keep_raw_header_names else None
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))
        if self._raw_names is not None:
            self._raw_names.append(name)

    def on_headers_complete(self) -> None:
        ex = self._parsing
        assert ex is not None
        parser = self.parser
        url = self._url[0] if len(self._url) == 1 else b"".join(self._url)
        if url[:1] == b"/":
            raw_path, _, query = url.partition(b"?")
        else:  # absolute form (or *)
            parsed = httptools.parse_url(url)
            raw_path, query = parsed.path or b"/", parsed.query or b""
        path = raw_path.decode("latin-1")
        if "%" in path:
            path = unquote(path)
        method = parser.get_method().decode("ascii")
        version = parser.get_http_version()
        ex.http10 = version == "1.0"
        ex.keep_alive = parser.should_keep_alive()
        ex.head_only = method == "HEAD"
        headers = self._headers
        for name, value in headers:
            if name == b"expect" and value.lower() == b"100-continue":
                ex.expect_continue = True
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": version,
            "server": self._local,
            "client": self._client,
            "scheme": "http",
            "method": method,
            "root_path": "",
            "path": path,
            "raw_path": raw_path,
            "query_string": query,
            "headers": headers,
            ON_DISCONNECT: None,
            BODY_SINK: None,
            RESPOND: ex.respond,
            DIRECT: ex.direct,
        }
        if self._raw_names is not None:
            scope[RAW_HEADER_NAMES] = self._raw_names
        ex.scope = scope
        if self.server.spin_s:
            # the client sends back to back: worth polling for its next request
            self._quick = time.perf_counter() - self._answered < self.server.spin_s
        self.queue.append(ex)
        if len(self.queue) > 1:
            self.pause_reading()  # pipelining: one request ahead is enough

    def on_body(self, body: bytes) -> None:
        ex = self._parsing
        if ex is not None:
            ex.feed(body)

    def on_message_complete(self) -> None:
        ex = self._parsing
        self._parsing = None
        if ex is not None:
            ex.end_of_body()

    # ---------------------------------------------------------------- running requests

    def _advance(self) -> None:
        """Start the next request's application while none is running."""
        if self._advancing:
            return
        self._advancing = True
        try:
            while self.current is None and self.queue and not self.lost:
                self._run(self.queue[0])
        finally:
            self._advancing = False

    def _run(self, ex: _Exchange) -> None:
        self.current = ex
        server = self.server
        if server.immediate is not None and ex.complete and not ex.buffered:
            try:
                answer = server.immediate(ex.scope)
            except Exception:
                log.exception("immediate_answer failed: running the application")
                answer = None
            if answer is not None:
                ex.answer(answer)
                return
        server.active += 1
        ex.running = True
        coro = server.app(ex.scope, ex.receive, ex.send)
        context = contextvars.copy_context()
        try:
            yielded = context.run(coro.send, None)
        except StopIteration:
            self._app_done(ex, None)
            return
        except BaseException as e:
            self._app_done(ex, e)
            if not isinstance(e, Exception):
                raise
            return
        loop = asyncio.get_running_loop()
        if sys.version_info >= (3, 11):
            task = loop.create_task(resume(coro, yielded), context=context)
        else:  # pragma: no cover
            task = loop.create_task(resume(coro, yielded))
        server.tasks.add(task)
        task.add_done_callback(lambda t: self._task_done(t, ex))

    def _task_done(self, task: asyncio.Task[None], ex: _Exchange) -> None:
        self.server.tasks.discard(task)
        error = None if task.cancelled() else task.exception()
        self._app_done(ex, error)
        self._advance()

    def _app_done(self, ex: _Exchange, error: BaseException | None) -> None:
        self.server.active -= 1
        ex.running = False
        if error is not None:
            log.error("exception in the HTTP application", exc_info=error)
        if ex.finished:
            return
        # the application ended without completing its response
        if not ex.started and not ex.handed and not self.lost:
            self.transport.write(
                _status_line(ex.http10, 500) + _SERVER_ERROR[0] + b"Connection: close\r\n\r\n"
                + _SERVER_ERROR[1]
            )  # fmt: skip
        ex.finished = True
        ex.keep_alive = False
        self.response_done(ex)

    def response_done(self, ex: _Exchange) -> None:
        """``ex`` sent its last byte: the next request may start."""
        if self.current is ex:
            self.current = None
        if self.queue and self.queue[0] is ex:
            self.queue.popleft()
        if self.lost:
            return
        if not ex.keep_alive:
            self.transport.close()
            self.lost = True  # (connection_lost follows)
            return
        if self._read_paused and len(self.queue) <= 1 and not self._pause_for_body():
            self.resume_reading()
        server = self.server
        if server.spin_s:
            if self.queue or not self._quick or len(server.connections) > SPIN_MAX_CONNECTIONS:
                self._answered = time.perf_counter()
            else:
                # (from the loop, once what called this has returned: the rest of the
                # answered request's work is done before the poll, not after it)
                asyncio.get_running_loop().call_soon(self._poll_next, ex)
        if self.queue and not self._advancing:
            # the previous application ran as a task: start the next one from the loop
            asyncio.get_running_loop().call_soon(self._advance)

    def _pause_for_body(self) -> bool:
        return any(ex.buffered > BUFFER_HIGH_WATER for ex in self.queue)

    def _poll_next(self, answered: _Exchange) -> None:
        """Poll the open connections for a request for a moment (see the module doc),
        unless another request is in progress meanwhile."""
        try:
            server = self.server
            connections = server.connections
            if server.active - answered.running or self.queue or self.lost:
                return
            if len(connections) > SPIN_MAX_CONNECTIONS:
                return
            poller = select.poll()  # (no FD_SETSIZE limit, unlike select())
            for c in connections:
                if c._fd >= 0:
                    poller.register(c._fd, select.POLLIN)
            deadline = time.perf_counter() + server.spin_s
            while not poller.poll(0):
                if time.perf_counter() >= deadline:
                    return
                os.sched_yield()  # whoever else wants this core goes first
        finally:
            self._answered = time.perf_counter()


class HttpServer:
    """Serves an ASGI application over HTTP/1.1 on one or more listening sockets.

    ``busy_wait_us``: see the module doc (0 turns polling off; it needs ``select.poll``
    and ``os.sched_yield``, so it is off on Windows). ``keep_raw_header_names`` records
    the header names as sent in ``scope[RAW_HEADER_NAMES]``. The application's
    ``immediate_answer`` method, where it has one, answers what it can at once (see
    :mod:`._extensions`).
    """

    def __init__(
        self, app: App, *, busy_wait_us: int = 0, keep_raw_header_names: bool = False
    ) -> None:
        self.app = app
        self.immediate: ImmediateAnswer | None = getattr(app, "immediate_answer", None)
        self.keep_raw_header_names = keep_raw_header_names
        can_poll = hasattr(select, "poll") and hasattr(os, "sched_yield")
        self.spin_s = busy_wait_us / 1e6 if can_poll else 0.0
        self.connections: set[_Connection] = set()
        #: requests whose application is running
        self.active = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self._listeners: list[asyncio.Server] = []

    async def listen(self, host: str, port: int) -> None:
        """Open a listening socket (raises OSError when the address is taken)."""
        loop = asyncio.get_running_loop()
        listener = await loop.create_server(
            lambda: _Connection(self), host, port, backlog=2048, reuse_address=True
        )
        self._listeners.append(listener)

    @property
    def ports(self) -> list[int]:
        """The ports listened on (useful with port 0)."""
        return [s.getsockname()[1] for listener in self._listeners for s in listener.sockets or ()]

    async def shutdown(self, timeout: float | None = None) -> None:
        """Stop listening, let requests in progress finish (up to ``timeout``), close."""
        for listener in self._listeners:
            listener.close()
        for conn in list(self.connections):
            conn.shutdown()
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.connections and (deadline is None or time.monotonic() < deadline):
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.transport.abort()
        for task in list(self.tasks):
            task.cancel()
        for listener in self._listeners:
            await listener.wait_closed()
        self._listeners = []
