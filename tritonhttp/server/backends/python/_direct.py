"""What this backend needs of the "reply" capability: answering the client itself.

The front may hand a request down with a reply (``InferRequest.reply``, opaque to the
core). A worker process that holds the client's connection then writes the
successful answer itself, with a writer from the *reply codec*: a module the server
names when it creates the backend (``PythonBackend(reply_codec=...)``), imported by
the worker at boot. A request may even come unparsed (``DirectReply.unparsed``): the
worker parses and checks it with the codec's parser and the model's admission rules
(the core's), or declines it. The backend knows only these shapes, never the HTTP
layer.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ...core._admission import Admission
from ...core._types import InferRequest

__all__ = ["DIRECT_MAX", "DirectReply", "ReplyCodec", "ReplyWriter", "RequestParser"]

#: answers of at most this many bytes of tensor data are written by the worker (larger
#: ones, and bodies over twice this, go back through the server)
DIRECT_MAX = 64 * 1024
#: a worker holds at most this many client connections (the server answers the
#: requests of further connections itself)
DIRECT_CONNECTIONS = 256


class DirectReply(Protocol):
    """A request's reply capability, as the front hands it down."""

    @property
    def key(self) -> int:
        """Names the client connection (never reused)."""

    @property
    def fd(self) -> int:
        """A descriptor of the connection, valid until the ``on_close`` callbacks run."""

    @property
    def writer(self) -> tuple[Any, ...]:
        """The arguments of the codec's ``open_writer`` for this connection."""

    @property
    def answer(self) -> Any:
        """How to write this request's answer (picklable, for the writer); None for an
        unparsed request."""

    @property
    def unparsed(self) -> tuple[bytearray | memoryview, int] | None:
        """The request's body and JSON header length, when the front did not parse it."""

    @property
    def on_close(self) -> Callable[[Callable[[], None]], None]:
        """Registers a callback for the connection's end."""


class ReplyWriter(Protocol):
    def write(
        self,
        sock: socket.socket,
        answer: Any,
        parameters: dict[str, Any] | None,
        outputs: Sequence[tuple[str, str, Sequence[int], Any]],
        limit: int,
    ) -> bytes | None:
        """Send a successful answer; what is left to send, or None: not sent at all."""


class RequestParser(Protocol):
    def parse(
        self, body: bytearray | memoryview, header_len: int, rules: Admission
    ) -> tuple[InferRequest, Any] | None:
        """The request, parsed and admitted, and how to write its answer; None: declined
        (the front answers it)."""


class ReplyCodec(Protocol):
    def open_writer(self, *args: Any) -> ReplyWriter:
        """The writer for one connection, from ``DirectReply.writer``."""

    def open_parser(self) -> RequestParser | None:
        """The parser of unparsed requests (None: this interpreter cannot parse)."""
