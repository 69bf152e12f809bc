"""The ASGI side of an ``/infer`` request, around its parsing and the model: reading its
(decompressed) body with Triton's header checks (``read_infer_body``), running the model
while watching for the client going away (``infer_watching``,
``infer_cancelled_on_leaving``), and sending the answer (``send_answer``; ``finish`` when
another process wrote most of it).

Plain functions of the scope, ``receive``/``send`` and the request: ``HttpFrontend``'s
infer path in ``_app.py`` calls them; the request's parsing and encoding are ``_infer.py``'s.
"""

from __future__ import annotations

import asyncio
import functools
import re

from ..core._errors import CoreError
from ..core._model import ModelVersion
from ..core._types import InferRequest, InferResponse
from ..http._extensions import ON_DISCONNECT, RESPOND, DirectLink
from ._http import (
    JSON,
    OCTET_STREAM,
    TEXT,
    Receive,
    Scope,
    Send,
    error_body,
    read_body,
    send_error,
    send_response,
)
from ._infer import ParsedInfer, compress, encode_response, inflate, pick_encoding

__all__ = [
    "finish",
    "infer_cancelled_on_leaving",
    "infer_watching",
    "read_infer_body",
    "send_answer",
    "traceparent",
]

_MAX_INFLATE = 1 << 32


async def read_infer_body(
    scope: Scope, receive: Receive, send: Send
) -> tuple[bytearray | memoryview, int, bytes | None] | None:
    """An ``/infer`` request's (decompressed) body, the length of its JSON header and
    its Accept-Encoding; None when an error was sent instead."""
    encoding = ihcl_raw = accept = None
    expected = 0
    for k, v in scope["headers"]:
        if k == b"inference-header-content-length":
            ihcl_raw = v
        elif k == b"content-encoding":
            encoding = v
        elif k == b"accept-encoding":
            accept = v
        elif k == b"content-length" and v.isdigit():
            expected = min(int(v), 1 << 34)
    message = await receive()
    if message.get("more_body", False):
        body = await read_body(receive, expected, scope, message)
    else:  # (the whole body at once: no extra frame)
        body = bytearray(message.get("body", b""))
    if encoding is not None and encoding not in (b"", b"identity"):
        if encoding not in (b"gzip", b"deflate"):
            await send_response(
                send, 501, error_body("Unsupported compression type"), TEXT,
                headers=[(b"accept-encoding", b"gzip, deflate")], length_first=False,
            )  # fmt: skip
            return None
        if not body:
            await send_error(send, CoreError("nothing to be decompressed"), TEXT)
            return None
        try:
            body = inflate(body, _MAX_INFLATE)
        except CoreError as e:
            await send_error(send, e, TEXT)
            return None
    total = len(body)
    if ihcl_raw is None:
        return body, total, accept
    header_len = _atoi(ihcl_raw)
    if header_len < 0 or header_len > total:
        got = ihcl_raw.decode("latin-1")
        msg = f"inference header size should be in range (0, {total}), got: {got}"
        await send_error(send, CoreError(msg), TEXT)
        return None
    return body, header_len, accept


def _atoi(raw: bytes) -> int:
    """glibc's ``atoi``: leading spaces, optional sign, digits, junk after them ignored;
    the value of ``strtol`` (saturated to 64 bits) cast to a 32-bit int (``2**32`` reads
    as 0, ``2**31`` as ``-2**31``)."""
    m = re.match(rb"\s*([+-]?\d+)", raw)
    if not m:
        return 0
    value = max(min(int(m.group(1)), 2**63 - 1), -(2**63))
    return (value + 2**31) % 2**32 - 2**31


def traceparent(scope: Scope) -> str:
    """The request's W3C ``traceparent`` header, or ""."""
    for k, v in scope["headers"]:
        if k == b"traceparent":
            return str(v.decode("latin-1"))
    return ""


async def infer_cancelled_on_leaving(
    scope: Scope, model: ModelVersion, request: InferRequest
) -> InferResponse:
    """``model.infer(request)``, cancelled when the client goes away meanwhile (the
    bundled HTTP server's disconnect callback)."""
    scope[ON_DISCONNECT] = functools.partial(model.cancel, request)
    try:
        return await model.infer(request)
    finally:
        scope[ON_DISCONNECT] = None


async def infer_watching(
    model: ModelVersion, request: InferRequest, receive: Receive
) -> InferResponse:
    """Infer while listening for the client going away (any ASGI server)."""
    infer = asyncio.ensure_future(model.infer(request))
    if infer.done():
        return infer.result()
    watcher = asyncio.ensure_future(receive())
    try:
        done, _ = await asyncio.wait((infer, watcher), return_when=asyncio.FIRST_COMPLETED)
        if (
            watcher in done
            and not watcher.cancelled()
            and watcher.exception() is None
            and watcher.result().get("type") == "http.disconnect"
        ):
            model.cancel(request)
        return await infer
    finally:
        watcher.cancel()
        if not infer.done():
            infer.cancel()


async def finish(link: DirectLink, rest: bytes) -> None:
    """Another process wrote the answer on ``link`` but ``rest``: the server sends it."""
    waiting = link.finish(rest)
    if waiting is not None:
        await waiting


async def send_answer(
    scope: Scope,
    send: Send,
    model: ModelVersion,
    parsed: ParsedInfer,
    response: InferResponse,
    accept: bytes | None,
) -> None:
    """Send ``response`` to the request ``parsed``: its error, or its outputs."""
    if response.error is not None:
        await send_error(send, response.error, TEXT)
        return
    try:
        header, blobs = encode_response(parsed, response, model)
    except CoreError as e:
        await send_error(send, e, TEXT)
        return
    respond = scope.get(RESPOND) if not accept else None
    if respond is not None:  # (uncompressed: the whole answer in one write)
        if blobs:
            waiting = respond(200, OCTET_STREAM, [header, *blobs], (_header_length(header),))
        else:
            waiting = respond(200, JSON, header)
        if waiting is not None:
            await waiting
        return
    if not blobs and not accept:
        await send_response(send, 200, header)
        return
    # shared memory: the blobs may be views of a region; it stays registered (in
    # use) until they are sent
    await _send_infer_response(send, header, blobs, accept)


def _header_length(header: bytes) -> tuple[bytes, bytes]:
    """The ``Inference-Header-Content-Length`` header of a binary answer whose JSON part is
    ``header``."""
    return (b"inference-header-content-length", b"%d" % len(header))


async def _send_infer_response(
    send: Send, header: bytes, blobs: list[bytes | memoryview], accept: bytes | None
) -> None:
    out_headers: list[tuple[bytes, bytes]] = [(b"content-type", JSON)]
    if blobs:
        out_headers[0] = (b"content-type", OCTET_STREAM)
        out_headers.append(_header_length(header))
    coding = pick_encoding(accept)
    if coding is not None:
        payload = compress(header + b"".join(blobs), coding)
        out_headers.append((b"content-encoding", coding.encode()))
        header, blobs = payload, []
    total = len(header) + sum(len(b) if isinstance(b, bytes) else b.nbytes for b in blobs)
    out_headers.append((b"content-length", str(total).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": out_headers})
    if not blobs:
        await send({"type": "http.response.body", "body": header})
        return
    await send({"type": "http.response.body", "body": header, "more_body": True})
    last = len(blobs) - 1
    for i, blob in enumerate(blobs):
        await send({"type": "http.response.body", "body": blob, "more_body": i != last})
