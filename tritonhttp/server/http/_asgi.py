"""The ASGI side of one request: its scope, ``receive`` and ``send``, and its application.

An :class:`Exchange` is one request on a connection and its response. It builds the
request's ASGI 3 ``scope`` (with the extensions of :mod:`._extensions`), buffers the
request body for ``receive`` (or writes it into the application's :class:`BodySink`),
and turns ``send``'s messages into bytes on the connection: a response goes out in one
write where it can (status line, headers and body together; a large or multi-part body as
one ``writelines``, its buffers not joined), in chunks when its length is open.

:meth:`Exchange.run` answers the request. Where the application's ``immediate_answer``
gives the answer, it is sent without running the application. Otherwise the application
runs *eagerly*: its first step runs right away, in the connection's callback, and a task
(:func:`~tritonhttp.server.support._eager.resume`) is made only if it has to wait. An
application may also answer in one synchronous call (``respond``) or let another process
write its answer on the socket (``direct``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import TYPE_CHECKING, Any
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
)
from ._wire import ANSWERS, RESPOND_HEADS, ResponseFraming, continue_line, server_error

if TYPE_CHECKING:
    from ._connection import Connection
    from ._httpserver import HttpServer

__all__ = ["BUFFER_HIGH_WATER", "App", "Exchange"]

log = logging.getLogger("tritonhttp.server")

#: an ASGI 3 application
App = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Coroutine[Any, Any, MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Coroutine[Any, Any, None]],
    ],
    Coroutine[Any, Any, None],
]

#: unread request body buffered per request before its connection stops reading
BUFFER_HIGH_WATER = 16 << 20
#: response bodies below this size are joined to the head for one write
_JOIN_BELOW = 1 << 16

_ASGI = {"version": "3.0", "spec_version": "2.3"}
_DISCONNECT: dict[str, Any] = {"type": "http.disconnect"}


def _settle(waiter: asyncio.Future[None] | None) -> None:
    """Let whoever awaits ``waiter`` go on (nothing to do when it is None or done)."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class Exchange(ResponseFraming):
    """One request and its response: the ASGI ``scope``, ``receive`` and ``send`` of one
    call of the application (the response's head and framing: :class:`ResponseFraming`)."""

    __slots__ = (
        "body_seen",
        "buffered",
        "chunks",
        "complete",
        "conn",
        "delivered",
        "expect_continue",
        "finished",
        "handed",
        "running",
        "scope",
        "started",
        "waiter",
    )

    def __init__(self, conn: Connection) -> None:
        # (sets ResponseFraming's fields itself: one call less per request)
        self.conn = conn
        self.scope: dict[str, Any] = {}
        self.chunks: list[bytes] = []
        self.buffered = 0
        #: request body bytes that arrived so far
        self.body_seen = 0
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
        self.head = None
        self.body_left = -1

    def open(
        self,
        parser: Any,
        url: bytes,
        headers: list[tuple[bytes, bytes]],
        raw_names: list[bytes] | None,
        local: tuple[str, int] | None,
        client: tuple[str, int] | None,
    ) -> None:
        """Take the request's head (``parser`` has just parsed it; ``headers`` have
        lower-case names, ``raw_names`` are the names as sent, if kept) and build its
        scope, served at ``local`` to ``client``."""
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
        self.http10 = version == "1.0"
        self.keep_alive = parser.should_keep_alive()
        self.head_only = method == "HEAD"
        for name, _ in headers:
            if name == b"expect":
                # (Triton answers any Expect with 100 Continue once the head is read)
                self.expect_continue = True
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": version,
            "server": local,
            "client": client,
            "scheme": "http",
            "method": method,
            "root_path": "",
            "path": path,
            "raw_path": raw_path,
            "query_string": query,
            "headers": headers,
            ON_DISCONNECT: None,
            BODY_SINK: None,
            RESPOND: self.respond,
            DIRECT: self.direct,
        }
        if raw_names is not None:
            scope[RAW_HEADER_NAMES] = raw_names
        self.scope = scope

    # ---------------------------------------------------------------- request body

    def feed(self, body: bytes) -> None:
        """A piece of the request body arrived: into the sink, or buffered for
        ``receive`` (reading pauses while too much is buffered)."""
        self.body_seen += len(body)
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

    def request_body_left(self) -> int:
        """The request body bytes still to come by its ``Content-Length`` (-1: the body
        is not framed by one)."""
        length = -1
        for name, value in self.scope["headers"]:
            if name == b"transfer-encoding":
                return -1
            if name == b"content-length":
                try:
                    length = int(value)  # (the parser has checked it)
                except ValueError:
                    return -1
        return length - self.body_seen if length >= 0 else -1

    def end_of_body(self) -> None:
        """The whole request body has arrived."""
        self.complete = True
        self.wake()

    def wake(self) -> None:
        """Let a ``receive`` waiting for the client go on."""
        _settle(self.waiter)

    async def receive(self) -> dict[str, Any]:
        """ASGI ``receive``: the body buffered so far, or ``http.disconnect``."""
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
            loop = asyncio.get_running_loop()
            self.waiter = waiter = loop.create_future()
            try:
                await waiter
            finally:
                self.waiter = None

    # ---------------------------------------------------------------- response

    async def send(self, message: MutableMapping[str, Any]) -> None:
        """ASGI ``send``: the response head is held until the first body bytes, to go
        out with them in one write."""
        kind = message["type"]
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("the response has already started")
            self.started = True
            self.make_head(message["status"], message.get("headers") or ())
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

    def respond(
        self,
        status: int,
        content_type: bytes,
        body: bytes | list[bytes | memoryview],
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> Awaitable[None] | None:
        """A whole response with a Content-Type at once (see :data:`RESPOND`)."""
        if self.started:
            raise RuntimeError("the response has already started")
        if headers or type(body) is not bytes:
            return self._respond_parts(status, content_type, body, headers)
        size = len(body)
        if not size:  # (the head of an empty body has its own rules: the general path)
            return self._respond_empty(status, content_type, headers)
        self.started = self.finished = True
        parts = RESPOND_HEADS.get((status, content_type, self.http10, self.keep_alive))
        if parts is None:
            parts = self.respond_head(status, content_type)
        before, after, self.keep_alive = parts
        return self._write_whole(b"%s%d%s" % (before, size, after), [body], size)

    def _respond_parts(
        self,
        status: int,
        content_type: bytes,
        body: bytes | list[bytes | memoryview],
        headers: tuple[tuple[bytes, bytes], ...],
    ) -> Awaitable[None] | None:
        """:meth:`respond` with more headers or a body in parts: its head made anew."""
        parts: list[bytes | memoryview] = [body] if isinstance(body, bytes) else body
        size = sum(len(p) if type(p) is bytes else memoryview(p).nbytes for p in parts)
        if not size:
            return self._respond_empty(status, content_type, headers)
        self.started = self.finished = True
        head = self.take_head(
            status, ((b"content-type", content_type), *headers, (b"content-length", b"%d" % size))
        )
        return self._write_whole(head, parts, size)

    def _respond_empty(
        self, status: int, content_type: bytes, headers: tuple[tuple[bytes, bytes], ...]
    ) -> Awaitable[None]:
        self.started = True
        self.make_head(
            status, ((b"content-type", content_type), *headers, (b"content-length", b"0"))
        )
        return self.send({"type": "http.response.body", "body": b""})

    def _write_whole(
        self, head: bytes, parts: list[bytes | memoryview], size: int
    ) -> Awaitable[None] | None:
        """Write a response's ``head`` and its body (``parts``, ``size`` bytes) at once."""
        conn = self.conn
        if not conn.lost:
            if self.head_only:
                conn.write(head)
            elif size < _JOIN_BELOW:
                conn.write(b"".join([head, *parts]))
            else:
                conn.write_parts([head, *parts])
            if conn.write_paused:
                return self.drain_then_done()
        conn.response_done(self)
        return None

    async def drain_then_done(self) -> None:
        """Wait until the client has taken the response, then end it."""
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

    def answer(self, answer: Answer) -> None:
        """Send a whole response at once, the application not running (its headers must
        hold the Content-Length). The bytes are made once per answer and request kind."""
        self.started = self.finished = True
        made = ANSWERS.get((answer, self.http10, self.keep_alive, self.head_only))
        if made is None:
            made = self.answer_wire(answer)
        wire, self.keep_alive = made
        conn = self.conn
        if not conn.lost:
            conn.write(wire)
        conn.response_done(self)

    # ---------------------------------------------------------------- the application

    def run(self, server: HttpServer) -> None:
        """Answer the request: from ``immediate_answer`` when it can (the whole body has
        arrived and is empty), else by running the application, eagerly. A request
        with an ``Expect`` header gets ``100 Continue`` first, whatever it asks and
        whether or not its body has come, as from Triton."""
        if self.expect_continue:
            self.expect_continue = False
            if not self.conn.lost:
                self.conn.write(continue_line(self.http10))
        if server.immediate is not None and self.complete and not self.buffered:
            try:
                answer = server.immediate(self.scope)
            except Exception:
                log.exception("immediate_answer failed: running the application")
                answer = None
            if answer is not None:
                self.answer(answer)
                return
        server.active += 1
        self.running = True
        coro = server.app(self.scope, self.receive, self.send)
        context = contextvars.copy_context()
        try:
            yielded = context.run(coro.send, None)
        except StopIteration:
            self._app_done(server, None)
            return
        except BaseException as e:
            self._app_done(server, e)
            if not isinstance(e, Exception):
                raise
            return
        loop = asyncio.get_running_loop()
        if sys.version_info >= (3, 11):
            task = loop.create_task(resume(coro, yielded), context=context)
        else:  # pragma: no cover
            task = loop.create_task(resume(coro, yielded))
        server.tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        """The application, gone on as ``task``, has ended: the next request may run."""
        conn = self.conn
        server = conn.server
        server.tasks.discard(task)
        error = None if task.cancelled() else task.exception()
        self._app_done(server, error)
        conn.advance()

    def _app_done(self, server: HttpServer, error: BaseException | None) -> None:
        """The application has ended (raising ``error``, unless None): a response it did
        not complete ends here (a 500 if none had started) and the connection closes."""
        server.active -= 1
        self.running = False
        if error is not None:
            log.error("exception in the HTTP application", exc_info=error)
        if self.finished:
            return
        conn = self.conn
        if not self.started and not self.handed and not conn.lost:
            conn.write(server_error(self.http10))
        self.finished = True
        self.keep_alive = False
        conn.response_done(self)
