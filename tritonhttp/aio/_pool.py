"""The default asyncio transport: keep-alive connections driven by the sans-IO core.

Chosen by measurement (docs/performance.md): each connection is an
``asyncio.BufferedProtocol`` feeding the same httptools-based ``ResponseReader`` as the
sync client; once ``Content-Length`` is known the event loop receives the body straight
into the buffer the outputs will be numpy views of. No third-party HTTP library.

* ``limit`` bounds the number of open connections (None: no bound); a call waits for a
  free one (up to the pool timeout).
* Idle connections the server closed (or wrote to) are noticed and dropped.
* Only a GET is retried, once, on a fresh connection, when a reused connection failed
  before any byte of the answer arrived.
* A connection is returned to the pool only after a complete answer that allows
  keep-alive; after a timeout, a cancellation or an error it is aborted.
* The pool belongs to the event loop that first uses it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl as _ssl
import sys
from collections.abc import Sequence
from typing import Any, cast

from .._errors import (
    ClientClosedError,
    ConnectTimeout,
    InferenceServerException,
    PoolTimeout,
    ReadTimeout,
    TimeoutError_,
    TransportError,
    _Reset,
    transport_error,
)
from .._protocol import Buffer, Prepared, Response, ResponseReader, ServerAddress
from ._timeouts import Limits

__all__ = ["ConnectionPool", "PoolStream"]

_SCRATCH = 65536
_JOIN_LIMIT = 65536  # bodies up to this size are written with the head in one piece
_WRITELINES_SENDS = sys.version_info >= (3, 12)  # writelines uses sendmsg (no join)
_HIGH_WATER = 1 << 20  # stream: stop reading while this much is waiting for the consumer
_EARLY = 0.001  # a timer may fire this much before its time


def _write(transport: asyncio.Transport, head: bytes, body: Sequence[Buffer], size: int) -> None:
    if not body:
        transport.write(head)
    elif size <= _JOIN_LIMIT:
        transport.write(b"".join([head, *body]))
    elif _WRITELINES_SENDS:
        transport.writelines([head, *body])
    else:
        transport.write(head)
        for buf in body:
            transport.write(buf)


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive connection; serves one request (or stream) at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, url: str) -> None:
        self._loop = loop
        self._url = url
        self.transport: asyncio.Transport | None = None
        self.reader: ResponseReader | None = None
        self._own_reader = ResponseReader(reusable=True)  # its responses, one after another
        self.waiter: asyncio.Future[None] | None = None
        self.error: BaseException | None = None
        self.broken = False  # closed, reset, or got bytes while idle
        self.lost: asyncio.Future[None] = loop.create_future()
        self.activity = 0.0  # loop.time() of the last bytes received (read timeout)
        self._stream = False
        self._paused = False
        self._scratch = bytearray(_SCRATCH)
        self._view = memoryview(self._scratch)
        self._in_window = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0  # loop time the armed timer fires at
        self._deadline: float | None = None
        self._read_timeout: float | None = None

    # -- asyncio callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # not an isinstance check: uvloop's transports do not derive from asyncio's
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview | bytearray:
        reader = self.reader
        if reader is not None:
            window = reader.body_window()
            if window is not None:
                self._in_window = True
                return window
        self._in_window = False
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        reader = self.reader
        if reader is None:  # bytes on an idle connection: never reuse it
            self.broken = True
            if self.transport is not None:
                self.transport.abort()
            return
        self.activity = self._loop.time()
        try:
            if self._in_window:
                reader.body_received(nbytes)
            else:
                reader.feed(self._view[:nbytes])
        except TransportError as e:
            self.fail(e)
            return
        if reader.complete:
            self._wake()
        elif self._stream and reader.head_complete:
            waiter = self.waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
            elif (
                reader.pending_size > _HIGH_WATER
                and not self._paused
                and self.transport is not None
            ):
                self._paused = True  # the consumer is far behind: stop reading for now
                self.transport.pause_reading()

    def eof_received(self) -> bool:
        self.broken = True
        reader = self.reader
        if reader is not None:
            try:
                reader.eof()
            except TransportError as e:
                self.fail(e)
                return False
            self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.broken = True
        self._cancel_timer()
        reader = self.reader
        if reader is not None and not reader.complete and self.error is None:
            if exc is None:
                error: TransportError = _Reset(
                    "the server closed the connection in the middle of a response"
                    if reader.started
                    else "the server closed the connection without answering"
                )
            else:
                error = transport_error(exc, self._url, connecting=False)
            self.error = error
            waiter = self.waiter
            if waiter is not None and not waiter.done():
                waiter.set_exception(error)
        if not self.lost.done():
            self.lost.set_result(None)

    # -- used by the pool ----------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def fail(self, error: BaseException) -> None:
        """End the exchange with ``error`` and abort the connection."""
        self.broken = True
        if self.error is None:
            self.error = error
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self._cancel_timer()
        if self.transport is not None:
            self.transport.abort()

    def next_reader(self, stream: bool) -> ResponseReader:
        """The connection's reader, ready for its next response."""
        reader = self._own_reader
        reader.reset(stream)
        return reader

    def begin(self, reader: ResponseReader, stream: bool) -> asyncio.Future[None]:
        """Start an exchange; the future completes when the answer (or its head) is in."""
        self.reader = reader
        self._stream = stream
        self.error = None
        self.activity = self._loop.time()
        waiter: asyncio.Future[None] = self._loop.create_future()
        self.waiter = waiter
        return waiter

    def wait_more(self) -> asyncio.Future[None]:
        """Stream: a future completed by the next bytes (reading resumed if paused)."""
        waiter: asyncio.Future[None] = self._loop.create_future()
        self.waiter = waiter
        self.activity = self._loop.time()
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return waiter

    def finish(self) -> None:
        """The exchange is over (the connection may serve another)."""
        self.reader = None
        self.waiter = None
        self._stream = False
        self._deadline = self._read_timeout = None  # an armed timer finds nothing to do
        if self._paused and self.transport is not None and not self.broken:
            self._paused = False
            self.transport.resume_reading()

    def watch(self, deadline: float | None, read_timeout: float | None) -> None:
        """Fail the exchange at ``deadline`` or after ``read_timeout`` s of silence.

        One timer serves the connection's exchanges one after another: a timer already
        armed for an earlier time is kept (when it fires it checks the exchange then in
        progress and arms itself again for what is left), so that an exchange usually
        costs no timer of its own.
        """
        self._deadline = deadline
        self._read_timeout = read_timeout
        if deadline is None and read_timeout is None:
            return
        when = self._when()
        timer = self._timer
        if timer is not None:
            if self._timer_at <= when:
                return
            timer.cancel()
        self._timer = self._loop.call_at(when, self._on_timer)
        self._timer_at = when

    def _when(self) -> float:
        when = self._deadline
        if self._read_timeout is not None:
            quiet_until = self.activity + self._read_timeout
            when = quiet_until if when is None else min(when, quiet_until)
        assert when is not None
        return when

    def _on_timer(self) -> None:
        self._timer = None
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        if self._deadline is None and self._read_timeout is None:
            return
        now = self._loop.time() + _EARLY
        if self._deadline is not None and now >= self._deadline:
            self.fail(ReadTimeout(f"failed to talk to {self._url}: timed out (request deadline)"))
            return
        read = self._read_timeout
        if read is not None and now >= self.activity + read:
            self.fail(
                ReadTimeout(f"failed to talk to {self._url}: timed out (nothing read for {read} s)")
            )
            return
        when = self._when()
        self._timer = self._loop.call_at(when, self._on_timer)
        self._timer_at = when

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        self.broken = True
        self._cancel_timer()
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.broken = True
        self._cancel_timer()
        if self.transport is not None:
            self.transport.abort()


class _Retry(Exception):
    """A reused connection failed before any answer; the GET may be sent again."""


class ConnectionPool:
    """Keep-alive connections to one server, for the event loop that first uses it."""

    def __init__(
        self,
        address: ServerAddress,
        limit: int | None,
        ssl_context: _ssl.SSLContext | None,
    ) -> None:
        self._address = address
        self._url = address.url
        self._limit = limit
        self._free = limit or 0
        self._ssl = ssl_context
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        #: connections being opened (``aclose`` cancels them)
        self._opening: set[asyncio.Future[Any]] = set()
        self._closed = False

    @property
    def open_connections(self) -> int:
        """Connections currently open (idle or busy)."""
        return len(self._all)

    # -- loop, slots, connections --------------------------------------------------------

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return loop
        if self._closed:
            raise ClientClosedError("the client has been closed")
        old = self._loop
        if old is not None and self._all and not old.is_closed():
            raise InferenceServerException(
                msg="this client is in use by another event loop; create one client per event loop"
            )
        # first use, or the previous loop is gone (its connections went with it)
        self._loop = loop
        self._idle = []
        self._all = set()
        self._waiters = collections.deque()
        self._free = self._limit or 0
        return loop

    async def _acquire(self, loop: asyncio.AbstractEventLoop, timeout: float | None) -> None:
        if self._limit is None:
            return
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        if timeout is not None and timeout <= 0:
            raise PoolTimeout(f"no free connection to {self._url} (pool timeout)")
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = None
        if timeout is not None:
            timer = loop.call_later(timeout, self._expire, waiter, timeout)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release()  # the slot was handed over just before: pass it on
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _expire(self, waiter: asyncio.Future[None], timeout: float) -> None:
        if not waiter.done():
            waiter.set_exception(
                PoolTimeout(f"no free connection to {self._url} within {timeout} s (pool timeout)")
            )

    def _release(self) -> None:
        if self._limit is None:
            return
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot goes straight to the next in line
                return
        self._free += 1

    def _checkout(self) -> _Connection | None:
        idle = self._idle
        while idle:
            conn = idle.pop()
            if not conn.broken:
                return conn
            conn.close()
            self._all.discard(conn)
        return None

    def _checkin(self, conn: _Connection, keep_alive: bool) -> None:
        conn.finish()
        if keep_alive and not conn.broken and not self._closed:
            self._idle.append(conn)
        else:
            conn.close()
            self._all.discard(conn)

    def _discard(self, conn: _Connection) -> None:
        conn.abort()
        self._all.discard(conn)

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, limits: Limits, deadline: float | None
    ) -> _Connection:
        if self._closed:
            raise ClientClosedError("the client has been closed")
        timeout = limits.connect
        if deadline is not None:
            remaining = deadline - loop.time()
            timeout = remaining if timeout is None else min(timeout, remaining)
        address = self._address
        conn = _Connection(loop, self._url)
        if timeout is not None and timeout <= 0:
            raise ConnectTimeout(f"failed to connect to {self._url}: timed out")
        connecting = asyncio.ensure_future(
            loop.create_connection(
                lambda: conn,
                address.host,
                address.port,
                ssl=self._ssl,
                server_hostname=address.host if self._ssl is not None else None,
            )
        )
        self._opening.add(connecting)
        try:
            await (connecting if timeout is None else asyncio.wait_for(connecting, timeout))
        except asyncio.TimeoutError:
            raise ConnectTimeout(f"failed to connect to {self._url}: timed out") from None
        except OSError as e:
            raise transport_error(e, self._url, connecting=True) from e
        except asyncio.CancelledError:
            if self._closed and connecting.cancelled() and not _cancelling():
                raise ClientClosedError("the client has been closed") from None
            raise
        finally:
            self._opening.discard(connecting)
        if self._closed:  # closed while connecting
            conn.abort()
            raise ClientClosedError("the client has been closed")
        self._all.add(conn)
        return conn

    def _error(self, cause: BaseException) -> BaseException:
        if isinstance(cause, (TimeoutError_, ClientClosedError)):
            return cause
        if isinstance(cause, TransportError):
            if self._url in str(cause):
                return cause
            return type(cause)(f"{cause.message()} ({self._url})")
        return cause

    # -- requests ------------------------------------------------------------------------

    async def request(self, prepared: Prepared, limits: Limits) -> Response:
        """Send a prepared request; the complete response."""
        conn, reader = await self._start(prepared, limits, False)
        try:
            response = reader.response()
            self._checkin(conn, response.keep_alive)
            return response
        finally:
            self._release()

    async def open_stream(self, prepared: Prepared, limits: Limits) -> PoolStream:
        """Send a prepared request; a :class:`PoolStream` once the answer's head is in."""
        conn, reader = await self._start(prepared, limits, True)
        return PoolStream(self, conn, reader, limits.read)

    async def _start(
        self, prepared: Prepared, limits: Limits, stream: bool
    ) -> tuple[_Connection, ResponseReader]:
        """Take a slot and a connection, send ``prepared`` and wait for the answer (or,
        for a stream, its head).

        Returns the connection used and its reader; the slot stays taken (the caller
        gives it back), except when this raises.
        """
        if self._closed:
            raise ClientClosedError("the client has been closed")
        loop = self._bind()
        deadline = None if limits.total is None else loop.time() + limits.total
        await self._acquire(loop, _remaining(loop, limits.pool, deadline))
        try:
            conn = self._checkout()
            reused = conn is not None
            if conn is None:
                conn = await self._connect(loop, limits, deadline)
            try:
                reader = await self._exchange(conn, prepared, limits, deadline, reused, stream)
            except _Retry:
                conn = await self._connect(loop, limits, deadline)
                reader = await self._exchange(conn, prepared, limits, deadline, False, stream)
        except BaseException:
            self._release()
            raise
        return conn, reader

    async def _exchange(
        self,
        conn: _Connection,
        prepared: Prepared,
        limits: Limits,
        deadline: float | None,
        reused: bool,
        stream: bool,
    ) -> ResponseReader:
        reader = conn.next_reader(stream)
        waiter = conn.begin(reader, stream)
        transport = conn.transport
        assert transport is not None
        try:
            _write(transport, prepared.head, prepared.body, prepared.size)
            conn.watch(deadline, limits.read)
            await waiter
        except TransportError as e:
            self._discard(conn)
            if (
                reused
                and prepared.idempotent
                and not reader.started
                and not isinstance(e, TimeoutError_)
            ):
                raise _Retry from e
            raise self._error(e) from None
        except BaseException:  # cancelled, or an error while writing
            self._discard(conn)
            raise
        conn.watch(None, None)
        return reader

    async def aclose(self) -> None:
        """Close every connection (in-flight calls fail with ``ClientClosedError``)."""
        self._closed = True
        connections = list(self._all)
        self._all.clear()
        self._idle.clear()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(ClientClosedError("the client has been closed"))
        self._waiters.clear()
        for opening in self._opening:
            opening.cancel()
        for conn in connections:
            if conn.reader is not None:
                conn.fail(ClientClosedError("the client has been closed"))
            else:
                conn.close()
        lost = [c.lost for c in connections if not c.lost.done()]
        if lost and self._loop is asyncio.get_running_loop():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*lost), 5.0)

    def abort_all(self) -> None:
        """Abort every connection now (no waiting; for garbage collection)."""
        self._closed = True
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        for conn in list(self._all):
            with contextlib.suppress(Exception):
                conn.abort()
        self._all.clear()
        self._idle.clear()


def _cancelling() -> bool:
    """Whether the current task itself is being cancelled (Python 3.11 and later tell;
    earlier ones do not, and a close is taken for the cause)."""
    task = asyncio.current_task()
    count = getattr(task, "cancelling", None)
    return bool(count()) if count is not None else False


def _remaining(
    loop: asyncio.AbstractEventLoop, timeout: float | None, deadline: float | None
) -> float | None:
    if deadline is None:
        return timeout
    remaining = deadline - loop.time()
    return remaining if timeout is None else min(timeout, remaining)


class PoolStream:
    """An answer read as it arrives; holds its connection and pool slot until closed."""

    def __init__(
        self,
        pool: ConnectionPool,
        conn: _Connection,
        reader: ResponseReader,
        read_timeout: float | None,
    ) -> None:
        self._pool = pool
        self._conn = conn
        self._reader = reader
        self._read_timeout = read_timeout
        self._done = False
        self.head = reader.head()

    async def read(self) -> bytes:
        """The next piece of the body; ``b""`` at its end.

        Raises a ``TransportError`` (the stream is then closed) when the connection
        breaks, the server stops in the middle, or the read timeout expires.
        """
        reader = self._reader
        conn = self._conn
        while True:
            data = reader.take_body()
            if data or reader.complete or self._done:
                return data
            if conn.error is not None:
                error = conn.error
                self.abort()
                raise self._pool._error(error) from None
            waiter = conn.wait_more()
            conn.watch(None, self._read_timeout)
            try:
                await waiter
            except TransportError as e:
                self.abort()
                raise self._pool._error(e) from None
            except BaseException:
                self.abort()
                raise
            finally:
                conn.watch(None, None)

    async def aclose(self) -> None:
        """Release the connection: back to the pool after a complete answer, else aborted."""
        self.close()

    def close(self) -> None:
        """:meth:`aclose` without awaiting (it never waits)."""
        if self._done:
            return
        self._done = True
        reader = self._reader
        try:
            if reader.complete and self._conn.error is None:
                self._pool._checkin(self._conn, reader.keep_alive)
            else:
                self._pool._discard(self._conn)
        finally:
            self._pool._release()

    def abort(self) -> None:
        """Release the connection, aborting it (idempotent)."""
        if self._done:
            return
        self._done = True
        try:
            self._pool._discard(self._conn)
        finally:
            self._pool._release()
