"""Triton's generate extension without I/O: request bodies, results, server-sent events.

``POST .../generate`` answers one JSON object; ``POST .../generate_stream`` answers a
``text/event-stream`` with one ``data: <json>`` event per model response. Errors come
three ways, all raised as ``InferenceServerException`` here:

* an error status (404 unknown model, 400 when the *first* model response failed, ...)
  with ``{"error": ...}`` as JSON or as the stream's only event;
* ``200`` with ``{"error": ...}`` as the body (``/generate`` on a model that did not
  produce exactly one response);
* ``data: {"error": ...}`` later in a stream that started with 200 (the status line is
  already sent by then).

Triton reports a failed model response as 400 in the first two cases, so the third is
raised the same way (``BadRequestError``, status ``"400"``): handling does not depend on
where in the stream the model failed.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from .._errors import ProtocolError, _InvalidArgument, server_error
from ._infer import Buffer
from ._json import JSONDecodeError, dumps, loads
from ._status import error_for

__all__ = [
    "EventStreamDecoder",
    "EventStreamState",
    "generate_body",
    "generate_error",
    "generate_result",
    "stream_event",
]

#: Status used for an error reported inside a 200 answer (see the module docstring).
_IN_BODY_ERROR_STATUS = 400

_Start = TypeVar("_Start")
_Answer = TypeVar("_Answer")


def generate_body(inputs: Mapping[str, Any], parameters: Mapping[str, Any] | None) -> str:
    """The JSON request: ``inputs`` (input name or parameter -> value) plus ``parameters``.

    Values may be numbers, strings, booleans, lists of them, or numpy arrays/scalars.
    Raises ``InferenceServerException`` (also a ``ValueError``) when ``inputs`` is not a
    mapping with string keys, or names ``parameters`` while ``parameters=`` is given.
    """
    if not isinstance(inputs, Mapping):
        raise _InvalidArgument(
            f"inputs must be a mapping of input names to values, got {type(inputs).__name__}"
        )
    request = dict(inputs)
    for key in request:
        if not isinstance(key, str):
            raise _InvalidArgument(f"input names must be strings, got {key!r}")
    if parameters is not None:
        if not isinstance(parameters, Mapping):
            raise _InvalidArgument(f"parameters must be a mapping, got {type(parameters).__name__}")
        if "parameters" in request:
            raise _InvalidArgument(
                "inputs has a 'parameters' entry and parameters= is given: pass one of them"
            )
        request["parameters"] = dict(parameters)
    try:
        return dumps(request)
    except TypeError as e:
        raise _InvalidArgument(f"cannot encode the generate request as JSON: {e}") from None


def _unless_error(answer: Any) -> Any:
    """``answer``, unless it is an error object (``{"error": ...}``): that is raised."""
    if isinstance(answer, dict) and "error" in answer and "model_name" not in answer:
        raise server_error(_IN_BODY_ERROR_STATUS, str(answer["error"]))
    return answer


def generate_result(status: int, body: Buffer) -> Any:
    """The parsed answer of ``/generate``; raises the server's error."""
    error = error_for(status, body)
    if error is not None:
        raise error
    try:
        result = loads(bytes(body))
    except (JSONDecodeError, UnicodeDecodeError) as e:
        raise ProtocolError(f"the generate response is not JSON: {e}") from None
    return _unless_error(result)


def generate_error(status: int, body: Buffer, content_type: str | None) -> Exception:
    """The exception for a ``/generate_stream`` answer whose status is not 200.

    Triton sends the error of a failed first response as the stream's only event;
    other errors (unknown model, bad JSON) are plain JSON bodies.
    """
    if content_type is not None and content_type.startswith("text/event-stream"):
        decoder = EventStreamDecoder()
        events = decoder.feed(body)
        if events:
            body = events[0]
    error = error_for(status, body)
    if error is None:  # not reached for status != 200; keeps the type exact
        return server_error(status, "unexpected answer")
    return error


def stream_event(data: bytes) -> Any:
    """One event of ``/generate_stream`` parsed; raises the error it reports."""
    try:
        event = loads(data)
    except (JSONDecodeError, UnicodeDecodeError) as e:
        raise ProtocolError(f"a generate_stream event is not JSON: {e}: {data[:200]!r}") from None
    return _unless_error(event)


class EventStreamDecoder:
    """Incremental ``text/event-stream`` parser: bytes in, each event's data out.

    Lines end with CRLF, LF or CR (split anywhere across feeds); ``data:`` lines are
    joined with ``\\n``; comments and the ``event``/``id``/``retry`` fields are ignored;
    a blank line ends an event (an event without data, or with empty data, is skipped).
    """

    __slots__ = ("_data", "_partial", "_skip_lf")

    def __init__(self) -> None:
        self._partial = b""  # an unterminated line
        self._data: list[bytes] = []  # data lines of the event being read
        self._skip_lf = False  # the last chunk ended with CR: a leading LF belongs to it

    def feed(self, chunk: Buffer) -> list[bytes]:
        """The data of every event completed by ``chunk``, in order."""
        data = bytes(chunk)
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        if self._partial:
            data = self._partial + data
            self._partial = b""
        if not data:
            return []
        events: list[bytes] = []
        lines = data.splitlines(keepends=True)
        last = lines[-1]
        if not last.endswith((b"\n", b"\r")):
            self._partial = lines.pop()
        elif last.endswith(b"\r"):
            self._skip_lf = True
        for raw in lines:
            line = raw.rstrip(b"\r\n")
            if not line:
                if self._data:
                    joined = b"\n".join(self._data)
                    self._data = []
                    if joined:  # an event whose data is empty is not dispatched
                        events.append(joined)
                continue
            name, _, value = line.partition(b":")
            if name == b"data":  # "data" alone is an empty data line
                self._data.append(value[1:] if value[:1] == b" " else value)
        return events

    @property
    def idle(self) -> bool:
        """Whether no event is half-read (the stream may end here)."""
        return not self._partial and not self._data

    def end(self) -> None:
        """The stream ended; raises ``ProtocolError`` if it stopped inside an event."""
        if not self.idle:
            raise ProtocolError("the event stream ended in the middle of an event")


class EventStreamState(Generic[_Start, _Answer]):
    """What a ``generate_stream`` iterator holds, sync or asyncio alike.

    ``_start`` sends the request (None once called, or once closed), ``_response`` is
    the answer being read, ``_events`` the decoded events not yet handed out. The
    iterators do the reading; :meth:`_finish` does the bookkeeping of every way a
    stream ends, and dropping the iterator ends it with :meth:`_abort`.
    """

    def __init__(self, start: _Start, verbose: bool) -> None:
        self._start: _Start | None = start
        self._response: _Answer | None = None
        self._decoder = EventStreamDecoder()
        self._events: collections.deque[bytes] = collections.deque()
        self._verbose = verbose
        self._closed = False

    def _finish(self) -> _Answer | None:
        """Mark the stream closed; the answer to release (None: none, or closed before)."""
        if self._closed:
            return None
        self._closed = True
        self._start = None
        self._events.clear()
        return self._response

    def _abort(self) -> None:
        """End the stream at once, without waiting (the iterator's own way)."""
        raise NotImplementedError

    def __del__(self) -> None:
        # Dropping an unfinished stream (``break`` out of a loop) is normal use: quietly.
        self._abort()
