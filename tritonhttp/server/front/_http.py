"""ASGI plumbing: reading bodies, JSON parsing with RapidJSON's errors, sending responses."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import numpy as np
import rapidjson

from ..core._errors import Code, CoreError
from ..http._extensions import BODY_SINK, BodySink

__all__ = [
    "JSON",
    "OCTET_STREAM",
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
OCTET_STREAM = b"application/octet-stream"
TEXT = b"text/plain"

#: Triton parses with RapidJSON's kParseNanAndInfFlag: NaN, Inf, Infinity (signed) are
#: numbers; and with RapidJSON's own number parsing (NM_NATIVE), not full precision: a
#: decimal may come out one ulp away from the nearest double, and an integer beyond 64 bits
#: is a double
_NM = rapidjson.NM_NAN | rapidjson.NM_NATIVE


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


def _mask_invalid_utf8(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeDecodeError)
    return "X" * (error.end - error.start), error.end


codecs.register_error("tritonhttp-mask", _mask_invalid_utf8)


class FirstWins(rapidjson.Decoder):
    """Objects keep the first of repeated members, as RapidJSON's lookups find it."""

    def start_object(self) -> list[tuple[str, Any]]:
        return []

    def end_object(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        return keep_first(pairs)


def keep_first(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of ``pairs`` where a repeated name keeps its first value."""
    obj: dict[str, Any] = {}
    for key, value in pairs:
        obj.setdefault(key, value)
    return obj


_FIRST_WINS = FirstWins(number_mode=_NM)


def _syntax_error(error: rapidjson.JSONDecodeError, skipped: int) -> CoreError:
    """Triton's text for a syntax error; ``skipped``: bytes before the parsed text (the
    offset counts from the body's first byte)."""
    # "Parse error at offset N: message"
    head, _, message = str(error).partition(": ")
    offset = int(head.rsplit(" ", 1)[-1]) + skipped
    if message == "Invalid encoding in string.":
        # an unescaped control character: Triton's (older) RapidJSON words it so
        message = "Invalid escape character in string."
    return CoreError(
        f"failed to parse the request JSON buffer: {message} at {offset}", Code.INTERNAL
    )


_SURROGATE_ERROR = "The surrogate pair in string is invalid."
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_ESCAPE = re.compile(rb"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def _lone_low_surrogates(raw: bytes) -> list[int]:
    """Where ``raw``'s strings escape a low surrogate (``\\uDC00``-``\\uDFFF``) that no
    high surrogate escape precedes: the RapidJSON of Triton 2.51 takes those."""
    found = []
    for string in _JSON_STRING.finditer(raw):
        pair_at = -1
        for escape in _ESCAPE.finditer(raw, string.start() + 1, string.end() - 1):
            code = int(escape.group(1), 16) if escape.group(1) else -1
            if 0xDC00 <= code <= 0xDFFF and escape.start() != pair_at:
                found.append(escape.start())
            pair_at = escape.end() if 0xD800 <= code <= 0xDBFF else -1
    return found


def parse_json(data: bytes | bytearray | memoryview, first_wins: bool = False) -> Any:
    """Parse like Triton's RapidJSON: errors as 500 ``failed to parse the request JSON buffer``.

    ``first_wins``: an object's repeated member keeps its first value (what RapidJSON's
    lookups find); by default the last one is kept, which is cheaper.
    """
    raw = bytes(data)
    nul = raw.find(b"\0")
    if nul >= 0:  # RapidJSON reads a NUL-terminated string
        raw = raw[:nul]
    skip = bom_length(raw) if raw and raw[0] in _BOM else 0
    if skip:
        raw = raw[skip:]  # (a second mark is not skipped)
    try:
        return _parse(raw, first_wins, skip)
    except RecursionError as e:
        raise _too_deep(e, skip) from None


def _parse(raw: bytes, first_wins: bool, skip: int) -> Any:
    try:
        if first_wins:
            return _FIRST_WINS(raw)
        return rapidjson.loads(raw, number_mode=_NM)
    except rapidjson.JSONDecodeError as e:
        lone = _lone_low_surrogates(raw) if str(e).endswith(_SURROGATE_ERROR) else []
        if not lone:
            raise _syntax_error(e, skip) from None
    except UnicodeDecodeError:
        lone = _lone_low_surrogates(raw)
    return _parse_loosely(raw, lone, first_wins, skip)


_DEPTH_OFFSET = re.compile(r"offset (\d+)")


def _too_deep(error: RecursionError, skipped: int) -> CoreError:
    """A document nested deeper than the parser goes (about a thousand arrays or objects,
    the interpreter's recursion limit) is refused as a syntax error is. Triton's RapidJSON
    reads any depth, then answers a request without ``inputs`` at the top as such and may
    crash on deep ``data``."""
    found = _DEPTH_OFFSET.search(str(error))
    where = f" at {int(found.group(1)) + skipped}" if found else ""
    return CoreError(
        f"failed to parse the request JSON buffer: arrays and objects nested too deeply.{where}",
        Code.INTERNAL,
    )


def parse_body(body: bytes | bytearray | memoryview) -> Any:
    """A JSON request body other than /infer's: :func:`parse_json` where an object's
    repeated member keeps its first value (what RapidJSON's lookups find)."""
    return parse_json(body, first_wins=True)


#: a UTF-8 byte-order mark (each of its bytes skipped where present, in order)
_BOM = b"\xef\xbb\xbf"


def bom_length(body: bytes | bytearray | memoryview) -> int:
    """How many bytes of a UTF-8 byte-order mark Triton's RapidJSON stream skips at the
    start of ``body``: each of EF, BB, BF where present, in that order (so BB 7B reads
    as ``{``)."""
    raw = bytes(body[:3])
    skip = 0
    for mark in _BOM:
        if skip < len(raw) and raw[skip] == mark:
            skip += 1
    return skip


def _parse_loosely(raw: bytes, lone: list[int], first_wins: bool, skipped: int) -> Any:
    """What Triton's RapidJSON takes and python-rapidjson refuses: invalid UTF-8 (copied
    through), and the escapes of lone low surrogates at ``lone`` (written as 3 bytes)."""
    # The syntax errors: those of the same bytes with each invalid byte masked by a letter
    # that starts no JSON token and each lone surrogate by a plain escape.
    masked = raw
    for at in lone:
        masked = masked[:at] + b"\\u0058" + masked[at + 6 :]
    masked = masked.decode("utf-8", "tritonhttp-mask").encode()
    try:
        numbers = _FIRST_WINS(masked) if first_wins else rapidjson.loads(masked, number_mode=_NM)
    except rapidjson.JSONDecodeError as e:
        raise _syntax_error(e, skipped) from None
    # Valid: invalid bytes are inside strings, kept as surrogates (so are the lone
    # surrogates' bytes); the numbers are RapidJSON's, from the masked parse.
    for at in reversed(lone):
        code = int(raw[at + 2 : at + 6], 16)
        utf8 = bytes([0xED, 0x80 | (code >> 6) & 0x3F, 0x80 | code & 0x3F])
        raw = raw[:at] + utf8 + raw[at + 6 :]
    try:
        doc = json.loads(
            raw.decode("utf-8", "surrogateescape"),
            object_pairs_hook=keep_first if first_wins else None,
        )
    except json.JSONDecodeError as e:
        raise CoreError(
            f"failed to parse the request JSON buffer: {e.msg}. at {e.pos + skipped}",
            Code.INTERNAL,
        ) from None
    return _take_numbers(doc, numbers)


def _take_numbers(doc: Any, numbers: Any) -> Any:
    """``doc`` with the numbers of ``numbers``, the same document parsed otherwise."""
    if isinstance(doc, (int, float)) and not isinstance(doc, bool):
        return numbers if isinstance(numbers, (int, float)) else doc
    if isinstance(doc, list) and isinstance(numbers, list) and len(doc) == len(numbers):
        return [_take_numbers(a, b) for a, b in zip(doc, numbers, strict=True)]
    if isinstance(doc, dict) and isinstance(numbers, dict) and len(doc) == len(numbers):
        return {
            k: _take_numbers(a, b) for (k, a), b in zip(doc.items(), numbers.values(), strict=True)
        }
    return doc


def error_body(message: str) -> bytes:
    from ..support import _json

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
