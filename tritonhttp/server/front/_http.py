"""ASGI plumbing: reading bodies, JSON parsing with RapidJSON's errors, sending responses."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import numpy as np
import rapidjson

from .._extensions import BODY_SINK, BodySink
from ..core._errors import Code, CoreError

__all__ = [
    "JSON",
    "TEXT",
    "Receive",
    "Scope",
    "Send",
    "parse_json",
    "read_body",
    "response_headers",
    "send_error",
    "send_response",
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

JSON = b"application/json"
TEXT = b"text/plain"

#: Triton parses with RapidJSON's kParseNanAndInfFlag: NaN, Inf, Infinity (signed) are numbers
_NM = rapidjson.NM_NAN


#: bodies larger than this are refused (memory stays bounded whatever a client sends)
MAX_BODY = 1 << 32
#: a Content-Length up to this is allocated at once; larger bodies grow as they arrive
_PREALLOCATE = 1 << 30


def _too_large() -> CoreError:
    return CoreError(f"request body is larger than the server's limit of {MAX_BODY} bytes")


async def read_body(
    receive: Receive,
    expected: int = 0,
    scope: Scope | None = None,
    first: Mapping[str, Any] | None = None,
) -> bytearray | memoryview:
    """The whole request body as a writable buffer (inputs become writable numpy views).

    ``expected`` (the Content-Length) lets a large body be assembled in one allocation,
    made by numpy so that it is not zero-filled first (a 64 MiB ``bytearray`` costs a
    memset of its own); such a body comes back as a writable ``memoryview``. With the
    request's ``scope``, the bundled HTTP server writes the rest of the body straight into
    that allocation. ``first``: the first message, when the caller has received it.
    """
    message = await receive() if first is None else first
    body = message.get("body", b"")
    if not message.get("more_body", False):
        return bytearray(body)
    if expected > MAX_BODY:
        raise _too_large()
    if _PREALLOCATE >= expected > len(body):
        view = np.empty(expected, dtype=np.uint8).data
        sink = BodySink(view, 0)
        sink.take(body)
        # the bundled HTTP server fills the sink itself as the rest arrives; receive() then
        # brings only what did not fit
        hooked = scope is not None and BODY_SINK in scope
        if hooked:
            scope[BODY_SINK] = sink  # type: ignore[index]
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ConnectionError("client disconnected")
                chunk = message.get("body", b"")
                if not sink.take(chunk):  # longer than announced: fall back to growing
                    buf = bytearray(view[: sink.filled])
                    buf += chunk
                    break
                if not message.get("more_body", False):
                    return view[: sink.filled]
        finally:
            if hooked:
                scope[BODY_SINK] = None  # type: ignore[index]
    else:
        buf = bytearray(body)
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionError("client disconnected")
        buf += message.get("body", b"")
        if len(buf) > MAX_BODY:
            raise _too_large()
        if not message.get("more_body", False):
            return buf


def parse_json(data: bytes | bytearray | memoryview) -> Any:
    """Parse like Triton's RapidJSON: errors as 500 ``failed to parse the request JSON buffer``."""
    raw = bytes(data)
    nul = raw.find(b"\0")
    if nul >= 0:  # RapidJSON reads a NUL-terminated string
        raw = raw[:nul]
    try:
        return rapidjson.loads(raw, number_mode=_NM)
    except rapidjson.JSONDecodeError as e:
        text = str(e)
        # "Parse error at offset N: message"
        head, _, message = text.partition(": ")
        offset = head.rsplit(" ", 1)[-1]
        raise CoreError(
            f"failed to parse the request JSON buffer: {message} at {offset}", Code.INTERNAL
        ) from None
    except UnicodeDecodeError:
        # RapidJSON copies invalid UTF-8 through; keep those bytes as surrogates.
        try:
            return json.loads(raw.decode("utf-8", "surrogateescape"))
        except json.JSONDecodeError as e:
            raise CoreError(
                f"failed to parse the request JSON buffer: {e.msg}. at {e.pos}", Code.INTERNAL
            ) from None


def error_body(message: str) -> bytes:
    from .. import _json

    return b'{"error":' + _json.escape_str(message).encode("utf-8", "surrogateescape") + b"}"


def response_headers(
    size: int,
    content_type: bytes | None = JSON,
    headers: list[tuple[bytes, bytes]] | None = None,
    length_first: bool = False,
) -> list[tuple[bytes, bytes]]:
    """The headers of a response of ``size`` bytes, in Triton's order (see send_response)."""
    out: list[tuple[bytes, bytes]] = []
    length = (b"content-length", str(size).encode())
    if length_first:
        out.append(length)
    if content_type is not None:
        out.append((b"content-type", content_type))
    if headers:
        out.extend(headers)
    if not length_first:
        out.append(length)
    return out


async def send_response(
    send: Send,
    status: int,
    body: bytes | bytearray | memoryview = b"",
    content_type: bytes | None = JSON,
    headers: list[tuple[bytes, bytes]] | None = None,
    length_first: bool = False,
) -> None:
    """One complete response; ``length_first`` mimics Triton's text/plain header order."""
    out = response_headers(len(body), content_type, headers, length_first)
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send(
        {"type": "http.response.body", "body": bytes(body) if not isinstance(body, bytes) else body}
    )


async def send_error(
    send: Send, error: CoreError, content_type: bytes = JSON, status: int | None = None
) -> None:
    """``{"error": message}`` with the status of the error's code."""
    await send_response(
        send,
        status if status is not None else error.http_status,
        error_body(error.message),
        content_type,
        length_first=content_type == TEXT,
    )
