"""One client connection of the HTTP/1.1 server: an asyncio protocol over httptools.

httptools (Node's llhttp) parses the requests; its callbacks make one
:class:`~._asgi.Exchange` per request, and the connection runs them one at a time, in
order. It does what HTTP/1.1 asks of a connection beyond parsing: keep-alive (closed after
a response that does not keep it), pipelining (one request parsed ahead, then reading
pauses), flow control both ways (reading pauses while a request has too much unread body
buffered; ``send`` waits while the transport's write buffer is full), and its end: a
client that ends its side of the connection has gone away (the request in progress is
told, through :data:`~._extensions.ON_DISCONNECT` or ``receive``), and a shutdown lets
the request in progress finish. A request that cannot be parsed gets a 400 and the
connection closes (a request head is bounded: :data:`MAX_HEAD_BYTES`, else 431); an
upgrade is not made (the request is answered, then the connection closes).

After answering a quick client, the connection polls for its next request
(:mod:`._poll`). It also hands its socket to another process that writes a response on it
(:data:`~._extensions.DIRECT`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httptools

from ._asgi import BUFFER_HIGH_WATER, Exchange
from ._extensions import BODY_SINK, ON_DISCONNECT, BodySink, DirectLink
from ._wire import BAD_REQUEST, HEAD_TOO_LARGE, direct_heads, one_content_length

if TYPE_CHECKING:
    from ._httpserver import HttpServer

__all__ = ["MAX_HEAD_BYTES", "Connection"]

log = logging.getLogger("tritonhttp.server")

#: the most bytes of request line and headers one request may have (431 beyond)
MAX_HEAD_BYTES = 1 << 20
#: how long a refused connection is read (and dropped) before it is closed, so that the
#: client reads the answer before the close (closing with unread data sends a reset)
_LINGER_S = 2.0
#: the keys of :class:`DirectLink`: never reused
_KEYS = itertools.count(1)
#: a request body with at least this much left to come when its sink is set goes into
#: the sink straight from the socket (:class:`_BodyReader`)
RAW_BODY_MIN = 1 << 16


class Connection(asyncio.Protocol):
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
        self.queue: deque[Exchange] = deque()
        self.current: Exchange | None = None
        #: the request being parsed (its head, then its body)
        self._parsing: Exchange | None = None
        self._url: list[bytes] = []
        self._headers: list[tuple[bytes, bytes]] = []
        self._raw_names: list[bytes] | None = None
        self._head_bytes = 0
        self._refused = False
        #: a request that closes the connection has been read: nothing after it is parsed
        self._closing = False
        #: the server is shutting down: every request read from now on closes
        self._draining = False
        #: the data since the start of the request being read, while in its head (None
        #: when that start is not known), and how many requests began in it
        self._since: list[bytes] | None = None
        self._begun = 0
        self._advancing = False
        self._fd = -1
        self._client: tuple[str, int] | None = None
        self._local: tuple[str, int] | None = None
        #: (polling for the next request) the policy, when the last answer was sent
        #: (``time.perf_counter``), and whether the current request came quickly after it
        self._poll = server.next_request_poll
        self._answered = 0.0
        self._quick = False
        #: (direct answers) a descriptor of our own, the link, and who to tell at the end
        self._dup: socket.socket | None = None
        self._link: DirectLink | None = None
        self._closers: list[Callable[[], None]] = []

    # ---------------------------------------------------------------- transport events

    def connection_made(self, transport: Any) -> None:
        """A client connected: note its socket and addresses (``TCP_NODELAY`` on)."""
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
        """Parse what arrived (the callbacks below), then run what is complete."""
        if self._refused or self._closing:
            return  # (closing: what the client still sends is dropped)
        parsing = self._parsing
        if parsing is None:  # a request begins in ``data`` (kept until its head is read)
            self._since = [data]
            self._begun = 0
        elif not parsing.scope:
            if self._since is not None:
                self._since.append(data)
        else:
            self._since = None
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
        except httptools.HttpParserError as e:
            self._parse_error(e)
            return
        parsing = self._parsing
        if parsing is not None and not parsing.scope:
            # inside a request head (httptools keeps a header's value until it ends, so
            # count here what arrives, not in the callbacks)
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(HEAD_TOO_LARGE)
                return
        self.advance()
        parsing = self._parsing
        if parsing is not None and parsing.scope and parsing.scope.get(BODY_SINK) is not None:
            self._read_body_raw(parsing)

    def _read_body_raw(self, ex: Exchange) -> None:
        """When the rest of ``ex``'s body is large and its sink awaits exactly that, read
        it from the socket straight into the sink (:class:`_BodyReader`): none of the
        three copies of each piece on the way through the loop's read buffer, a
        ``bytes`` object and the parser's ``on_body`` slice."""
        sink: BodySink = ex.scope[BODY_SINK]
        left = ex.request_body_left()
        if left < RAW_BODY_MIN or ex.chunks or sink.closed or ex.finished:
            return
        if len(sink.view) - sink.filled != left or self.lost or self._closing:
            return
        self.transport.set_protocol(_BodyReader(self, ex, sink))

    def _raw_body_done(self) -> None:
        """(:class:`_BodyReader`) the body being read is whole: parse on with a fresh parser
        (the old one is still inside that body)."""
        self.transport.set_protocol(self)
        self.parser = httptools.HttpRequestParser(self)
        self.on_message_complete()
        self.advance()

    def connection_lost(self, exc: Exception | None) -> None:
        """The client is gone: tell the request in progress, drop the ones queued."""
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

    def _parse_error(self, error: httptools.HttpParserError) -> None:
        """The parser refused what arrived: bytes after a request that closes the
        connection are dropped (that request is answered, then the connection closes);
        a head with ``Content-Length`` given more than once, all the same number, is
        parsed again with one (both as Triton does); anything else gets a 400."""
        if self._closing:
            self.advance()
            return
        since = self._since
        if str(error) == "Duplicate Content-Length" and since is not None:
            fixed = one_content_length(b"".join(since), self._begun - 1)
            if fixed is not None:
                self.parser = httptools.HttpRequestParser(self)
                self._parsing = None
                self.data_received(fixed)
                return
        self._refuse(BAD_REQUEST)

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
        """Close when idle; a request in progress, or one sent after it, finishes first
        (and closes)."""
        self._draining = True
        if self.current is None and not self.queue and self._parsing is None:
            self.transport.close()
            return
        for ex in self.queue:
            ex.keep_alive = False

    # ---------------------------------------------------------------- flow control

    def pause_writing(self) -> None:
        """The transport's write buffer is full: ``send`` waits (:meth:`drained`)."""
        self.write_paused = True

    def resume_writing(self) -> None:
        """The transport takes more again."""
        self.write_paused = False
        self._wake_drain()

    def _wake_drain(self) -> None:
        """Let a :meth:`drained` waiting go on."""
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    async def drained(self) -> None:
        """Wait until the transport takes more (or the client is gone)."""
        while self.write_paused and not self.lost:
            self._drain = asyncio.get_running_loop().create_future()
            try:
                await self._drain
            finally:
                self._drain = None

    def write(self, data: bytes) -> None:
        """Write ``data`` on the connection."""
        self.transport.write(data)

    def write_parts(self, parts: list[Any]) -> None:
        """Write ``parts`` (buffers) on the connection, in order, without joining them."""
        if len(parts) == 1:
            self.transport.write(parts[0])
        else:
            self.transport.writelines(parts)

    def pause_reading(self) -> None:
        """Stop reading from the client (until :meth:`resume_reading`)."""
        if not self._read_paused and not self.lost:
            self._read_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        """Read from the client again."""
        if self._read_paused and not self.lost:
            self._read_paused = False
            self.transport.resume_reading()

    def _pause_for_body(self) -> bool:
        """Whether a request has too much unread body buffered to read on."""
        return any(ex.buffered > BUFFER_HIGH_WATER for ex in self.queue)

    # ---------------------------------------------------------------- parser callbacks

    def on_message_begin(self) -> None:
        """A request begins."""
        self._begun += 1
        self._parsing = Exchange(self)
        self._url = []
        self._headers = []
        self._raw_names = [] if self.server.keep_raw_header_names else None
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        """A piece of the request target."""
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """One request header."""
        self._headers.append((name.lower(), value))
        if self._raw_names is not None:
            self._raw_names.append(name)

    def on_headers_complete(self) -> None:
        """The request head is whole: the request is queued to run."""
        ex = self._parsing
        assert ex is not None
        urls = self._url
        url = urls[0] if len(urls) == 1 else b"".join(urls)
        ex.open(self.parser, url, self._headers, self._raw_names, self._local, self._client)
        if self._draining:
            ex.keep_alive = False
        poll = self._poll
        if poll is not None:
            # the client sends back to back: worth polling for its next request
            self._quick = poll.is_quick(self._answered)
        self.queue.append(ex)
        if len(self.queue) > 1:
            self.pause_reading()  # pipelining: one request ahead is enough

    def on_body(self, body: bytes) -> None:
        """A piece of the request body."""
        ex = self._parsing
        if ex is not None:
            ex.feed(body)

    def on_message_complete(self) -> None:
        """The request body is whole."""
        ex = self._parsing
        self._parsing = None
        if ex is not None:
            self._closing = not ex.keep_alive
            ex.end_of_body()

    # ---------------------------------------------------------------- running requests

    def advance(self) -> None:
        """Start the next request while none is running."""
        if self._advancing:
            return
        self._advancing = True
        try:
            while self.current is None and self.queue and not self.lost:
                ex = self.current = self.queue[0]
                ex.run(self.server)
        finally:
            self._advancing = False

    def response_done(self, ex: Exchange) -> None:
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
        poll = self._poll
        if poll is not None:
            if self.queue or not self._quick or not poll.admits(len(self.server.connections)):
                self._answered = time.perf_counter()
            else:
                # (from the loop, once what called this has returned: the rest of the
                # answered request's work is done before the poll, not after it)
                asyncio.get_running_loop().call_soon(self._poll_next, ex)
        if self.queue and not self._advancing:
            # the previous application ran as a task: start the next one from the loop
            asyncio.get_running_loop().call_soon(self.advance)

    def _poll_next(self, answered: Exchange) -> None:
        """Poll the open connections for a request for a moment (see :mod:`._poll`),
        unless another request is in progress meanwhile."""
        try:
            server = self.server
            connections = server.connections
            poll = self._poll
            if poll is None or server.active - answered.running or self.queue or self.lost:
                return
            if not poll.admits(len(connections)):
                return
            poll.wait([c._fd for c in connections])
        finally:
            self._answered = time.perf_counter()

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
            json_head, binary_head = direct_heads()
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
                return ex.drain_then_done()
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


class _BodyReader(asyncio.BufferedProtocol):
    """The protocol of a connection while the rest of a large request body is read into
    its :class:`BodySink`: the socket is read into the sink's memory itself, never past
    the body's end; then the :class:`Connection` takes over again. The connection's other
    events go to the connection."""

    __slots__ = ("conn", "end", "ex", "sink")

    def __init__(self, conn: Connection, ex: Exchange, sink: BodySink) -> None:
        self.conn = conn
        self.ex = ex
        self.sink = sink
        self.end = len(sink.view)

    def get_buffer(self, sizehint: int) -> memoryview:
        sink = self.sink
        return sink.view[sink.filled : self.end]

    def buffer_updated(self, nbytes: int) -> None:
        sink = self.sink
        sink.filled += nbytes
        self.ex.body_seen += nbytes
        if sink.filled >= self.end:
            self.conn._raw_body_done()

    def eof_received(self) -> bool | None:
        return self.conn.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.connection_lost(exc)

    def pause_writing(self) -> None:
        self.conn.pause_writing()

    def resume_writing(self) -> None:
        self.conn.resume_writing()
