"""The iterator returned by the sync client's ``generate_stream``."""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from ._protocol import EventStreamDecoder, generate_error, stream_event
from ._transport import ResponseStream

__all__ = ["GenerateStream"]


class GenerateStream(Iterator[Any]):
    """The events of one ``generate_stream`` call, as parsed JSON objects, as they arrive.

    The request is sent when the stream is entered (``with``) or first iterated. An
    error status, and an error event in the stream, raise ``InferenceServerException``
    (the stream is then closed). :meth:`close` (or leaving the ``with`` block, or
    dropping the iterator) ends the stream: the connection goes back to the pool only
    when the answer was read to its end, otherwise it is closed.
    """

    def __init__(self, start: Callable[[], ResponseStream], verbose: bool = False) -> None:
        self._start: Callable[[], ResponseStream] | None = start
        self._response: ResponseStream | None = None
        self._decoder = EventStreamDecoder()
        self._events: collections.deque[bytes] = collections.deque()
        self._verbose = verbose
        self._closed = False

    def _open(self) -> ResponseStream:
        start, self._start = self._start, None
        assert start is not None
        response = start()
        self._response = response
        head = response.head
        if self._verbose:
            print(head)
        if head.status != 200:
            try:
                body = b"".join(iter(response.read, b""))
            finally:
                self.close()
            raise generate_error(head.status, body, head.get("Content-Type"))
        return response

    def __enter__(self) -> GenerateStream:
        if self._start is not None:
            self._open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> GenerateStream:
        return self

    def __next__(self) -> Any:
        events = self._events
        while not events:
            if self._closed:
                raise StopIteration
            response = self._response if self._start is None else self._open()
            assert response is not None
            try:
                data = response.read()
                if not data:
                    self._decoder.end()
                    self.close()
                    raise StopIteration
                events.extend(self._decoder.feed(data))
            except BaseException:
                self.close()
                raise
        data = events.popleft()
        if self._verbose:
            print(data)
        try:
            return stream_event(data)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """End the stream and release its connection (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._start = None
        self._events.clear()
        if self._response is not None:
            self._response.close()

    def __del__(self) -> None:
        # Dropping an unfinished stream (e.g. ``break`` out of a for loop) is normal
        # use: close quietly.
        if not self._closed and self._response is not None:
            self._response.close()
