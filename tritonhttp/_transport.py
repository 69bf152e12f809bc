"""Blocking transport: a thread-safe pool of keep-alive sockets under the sans-IO core.

Chosen by measurement (see docs/performance.md): a plain socket writing the request head
and the tensor buffers with one ``sendmsg`` (no concatenation), the response head parsed
by httptools, and the body received straight into its final buffer with ``recv_into``.

* ``concurrency`` bounds the number of open connections; a request waits for a free one.
* Idle connections are checked before reuse (a server that closed one is noticed).
* One retry on a fresh connection, only when a reused connection failed before any byte
  of the answer arrived and the request cannot have been processed: the request is
  idempotent (GET) or was not completely sent.
* On Linux the network timeout of a plain TCP socket is kept by the kernel, so that a
  request is three system calls (the idle check, ``sendmsg``, ``recv_into``).
* A request may carry a :class:`Cancel`: another thread can then stop it at once.
* :meth:`ConnectionPool.close` shuts down the sockets of the exchanges in progress:
  every call, ``InFlight`` response and stream still using the pool ends at once with
  ``ClientClosedError``. The pool knows every connection it opened (a set changed only
  when a connection is opened or closed, so a request costs nothing more).
* :meth:`ConnectionPool.send_now` sends a small request from the caller's thread on an
  idle connection and leaves its response in the socket until someone asks for it
  (:class:`InFlight`): ``async_infer`` without a thread hop. A thread that needs a
  connection while every one is held that way reads the oldest such response first.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import queue
import select
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ._errors import ClientClosedError, RequestCancelled, TransportError, transport_error
from ._protocol import Buffer, Response, ResponseReader, ServerAddress

__all__ = ["Cancel", "ConnectionPool", "InFlight", "ResponseStream", "make_ssl_context"]

_T = TypeVar("_T")

_IOV_MAX = 512  # well below every platform's IOV_MAX
_SCRATCH = 65536
_COALESCE = 16384  # TLS: small buffers are joined into one record
_HAS_POLL = hasattr(select, "poll")
#: the largest request body :meth:`ConnectionPool.send_now` sends from the caller's thread
#: (far below a socket's send buffer, so the send never waits for the server)
INLINE_MAX = 16384
_SLOT_WAIT = 0.05  # seconds between looks for in-flight responses to read while waiting


def make_ssl_context(
    ssl_options: Mapping[str, Any] | None,
    ssl_context_factory: Callable[..., ssl.SSLContext] | None,
    insecure: bool,
) -> ssl.SSLContext:
    """An ``ssl.SSLContext`` configured like tritonclient's (geventhttpclient's) options.

    ``ssl_options`` keys: ``ca_certs``, ``certfile`` + ``keyfile``, ``ciphers``,
    ``options``, ``verify_flags`` (and ``cert_reqs``, which tritonclient ignores; here
    ``ssl.CERT_NONE`` disables verification). ``ssl_context_factory`` is called with
    ``cafile=`` (or without arguments if it does not take it). ``insecure`` turns off the
    host-name check; the certificate chain is still verified.
    """
    options = dict(ssl_options or {})
    ca_certs = options.get("ca_certs")
    factory = ssl_context_factory or ssl.create_default_context
    try:
        context = factory(cafile=ca_certs)
    except TypeError:
        context = factory()
        if ca_certs is not None:
            context.load_verify_locations(cafile=ca_certs)
    context.check_hostname = not insecure
    if not insecure:
        context.verify_mode = ssl.CERT_REQUIRED
    if "certfile" in options and "keyfile" in options:
        context.load_cert_chain(certfile=options["certfile"], keyfile=options["keyfile"])
    if "ciphers" in options:
        context.set_ciphers(options["ciphers"])
    for name in ("options", "verify_flags"):
        if name in options:
            setattr(context, name, options[name])
    if options.get("cert_reqs") == ssl.CERT_NONE:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


_KERNEL_TIMEOUTS = hasattr(socket, "SO_RCVTIMEO") and sys.platform == "linux"


_CLOSE_CHECK_S = 0.05  # how often a connecting call looks whether its pool was closed


def _dial(host: str, port: int, timeout: float | None, closed: Callable[[], bool]) -> socket.socket:
    """What ``socket.create_connection`` does (each address in turn, ``timeout`` for
    each, the first error raised when none answers), waiting for the handshake in short
    slices: a pool closed meanwhile ends the call with ``ClientClosedError`` at once,
    where a blocking ``connect`` would wait out its timeout."""
    errors: list[OSError] = []
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            code = sock.connect_ex(address)
            if code:
                _handshake(sock, code, timeout, closed)
            sock.setblocking(True)
            return sock
        except OSError as e:
            sock.close()
            errors.append(e)
        except BaseException:
            sock.close()
            raise
    raise errors[0] if errors else OSError("getaddrinfo returns an empty list")


def _handshake(
    sock: socket.socket, code: int, timeout: float | None, closed: Callable[[], bool]
) -> None:
    """Wait for a non-blocking ``connect`` that answered ``code`` to complete."""
    if code not in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
        raise OSError(code, os.strerror(code))
    deadline = None if timeout is None else time.monotonic() + timeout
    poller = None
    if _HAS_POLL:
        poller = select.poll()
        poller.register(sock, select.POLLOUT)
    while True:
        wait = _CLOSE_CHECK_S
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                raise TimeoutError("timed out")
        if poller is not None:
            done = bool(poller.poll(max(1, round(wait * 1000))))
        else:
            done = any(select.select([], [sock], [sock], wait)[1:])
        if done:
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code))
            return
        if closed():
            raise ClientClosedError("the client has been closed (connection pool closed)")


def _set_network_timeout(sock: socket.socket, timeout: float | None) -> None:
    """Limit each send and receive on a plain TCP socket to ``timeout`` seconds.

    On Linux the kernel keeps the limit (``SO_RCVTIMEO``/``SO_SNDTIMEO`` on a blocking
    socket: a call that runs out fails with ``EAGAIN``, turned into ``TimeoutError`` by
    :func:`_timed_out`), so a send or receive is one system call; a Python-level socket
    timeout would add a ``poll`` before each. Elsewhere, and for TLS, the socket's own
    timeout is used.
    """
    if not _KERNEL_TIMEOUTS or timeout is None or timeout <= 0 or timeout > 1e9:
        sock.settimeout(timeout)
        return
    sock.settimeout(None)
    seconds = int(timeout)
    micros = round((timeout - seconds) * 1e6)
    if micros >= 1_000_000:
        seconds, micros = seconds + 1, 0
    elif seconds == 0 and micros == 0:
        micros = 1  # (0 would mean no limit)
    value = struct.pack("ll", seconds, micros)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


def _timed_out(error: OSError) -> OSError:
    """A kernel send/receive timeout (``EAGAIN`` on a blocking socket) as ``TimeoutError``."""
    if isinstance(error, BlockingIOError):
        return TimeoutError("timed out")
    return error


class _Failure(Exception):
    """A failed exchange, with what is known about how far it got."""

    def __init__(self, cause: BaseException, sent_all: bool, answered: bool) -> None:
        super().__init__(cause)
        self.cause = cause
        self.sent_all = sent_all
        self.answered = answered


class Cancel:
    """Lets any thread stop one request: the socket it uses is shut down at once.

    The pool attaches the request's connection while the exchange runs; :meth:`cancel`
    shuts that socket down (the exchange then fails with ``RequestCancelled`` and the
    connection is closed, never reused), or makes a request not yet sent fail before
    it is.
    """

    __slots__ = ("_conn", "_lock", "_wake", "cancelled")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: _Connection | None = None
        self._wake: threading.Event | None = None  # made by the first sleep()
        self.cancelled = False

    def cancel(self) -> None:
        """Stop the request (idempotent; no effect once it is over)."""
        with self._lock:
            self.cancelled = True
            conn = self._conn
            wake = self._wake
        if conn is not None:
            conn.shutdown()
        if wake is not None:
            wake.set()

    def wake(self) -> None:
        """End the current (or next) :meth:`sleep` at once without cancelling the
        request (the client was closed)."""
        with self._lock:
            if self._wake is None:
                self._wake = threading.Event()
            wake = self._wake
        wake.set()

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` (a retry's back-off) unless the request is cancelled
        meanwhile: whether it was (then at once)."""
        with self._lock:
            if self.cancelled:
                return True
            if self._wake is None:
                self._wake = threading.Event()
            wake = self._wake
        return wake.wait(seconds)

    def attach(self, conn: _Connection | None) -> None:
        """The exchange runs on ``conn`` from now on (None: it is over)."""
        with self._lock:
            if conn is not None and self.cancelled:
                raise RequestCancelled("the request was cancelled")
            self._conn = conn


class _Connection:
    """One keep-alive socket; used by one thread at a time (the pool guarantees it)."""

    __slots__ = ("_poller", "_reader", "_scratch", "_sock", "_tls", "_view")

    def __init__(self, sock: socket.socket, tls: bool) -> None:
        self._sock = sock
        self._reader = ResponseReader(reusable=True)  # its responses, one after another
        self._tls = tls
        self._scratch = bytearray(_SCRATCH)
        self._view = memoryview(self._scratch)
        self._poller: Any = None
        if _HAS_POLL:
            self._poller = select.poll()
            self._poller.register(sock, select.POLLIN)

    def is_stale(self) -> bool:
        """Whether the idle socket became readable (closed by the server, or junk)."""
        return self.readable(0.0)

    def readable(self, timeout: float) -> bool:
        """Whether data (or the end of the stream) arrives within ``timeout`` seconds."""
        try:
            if self._tls and self._sock.pending():  # type: ignore[attr-defined]
                return True
            if self._poller is not None:
                return bool(self._poller.poll(max(0, round(timeout * 1000))))
            readable, _, _ = select.select([self._sock], [], [], max(0.0, timeout))
            return bool(readable)
        except (OSError, ValueError):
            return True  # closed meanwhile: reading tells what happened

    def exchange(self, head: bytes, body: Sequence[Buffer], size: int) -> Response:
        """Send one request and read its response (raises :class:`_Failure`)."""
        sent_all = False
        reader = self._reader
        reader.reset()
        try:
            if self._send_request(head, body, size, reader):
                sent_all = True
                self._receive(reader)
            return reader.response()
        except OSError as e:
            cause = _timed_out(e)
            raise _Failure(cause, sent_all, reader.started) from cause
        except TransportError as e:
            raise _Failure(e, sent_all, reader.started) from e

    def start(self, head: bytes, body: Sequence[Buffer], size: int) -> ResponseReader:
        """Send one request and read until its response head is complete (for streams).

        Raises :class:`_Failure`; the returned reader is in stream mode.
        """
        sent_all = False
        reader = self._reader
        reader.reset(stream=True)
        try:
            if self._send_request(head, body, size, reader):
                sent_all = True
                while not reader.head_complete:
                    self.read_once(reader)
            return reader
        except OSError as e:
            cause = _timed_out(e)
            raise _Failure(cause, sent_all, reader.started) from cause
        except TransportError as e:
            raise _Failure(e, sent_all, reader.started) from e

    def _send_request(
        self, head: bytes, body: Sequence[Buffer], size: int, reader: ResponseReader
    ) -> bool:
        """Send the whole request: True; False when the server broke the connection but
        had answered early (e.g. an error before reading a large body): ``reader`` then
        holds that whole answer, and the connection is not reused.
        """
        try:
            if self._tls:
                self._send_tls(head, body)
            else:
                self._send(head, body, len(head) + size)
        except (BrokenPipeError, ConnectionResetError) as send_error:
            if not self._early_answer(reader):
                raise send_error from None
            return False
        return True

    def _early_answer(self, reader: ResponseReader) -> bool:
        """Whether the server answered before it closed (the answer is then in ``reader``)."""
        try:
            self._receive(reader)
        except (OSError, TransportError):
            return False
        reader.forbid_reuse()  # the server stopped reading the request
        return True

    def read_once(self, reader: ResponseReader) -> None:
        """One receive into ``reader`` (``eof()`` when the server closed)."""
        n = self._sock.recv_into(self._scratch)
        if n:
            reader.feed(self._view[:n])
        else:
            reader.eof()

    def _receive(self, reader: ResponseReader) -> None:
        sock = self._sock
        view = self._view
        while not reader.complete:
            window = reader.body_window()
            if window is not None:
                n = sock.recv_into(window)
                if n:
                    reader.body_received(n)
                    continue
            else:
                n = sock.recv_into(self._scratch)
                if n:
                    reader.feed(view[:n])
                    continue
            reader.eof()

    def _send(self, head: bytes, body: Sequence[Buffer], total: int) -> None:
        sock = self._sock
        parts: list[Any] = [head, *body]
        count = len(parts)
        sent = sock.sendmsg(parts if count <= _IOV_MAX else parts[:_IOV_MAX])
        if sent == total:
            return
        # Partial send (large bodies): continue from where the kernel stopped.
        i = 0
        while True:
            while i < count and sent >= len(parts[i]):
                sent -= len(parts[i])
                i += 1
            if i == count:
                return
            if sent:
                parts[i] = memoryview(parts[i])[sent:]
            sent = sock.sendmsg(parts[i : i + _IOV_MAX])

    def _send_tls(self, head: bytes, body: Sequence[Buffer]) -> None:
        sock = self._sock
        pending: list[Buffer] = [head]
        pending_size = len(head)
        for buf in body:
            n = len(buf)
            if n < _COALESCE:
                pending.append(buf)
                pending_size += n
                continue
            if pending:
                sock.sendall(b"".join(pending))
                pending, pending_size = [], 0
            sock.sendall(buf)
        if pending:
            sock.sendall(b"".join(pending))

    def shutdown(self) -> None:
        """Stop the exchange in progress from another thread (its receive returns)."""
        with contextlib.suppress(OSError, ValueError):
            socket.socket.shutdown(self._sock, socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()


class ConnectionPool:
    """At most ``size`` keep-alive connections to one server, shared by all threads."""

    def __init__(
        self,
        address: ServerAddress,
        size: int,
        connection_timeout: float | None,
        network_timeout: float | None,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"concurrency must be a positive integer, got {size!r}")
        self._address = address
        self._url = address.url
        self._connection_timeout = connection_timeout
        self._network_timeout = network_timeout
        self._ssl_context = ssl_context
        self._server_hostname = server_hostname or address.host
        self._slots: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(size):
            self._slots.put(None)
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()  # idle or in use; changed under _lock
        self._inflight: collections.deque[InFlight] = collections.deque()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def request(
        self,
        head: bytes,
        body: Sequence[Buffer],
        size: int,
        *,
        idempotent: bool,
        cancel: Cancel | None = None,
    ) -> Response:
        """Send a request (head bytes + body buffers of ``size`` bytes); the response.

        Raises a ``TransportError`` subclass naming the server URL when no response
        could be obtained, ``ClientClosedError`` after :meth:`close`,
        ``RequestCancelled`` when ``cancel`` stopped it.
        """
        conn, response = self._start(lambda c: c.exchange(head, body, size), idempotent, cancel)
        try:
            self._checkin(conn, response.keep_alive)
        finally:
            self._slots.put(None)
        return response

    def open_stream(
        self, head: bytes, body: Sequence[Buffer], size: int, *, idempotent: bool
    ) -> ResponseStream:
        """Send a request and return once the response head is in; the body is read
        piece by piece from the returned :class:`ResponseStream` (which holds the
        connection until it is closed). Errors as for :meth:`request`.
        """
        conn, reader = self._start(lambda c: c.start(head, body, size), idempotent)
        return ResponseStream(self, conn, reader)

    def _start(
        self, run: Callable[[_Connection], _T], idempotent: bool, cancel: Cancel | None = None
    ) -> tuple[_Connection, _T]:
        """Take a pool slot and a connection, and ``run`` the exchange on it.

        Returns the connection used and ``run``'s outcome; the slot stays taken (the
        caller gives it back), except when this raises.
        """
        if self._closed:
            raise ClientClosedError("the client has been closed (connection pool closed)")
        self._take_slot()
        try:
            conn = self._checkout()
            reused = conn is not None
            if conn is None:
                conn = self._connect()
            try:
                if cancel is None:
                    return self._exchange(conn, run, reused, idempotent, None)
                try:
                    cancel.attach(conn)
                    return self._exchange(conn, run, reused, idempotent, cancel)
                finally:
                    cancel.attach(None)
            except BaseException:
                self._drop(conn)  # e.g. KeyboardInterrupt mid-response: never reuse it
                raise
        except BaseException:
            self._slots.put(None)
            raise

    def _take_slot(self) -> None:
        """Wait for a free slot; while every slot is held by an :class:`InFlight`
        request, read the oldest one's response (which frees its slot)."""
        slots = self._slots
        while True:
            try:
                slots.get_nowait()
                return
            except queue.Empty:
                pass
            oldest = self._oldest_inflight()
            if oldest is not None:
                oldest.settle_quietly()
                continue
            if self._closed:  # e.g. every slot held by a stream nobody reads
                raise ClientClosedError("the client has been closed (connection pool closed)")
            try:
                slots.get(timeout=_SLOT_WAIT)
                return
            except queue.Empty:
                continue

    def send_now(
        self,
        size: int,
        prepare: Callable[[], tuple[bytes, Sequence[Buffer]]],
        cancel: Cancel,
    ) -> InFlight | None:
        """Send a small request from this thread on an idle connection and return at
        once. ``prepare()`` gives the request head and body (``size`` bytes); it is
        called only once a connection is held, and what it raises is raised here.

        None (nothing sent) when no slot or idle connection is free at once, the body
        is larger than :data:`INLINE_MAX`, or the connection failed while sending.
        """
        if size > INLINE_MAX or self._closed:
            return None
        try:
            self._slots.get_nowait()
        except queue.Empty:
            return None
        conn = self._checkout()
        if conn is None:
            self._slots.put(None)
            return None
        try:
            head, body = prepare()
        except BaseException:
            self._checkin(conn, True)
            self._slots.put(None)
            raise
        reader = conn._reader
        reader.reset()
        try:
            cancel.attach(conn)
            conn._send_request(head, body, size, reader)
        except (OSError, TransportError):
            cancel.attach(None)
            self._drop(conn)
            self._slots.put(None)
            return None
        flight = InFlight(self, conn, cancel)
        with self._lock:
            self._inflight.append(flight)
        return flight

    def settle_all(self) -> None:
        """Settle every :class:`InFlight` request: read the answers left in their sockets
        (after :meth:`close`: each ends at once)."""
        while (oldest := self._oldest_inflight()) is not None:
            oldest.settle_quietly()

    def _oldest_inflight(self) -> InFlight | None:
        with self._lock:
            return self._inflight[0] if self._inflight else None

    def _landed(self, flight: InFlight, conn: _Connection, keep_alive: bool | None) -> None:
        """``flight`` is over: its connection back (``keep_alive`` None: closed), its slot free."""
        with self._lock, contextlib.suppress(ValueError):
            self._inflight.remove(flight)
        try:
            if keep_alive is None:
                self._drop(conn)
            else:
                self._checkin(conn, keep_alive)
        finally:
            self._slots.put(None)

    def drop_inflight(self) -> None:
        """Close the connections of unread :class:`InFlight` requests (client abandoned)."""
        with self._lock:
            flights, self._inflight = list(self._inflight), collections.deque()
        for flight in flights:
            self._drop(flight._conn)

    def _exchange(
        self,
        conn: _Connection,
        run: Callable[[_Connection], _T],
        reused: bool,
        idempotent: bool,
        cancel: Cancel | None,
    ) -> tuple[_Connection, _T]:
        """``run(conn)``'s outcome, and the connection it used (a fresh one after a retry)."""
        try:
            return conn, run(conn)
        except _Failure as failure:
            self._drop(conn)
            cause = failure.cause
            if cancel is not None and cancel.cancelled:
                raise RequestCancelled("the request was cancelled") from None
            if self._closed:  # close() shut the socket down
                raise ClientClosedError("the client has been closed") from None
            retry = (
                reused
                and not failure.answered
                and not isinstance(cause, TimeoutError)
                and (idempotent or not failure.sent_all)
            )
            if not retry:
                raise self._error(cause) from cause
        fresh = self._connect()
        try:
            if cancel is not None:
                cancel.attach(fresh)
            outcome = run(fresh)
        except _Failure as again:
            self._drop(fresh)
            if cancel is not None and cancel.cancelled:
                raise RequestCancelled("the request was cancelled") from None
            if self._closed:
                raise ClientClosedError("the client has been closed") from None
            raise self._error(again.cause) from again.cause
        except BaseException:
            self._drop(fresh)
            raise
        return fresh, outcome

    def _error(self, cause: BaseException) -> TransportError:
        if isinstance(cause, TransportError):  # raised by the protocol core
            return type(cause)(f"{cause.message()} ({self._url})")
        return transport_error(cause, self._url, connecting=False)

    def _checkout(self) -> _Connection | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if not conn.is_stale():
                return conn
            self._drop(conn)

    def _checkin(self, conn: _Connection, keep_alive: bool) -> None:
        if keep_alive:
            with self._lock:
                if not self._closed:
                    self._idle.append(conn)
                    return
        self._drop(conn)

    def _drop(self, conn: _Connection) -> None:
        """Close ``conn`` for good (not an idle connection: those are in ``_idle``)."""
        with self._lock:
            self._open.discard(conn)
        conn.close()

    def _connect(self) -> _Connection:
        if self._closed:
            raise ClientClosedError("the client has been closed (connection pool closed)")
        address = self._address
        try:
            sock = _dial(address.host, address.port, self._connection_timeout, lambda: self._closed)
        except OSError as e:
            raise transport_error(e, self._url, connecting=True) from e
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._ssl_context is not None:
                sock = self._ssl_context.wrap_socket(sock, server_hostname=self._server_hostname)
                sock.settimeout(self._network_timeout)
            else:
                _set_network_timeout(sock, self._network_timeout)
        except OSError as e:
            sock.close()
            raise transport_error(e, self._url, connecting=True) from e
        conn = _Connection(sock, self._ssl_context is not None)
        with self._lock:
            if not self._closed:
                self._open.add(conn)
                return conn
        conn.close()  # closed while connecting
        raise ClientClosedError("the client has been closed (connection pool closed)")

    def close(self) -> None:
        """Close the idle connections, and shut down the sockets of the exchanges in
        progress: each ends at once with ``ClientClosedError`` (its thread closes the
        connection). Idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            busy = self._open.difference(idle)
            self._open.clear()
        for conn in idle:
            conn.close()
        for conn in busy:  # never closed here: another thread may be reading it
            conn.shutdown()


class InFlight:
    """A request sent by :meth:`ConnectionPool.send_now` whose response waits in its socket.

    :meth:`settle` reads it (once, from whichever thread comes first; later calls give
    the same outcome), returns the connection to the pool and frees its slot.
    """

    __slots__ = ("_cancel", "_conn", "_error", "_lock", "_pool", "_response", "done")

    def __init__(self, pool: ConnectionPool, conn: _Connection, cancel: Cancel) -> None:
        self._pool = pool
        self._conn = conn
        self._cancel = cancel
        self._lock = threading.Lock()
        self._response: Response | None = None
        self._error: BaseException | None = None
        self.done = False

    @property
    def address(self) -> ServerAddress:
        """The server the request went to."""
        return self._pool._address

    def arrived(self, timeout: float) -> bool:
        """Whether the response has started to arrive within ``timeout`` seconds."""
        return self.done or self._conn.readable(timeout)

    def settle(self) -> Response:
        """Read the response (raises the pool's ``TransportError``, or ``RequestCancelled``)."""
        with self._lock:
            if not self.done:
                try:
                    self._read()
                finally:
                    self.done = True
        if self._error is not None:
            raise self._error
        assert self._response is not None
        return self._response

    def settle_quietly(self) -> None:
        """:meth:`settle`, its outcome kept for whoever asks for it."""
        with contextlib.suppress(Exception):
            self.settle()

    def _read(self) -> None:
        conn = self._conn
        reader = conn._reader
        keep_alive: bool | None = None
        try:
            conn._receive(reader)
            if self._cancel.cancelled:  # stopped, though the answer had come: not used
                raise RequestCancelled("the request was cancelled")
            self._response = reader.response()
            keep_alive = self._response.keep_alive
        except (OSError, TransportError, RequestCancelled) as e:
            cause = _timed_out(e) if isinstance(e, OSError) else e
            if self._cancel.cancelled:
                self._error = RequestCancelled("the request was cancelled")
            elif self._pool._closed:
                self._error = ClientClosedError("the client has been closed")
            else:
                self._error = self._pool._error(cause)
        except BaseException:  # e.g. KeyboardInterrupt: the connection cannot be reused
            self._error = self._pool._error(ConnectionAbortedError("interrupted"))
            raise
        finally:  # keep_alive stays None on every failure: the connection is closed
            self._cancel.attach(None)
            self._pool._landed(self, conn, keep_alive)


class ResponseStream:
    """A response read as it arrives; holds its connection (and pool slot) until closed.

    :meth:`close` returns the connection to the pool only when the response was read to
    its end and may be followed by another; otherwise the connection is closed.
    """

    __slots__ = ("_conn", "_done", "_pool", "_reader", "head")

    def __init__(self, pool: ConnectionPool, conn: _Connection, reader: ResponseReader) -> None:
        self._pool = pool
        self._conn = conn
        self._reader = reader
        self._done = False
        self.head = reader.head()  # status and headers

    def read(self) -> bytes:
        """The next piece of the body; ``b""`` at its end.

        Raises a ``TransportError`` subclass (the stream is then closed) when the
        connection breaks, the server stops in the middle, or a receive times out.
        """
        reader = self._reader
        while True:
            data = reader.take_body()
            if data or reader.complete or self._done:
                return data
            try:
                self._conn.read_once(reader)
            except OSError as e:
                self.close()
                cause = _timed_out(e)
                raise self._closed_or(self._pool._error(cause)) from cause
            except TransportError as e:
                self.close()
                raise self._closed_or(self._pool._error(e)) from e
            if self._pool._closed:  # close() shut the socket down: what came may be cut
                self.close()
                raise ClientClosedError("the client has been closed")

    def _closed_or(self, error: BaseException) -> BaseException:
        if self._pool._closed:
            return ClientClosedError("the client has been closed")
        return error

    def close(self) -> None:
        """Release the connection (idempotent)."""
        if self._done:
            return
        self._done = True
        try:
            self._pool._checkin(self._conn, self._reader.complete and self._reader.keep_alive)
        finally:
            self._pool._slots.put(None)
