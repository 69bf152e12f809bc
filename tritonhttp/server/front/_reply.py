"""Requests answered, and parsed, by a backend's own process: the front's side of the
"reply" capability.

For a plain ``/infer`` request on a connection the HTTP server can share
(:class:`~tritonhttp.server.http._extensions.DirectLink`), the front hands the core an
:class:`HttpReply` on ``InferRequest.reply``; the core carries it untouched. A backend
that runs the model in another process may pass the connection's descriptor there,
build a writer with :func:`open_writer` from ``HttpReply.writer`` (this module is the
*reply codec* the server names to the backend; the backend imports nothing of the
front) and write the successful answer itself. The bytes are the front's own
(:func:`~._answer.encode_outputs`), so they are the same whoever writes them.

The front may also hand a request over *unparsed* (``HttpReply.unparsed``: its body):
the backend's process then parses and checks it with :func:`open_parser`'s parser —
the front's own parsing and the core's admission — or declines it
(``InferResponse.declined``), and the front parses and answers it as usual.

Imports the front's encoder and, where rapidjson is there, its request parsing: a
worker process imports this module (an interpreter without rapidjson only writes).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core._admission import Admission
from ..core._types import InferRequest
from ._answer import AnswerError, encode_outputs

try:
    from ._infer import answer_spec, answerable_elsewhere, parse_infer_request
except ImportError:  # pragma: no cover (a model's interpreter without rapidjson)
    parse_infer_request = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ..http._extensions import DirectLink

__all__ = [
    "AnswerSpec",
    "HttpReply",
    "ReplyWriter",
    "RequestParser",
    "open_parser",
    "open_writer",
    "reply_for",
]

#: how one answer is written: (the JSON header up to the model version, binary_data per
#: output name, the default for outputs not named)
AnswerSpec = tuple[bytes, dict[str, bool | None], bool]
#: a non-blocking send that raises no SIGPIPE (where the platform has such flags)
_SEND_FLAGS = getattr(socket, "MSG_DONTWAIT", 0) | getattr(socket, "MSG_NOSIGNAL", 0)


@dataclass(slots=True)
class HttpReply:
    """One request's answer may be written to the client's connection by the backend.

    ``key`` names the connection (never reused) and ``fd`` is a descriptor of it, valid
    until the callbacks given to ``on_close`` run. ``writer`` are the arguments of
    :func:`open_writer` for the connection (the same for every request on it);
    ``answer`` says how to write this request's answer (:data:`AnswerSpec`; None for an
    unparsed request, whose parser works it out); ``unparsed``: the request's
    (decompressed) body and the length of its JSON header, when it was not parsed.
    """

    key: int
    fd: int
    on_close: Callable[[Callable[[], None]], None]
    writer: tuple[bytes, bytes]
    answer: AnswerSpec | None
    unparsed: tuple[bytearray | memoryview, int] | None = None


def reply_for(
    link: DirectLink,
    answer: AnswerSpec | None,
    unparsed: tuple[bytearray | memoryview, int] | None = None,
) -> HttpReply:
    """The reply capability of a request on ``link``."""
    heads = (link.json_head, link.binary_head)
    return HttpReply(link.key, link.fd, link.on_close, heads, answer, unparsed)


class ReplyWriter:
    """Writes answers on one client connection (in whichever process holds it)."""

    __slots__ = ("_binary_head", "_heads", "_json_head")

    def __init__(self, json_head: bytes, binary_head: bytes) -> None:
        self._json_head = json_head
        self._binary_head = binary_head
        self._heads: dict[Any, bytes] = {}

    def write(
        self,
        sock: socket.socket,
        answer: AnswerSpec,
        parameters: dict[str, Any] | None,
        outputs: Sequence[tuple[str, str, Sequence[int], Any]],
        limit: int,
    ) -> bytes | None:
        """Send one successful answer on ``sock``; what it did not take yet (to be sent
        by the server, ``b""`` when all went), or None: nothing was sent, the server
        answers (an output JSON cannot carry, or a body over ``limit`` bytes)."""
        prefix, binary, binary_default = answer
        try:
            header, blobs = encode_outputs(
                prefix, parameters, outputs, binary, binary_default, self._heads
            )
        except AnswerError:
            return None  # (the server sends the error)
        body = len(header)
        for blob in blobs:
            body += len(blob) if isinstance(blob, bytes) else blob.nbytes
        if body > limit:
            return None
        head = self._binary_head % (len(header), body) if blobs else self._json_head % body
        try:
            if blobs:
                sent = sock.sendmsg([head, header, *blobs], [], _SEND_FLAGS)
            else:
                sent = sock.send(head + header, _SEND_FLAGS)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            return b""  # the client is gone (the server sees that too)
        if sent == len(head) + body:
            return b""
        return b"".join([head, header, *map(bytes, blobs)])[sent:]


def open_writer(json_head: bytes, binary_head: bytes) -> ReplyWriter:
    """The writer for a connection, from its ``HttpReply.writer``."""
    return ReplyWriter(json_head, binary_head)


class RequestParser:
    """Parses and checks unparsed ``/infer`` bodies as the front and the core would."""

    __slots__ = ()

    def parse(
        self, body: bytearray | memoryview, header_len: int, rules: Admission
    ) -> tuple[InferRequest, AnswerSpec] | None:
        """The request, admitted by ``rules``, and how to write its answer; None when the
        front must answer it itself: anything but a plain, valid request (an error, a
        shared-memory region, classification), so that errors and statistics are the
        front's own."""
        try:
            parsed = parse_infer_request(body, header_len, rules, None)
            req = parsed.request
            if not answerable_elsewhere(parsed) or rules.check(req) is not None:
                return None
        except Exception:  # (the front's own parse answers it: the error is the same)
            return None
        return req, answer_spec(parsed, rules)


def open_parser() -> RequestParser | None:
    """The parser (None: this interpreter cannot parse requests)."""
    return RequestParser() if parse_infer_request is not None else None
