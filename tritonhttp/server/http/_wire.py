"""Response heads as real Triton writes them, and the server's canned answers.

Triton's HTTP server (libevhtp) writes header names in Title-Case and no ``Date`` or
``Server`` header; it echoes ``Connection: close`` when the client sent it, right after
``Content-Length`` (first, for an empty body); it answers HTTP/1.0 in HTTP/1.0 and
closes, unless keep-alive was asked for (then echoed), with no ``Content-Length`` for an
empty body; its reason phrase for 405 is ``Not Allowed``.

:class:`ResponseFraming` makes one response's head by those rules and decides its framing
(declared length, chunks, or up to the connection's end) and whether the connection stays
open after it. Heads that repeat are made once and kept, keyed by what they depend on:
whole immediate answers (:data:`ANSWERS`), the heads of ``respond`` (:data:`RESPOND_HEADS`)
and the two heads of a direct answer (:func:`direct_heads`).
"""

from __future__ import annotations

import functools
import http
from typing import Any, TypeVar

from ._extensions import Answer

__all__ = [
    "ANSWERS",
    "BAD_REQUEST",
    "HEAD_TOO_LARGE",
    "RESPOND_HEADS",
    "ResponseFraming",
    "continue_line",
    "direct_heads",
    "one_content_length",
    "server_error",
    "status_line",
]

#: the answer to a request the parser rejects (the connection closes after it)
BAD_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 30\r\nConnection: close\r\n\r\nInvalid HTTP request received."
)
#: the answer to a request head over the size limit (the connection closes after it)
HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8"
    b"\r\nContent-Length: 31\r\nConnection: close\r\n\r\nRequest header fields too large."
)
#: how many heads a cache keeps before it starts over (the kinds in use are a few dozen:
#: statuses by content types by HTTP versions; the bound only stops a runaway)
CACHE_LIMIT = 256
#: the wire bytes of immediate answers: (answer, HTTP/1.0, keep-alive, HEAD) -> (bytes,
#: keep-alive after it)
ANSWERS: dict[tuple[Answer, bool, bool, bool], tuple[bytes, bool]] = {}
#: the heads of ``respond``: (status, content type, HTTP/1.0, keep-alive) -> (the head up
#: to the Content-Length value, the rest of it, keep-alive after it)
RESPOND_HEADS: dict[tuple[int, bytes, bool, bool], tuple[bytes, bytes, bool]] = {}

_K = TypeVar("_K")
_V = TypeVar("_V")


def _reason(status: int) -> bytes:
    """The reason phrase Triton writes for ``status`` (empty for an unknown one)."""
    if status == 405:
        return b"Not Allowed"
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


@functools.lru_cache(maxsize=1024)
def status_line(http10: bool, status: int) -> bytes:
    """``HTTP/1.1 200 OK\\r\\n`` (``HTTP/1.0`` when ``http10``)."""
    version = b"HTTP/1.0" if http10 else b"HTTP/1.1"
    return b"%s %d %s\r\n" % (version, status, _reason(status))


@functools.lru_cache(maxsize=1024)
def _title(name: bytes) -> bytes:
    """``content-type`` -> ``Content-Type``, as Triton writes its header names."""
    return name.title()


def continue_line(http10: bool) -> bytes:
    """The interim ``100 Continue`` answer to a request with an ``Expect`` header (in
    the request's HTTP version, as Triton writes it)."""
    return status_line(http10, 100) + b"\r\n"


def server_error(http10: bool) -> bytes:
    """The whole ``500`` answer to a request whose application failed before answering
    (the connection closes after it)."""
    return (
        status_line(http10, 500) + b"Content-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: 21\r\nConnection: close\r\n\r\nInternal Server Error"
    )


def _remember(cache: dict[_K, _V], key: _K, value: _V) -> None:
    """Keep ``value`` under ``key`` (starting the cache over when it is full)."""
    if len(cache) >= CACHE_LIMIT:
        cache.clear()
    cache[key] = value


class ResponseFraming:
    """One response's head and framing, from its request's HTTP version, keep-alive and
    method and the application's status and headers (see the module doc)."""

    __slots__ = ("body_left", "chunked", "head", "head_only", "http10", "keep_alive")

    def __init__(self) -> None:
        #: the request (so the response) is HTTP/1.0
        self.http10 = False
        #: the connection stays open after the response
        self.keep_alive = True
        #: a HEAD request: the response has a head only
        self.head_only = False
        #: the body goes in chunks
        self.chunked = False
        #: the head made by :meth:`make_head`, not yet written
        self.head: bytes | None = None
        #: bytes the declared Content-Length still expects (-1: none declared)
        self.body_left = -1

    def make_head(self, status: int, headers: Any) -> None:
        """Make the head of a ``status`` response with ``headers`` (ASGI pairs) into
        ``head``, and set ``chunked``, ``body_left`` and ``keep_alive`` to match."""
        http10 = self.http10
        out = [status_line(http10, status)]
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

    def take_head(self, status: int, headers: Any) -> bytes:
        """:meth:`make_head`'s head, returned instead of kept (``head`` is left empty)."""
        self.make_head(status, headers)
        head = self.head or b""
        self.head = None
        return head

    def respond_head(self, status: int, content_type: bytes) -> tuple[bytes, bytes, bool]:
        """Make and keep in :data:`RESPOND_HEADS` the head of a ``status`` response with a
        non-empty ``content_type`` body: (the head up to the Content-Length value, the rest
        of it, keep-alive after it). ``head`` is left empty."""
        key = (status, content_type, self.http10, self.keep_alive)
        head = self.take_head(status, ((b"content-type", content_type), (b"content-length", b"1")))
        before, _, after = head.partition(b"Content-Length: 1\r\n")
        parts = (before + b"Content-Length: ", b"\r\n" + after, self.keep_alive)
        _remember(RESPOND_HEADS, key, parts)
        return parts

    def answer_wire(self, answer: Answer) -> tuple[bytes, bool]:
        """Make and keep in :data:`ANSWERS` the bytes of the whole response ``answer``
        (its headers hold its Content-Length), with keep-alive after it. ``head`` is
        left empty."""
        key = (answer, self.http10, self.keep_alive, self.head_only)
        status, headers, body = answer
        head = self.take_head(status, headers)
        made = (head + body if not self.head_only else head, self.keep_alive)
        _remember(ANSWERS, key, made)
        return made


@functools.cache
def direct_heads() -> tuple[bytes, bytes]:
    """(JSON, binary) heads of an HTTP/1.1 keep-alive ``200`` answer, ``%d`` where the
    numbers go (see :class:`~._extensions.DirectLink`)."""
    framing = ResponseFraming()
    made = []
    for headers in (
        ((b"content-type", b"application/json"), (b"content-length", b"7777777")),
        (
            (b"content-type", b"application/octet-stream"),
            (b"inference-header-content-length", b"8888888"),
            (b"content-length", b"7777777"),
        ),
    ):
        head = framing.take_head(200, headers).replace(b"%", b"%%")
        made.append(head.replace(b"8888888", b"%d").replace(b"7777777", b"%d"))
    return made[0], made[1]


def _length_lines(head: bytes) -> tuple[list[bytes], int | None]:
    """The lines of a request head (``head`` without its blank line) with one
    ``Content-Length``, and its value (None where there is none); ``ValueError`` where
    the values differ or are not numbers, or the body is chunked."""
    kept: list[bytes] = []
    length: int | None = None
    for line in head.split(b"\r\n"):
        name, colon, value = line.partition(b":")
        name = name.strip().lower()
        if colon and name == b"transfer-encoding":
            raise ValueError("chunked")
        if colon and name == b"content-length":
            value = value.strip()
            if not value.isdigit():
                raise ValueError("not a number")
            if length is not None:
                if int(value) != length:
                    raise ValueError("different lengths")
                continue
            length = int(value)
        kept.append(line)
    return kept, length


def one_content_length(data: bytes, skip: int) -> bytes | None:
    """``data`` (from the start of a request), past its first ``skip`` requests, with
    the ``Content-Length`` header of the next one given once where it was given more
    than once with one number (Triton reads such a request; httptools refuses it).
    None where that cannot be done: a head not all there, a chunked body before it, or
    different numbers."""
    try:
        while True:
            data = data.lstrip(b"\r\n")
            end = data.find(b"\r\n\r\n")
            if end < 0:
                return None
            kept, length = _length_lines(data[:end])
            if skip <= 0:
                return b"\r\n".join(kept) + data[end:]
            data = data[end + 4 + (length or 0) :]
            skip -= 1
    except ValueError:
        return None
