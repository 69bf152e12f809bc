"""HTTP/1.1 framing without I/O: request heads out, response bytes in.

The request head is written with the header layout tritonclient's transport produces
(``User-Agent`` first, then the caller's headers in order with case-insensitive
replacement, then ``Host``, then ``Content-Length`` for POST). The response head is parsed
by httptools (llhttp); once ``Content-Length`` is known the body goes straight into one
preallocated, writable buffer that the transport fills with ``recv_into`` (or an asyncio
``BufferedProtocol`` with ``get_buffer``), so outputs can be numpy views of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httptools
import numpy as np

from .._errors import ProtocolError, _InvalidArgument, _Reset

__all__ = ["Response", "ResponseReader", "encode_request_head", "header_fields"]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
#: Bodies at least this large are allocated with numpy (no zero-fill, pages mapped lazily).
_LARGE_BODY = 1 << 20


def _field_values(name: object, value: Any) -> tuple[str, list[str]]:
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise _InvalidArgument(f"invalid header field name {name!r}")
    values = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
    for v in values:
        if _BAD_VALUE.search(v):
            raise _InvalidArgument(f"invalid value for header field {name!r}: {v!r}")
    return name, values


def header_fields(
    user_agent: str,
    headers: Mapping[str, Any] | None,
    host: str,
    content_length: int | None,
) -> list[tuple[str, str]]:
    """The header lines of a request, in wire order.

    ``headers`` are the caller's (plus library and plugin) headers; a name given again
    in another case replaces the earlier value in place. ``content_length`` None means a
    request without body (GET); the computed length always wins over a caller's
    ``Content-Length``.
    """
    fields: dict[str, tuple[str, list[str]]] = {"user-agent": ("User-Agent", [user_agent])}
    if headers:
        for name, value in headers.items():
            key = name.lower() if isinstance(name, str) else name
            if key == "content-length":
                continue
            fields[key] = _field_values(name, value)
    if "host" not in fields:
        fields["host"] = ("Host", [host])
    if content_length is not None:
        fields["content-length"] = ("Content-Length", [str(content_length)])
    return [(name, v) for name, values in fields.values() for v in values]


def encode_request_head(
    method: str, target: str, fields: list[tuple[str, str]], encoding: str = "latin-1"
) -> bytes:
    """``METHOD target HTTP/1.1`` + header lines + blank line, in ``encoding`` (latin-1
    as geventhttpclient wrote it; the asyncio client writes UTF-8, as aiohttp did)."""
    if _BAD_VALUE.search(target) or " " in target:
        raise _InvalidArgument(f"invalid request target {target!r}")
    lines = "".join(f"{name}: {value}\r\n" for name, value in fields)
    try:
        return f"{method} {target} HTTP/1.1\r\n{lines}\r\n".encode(encoding)
    except UnicodeEncodeError as e:
        raise _InvalidArgument(f"request header is not {encoding} encodable: {e}") from None


class Response:
    """A complete HTTP response: status, headers (original case, in order) and body.

    A response read from the network keeps its header lines as received (bytes) and
    decodes them when :attr:`headers` or :meth:`get` first needs them.
    """

    __slots__ = ("_fields", "_headers", "_lookup", "_raw", "body", "keep_alive", "status")

    def __init__(
        self,
        status: int,
        headers: list[tuple[str, str]],
        body: memoryview,
        keep_alive: bool,
    ) -> None:
        self.status = status
        self._headers: list[tuple[str, str]] | None = headers
        self._fields: list[tuple[bytes, bytes]] | None = None
        self._lookup: dict[str, str] | None = None
        self._raw: dict[bytes, bytes] | None = None
        self.body = body
        self.keep_alive = keep_alive

    @classmethod
    def _received(
        cls, status: int, fields: list[tuple[bytes, bytes]], body: memoryview, keep_alive: bool
    ) -> Response:
        """A response with its header lines as received (latin-1 bytes)."""
        response = cls.__new__(cls)
        response.status = status
        response._headers = None
        response._fields = fields
        response._lookup = None
        response._raw = None
        response.body = body
        response.keep_alive = keep_alive
        return response

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The header lines as (name, value) pairs, in order."""
        headers = self._headers
        if headers is None:
            fields = self._fields or []
            headers = self._headers = [
                (n.decode("latin-1"), v.decode("latin-1")) for n, v in fields
            ]
        return headers

    def get(self, name: str, default: str | None = None) -> str | None:
        """Header value by case-insensitive name (the last one wins), or ``default``."""
        fields = self._fields
        if fields is not None:  # as received: look the bytes up, decode the one value
            raw = self._raw
            if raw is None:
                raw = self._raw = {n.lower(): v for n, v in fields}
            try:
                value = raw.get(name.lower().encode("latin-1"))
            except UnicodeEncodeError:
                return default
            return default if value is None else value.decode("latin-1")
        lookup = self._lookup
        if lookup is None:
            lookup = self._lookup = {n.lower(): v for n, v in self.headers}
        return lookup.get(name.lower(), default)

    def __repr__(self) -> str:
        # Same text as tritonclient's verbose output of a geventhttpclient response.
        return f"<HTTPSocketPoolResponse status={self.status} headers={dict(self.headers)}>"


class ResponseReader:
    """Sans-IO reader for one HTTP/1.1 response.

    Drive it with :meth:`feed` (bytes from the network) until :attr:`complete`; whenever
    :meth:`body_window` returns a view, the caller may receive directly into it and
    report the count with :meth:`body_received` instead of feeding (no extra copy).
    Call :meth:`eof` when the peer closes the connection.

    With ``stream=True`` the body is not collected: once :attr:`head_complete`, every
    piece of body that arrives is kept until :meth:`take_body` hands it out (for
    responses read as they arrive, e.g. server-sent events); :meth:`head` gives the
    status and headers.

    A ``reusable`` reader belongs to one connection and reads its responses one after
    another (:meth:`reset` before each): its httptools parser is made once.
    """

    __slots__ = (
        "_body",
        "_bypassed",
        "_chunked",
        "_chunks",
        "_fields",
        "_filled",
        "_keep_alive",
        "_length",
        "_parser",
        "_pending",
        "_pending_size",
        "_reusable",
        "_started",
        "complete",
        "head_complete",
        "status",
    )

    def __init__(self, stream: bool = False, reusable: bool = False) -> None:
        self._reusable = reusable
        self._parser: httptools.HttpResponseParser | None = httptools.HttpResponseParser(self)
        self._bypassed = False  # body bytes went around the parser (body_received)
        self.reset(stream)

    def reset(self, stream: bool = False) -> None:
        """Get ready for the next response on the same connection (a reusable reader,
        after a complete response)."""
        if self._bypassed:  # the parser did not see the end of the last body
            self._parser = httptools.HttpResponseParser(self)
        self._bypassed = False
        self._fields: list[tuple[bytes, bytes]] = []
        self._length = -1
        self._chunked = False
        self._body: memoryview | None = None
        self._filled = 0
        self._chunks: list[bytes] | None = None
        self._pending: list[bytes] | None = [] if stream else None
        self._pending_size = 0
        self._started = False
        self._keep_alive = False
        self.complete = False
        self.head_complete = False
        self.status = 0

    # -- httptools callbacks -------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields.append((name, value))
        if len(name) == 14 and name.lower() == b"content-length":
            try:
                self._length = int(value)
            except ValueError:
                self._length = -1
        elif len(name) == 17 and name.lower() == b"transfer-encoding":
            self._chunked = b"chunked" in value.lower()

    def on_headers_complete(self) -> None:
        parser = self._parser
        assert parser is not None  # (only called by it)
        status = parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # interim response: wait for the real one
            self._fields = []
            self._length = -1
            self._chunked = False
            return
        self.status = status
        self.head_complete = True
        self._keep_alive = parser.should_keep_alive()
        if self._pending is not None:
            return
        if self._length >= 0 and not self._chunked:
            n = self._length
            # numpy skips the zero-fill of large buffers (pages are mapped as they fill)
            self._body = (
                np.empty(n, dtype=np.uint8).data if n >= _LARGE_BODY else memoryview(bytearray(n))
            )
        else:
            self._chunks = []

    def on_body(self, data: bytes) -> None:
        if self._body is not None:
            end = self._filled + len(data)
            self._body[self._filled : end] = data
            self._filled = end
        elif self._pending is not None:
            self._pending.append(data)
            self._pending_size += len(data)
        elif self._chunks is not None:
            self._chunks.append(data)

    def on_message_complete(self) -> None:
        if self.status:
            self.complete = True
            if not self._reusable:
                # the parser holds this reader's callbacks: dropping it here breaks that
                # reference cycle, so the reader and its body are freed as soon as they
                # are no longer used rather than by the cyclic garbage collector
                self._parser = None

    # -- driving -------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether any byte of the response has arrived."""
        return self._started

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Parse bytes received from the network."""
        self._started = True
        parser = self._parser
        if parser is None:
            raise ProtocolError("the server sent data after the end of its response")
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            raise ProtocolError("the server switched protocols unexpectedly") from None
        except httptools.HttpParserError as e:
            raise ProtocolError(f"malformed HTTP response from the server: {e}") from None
        if self._body is not None and self._filled >= self._length:
            self.complete = True

    def body_window(self) -> memoryview | None:
        """The part of the body buffer still to be filled, once its size is known."""
        if self._body is None or self.complete:
            return None
        return self._body[self._filled :]

    def body_received(self, n: int) -> None:
        """Record that ``n`` bytes were received into :meth:`body_window`."""
        self._bypassed = True
        self._filled += n
        if self._filled >= self._length:
            self.complete = True

    @property
    def close_delimited(self) -> bool:
        """Whether the body ends when the server closes the connection."""
        return self.head_complete and self._length < 0 and not self._chunked

    def eof(self) -> None:
        """The peer closed the connection; completes a body delimited by close.

        Raises ``ConnectionResetError`` (a ``TransportError``) when the response is
        incomplete: nothing arrived, or the body was cut short.
        """
        if self.complete:
            return
        if self.status and self.close_delimited:
            self.complete = True
            return
        if not self._started:
            raise _Reset("the server closed the connection without answering")
        raise _Reset("the server closed the connection in the middle of a response")

    def take_body(self) -> bytes:
        """Stream mode: the body bytes received since the last call (may be empty)."""
        pending = self._pending
        if not pending:
            return b""
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        self._pending_size = 0
        return data

    @property
    def pending_size(self) -> int:
        """Stream mode: how many bytes :meth:`take_body` would hand out."""
        return self._pending_size

    @property
    def keep_alive(self) -> bool:
        """Whether the connection may carry another request after this response."""
        return self._keep_alive and not self.close_delimited

    def forbid_reuse(self) -> None:
        """Mark the connection as not reusable after this response."""
        self._keep_alive = False

    def head(self) -> Response:
        """Status and headers (body empty); available once :attr:`head_complete`."""
        fields = list(self._fields)  # (a stream's trailers must not change its head)
        return Response._received(self.status, fields, memoryview(b""), self.keep_alive)

    def response(self) -> Response:
        """The finished response (only once :attr:`complete`)."""
        if self._body is not None:
            body = self._body
        else:
            body = memoryview(bytearray(b"".join(self._chunks or ())))
        return Response._received(self.status, self._fields, body, self.keep_alive)
