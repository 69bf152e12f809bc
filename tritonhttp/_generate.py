"""The iterator returned by the sync client's ``generate_stream``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from ._protocol import EventStreamState, generate_error, stream_event
from ._transport import ResponseStream

__all__ = ["GenerateStream"]


class GenerateStream(EventStreamState[Callable[[], ResponseStream], ResponseStream], Iterator[Any]):
    """The events of one ``generate_stream`` call, as parsed JSON objects, as they arrive.

    The request is sent when the stream is entered (``with``) or first iterated. An
    error status, and an error event in the stream, raise ``InferenceServerException``
    (the stream is then closed). :meth:`close` (or leaving the ``with`` block, or
    dropping the iterator) ends the stream: the connection goes back to the pool only
    when the answer was read to its end, otherwise it is closed.
    """

    def __init__(self, start: Callable[[], ResponseStream], verbose: bool = False) -> None:
        super().__init__(start, verbose)

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
        # The step per event is written out here as in AsyncGenerateStream: a shared helper
        # would add a call to every event.
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
        response = self._finish()
        if response is not None:
            response.close()

    _abort = close  # closing never waits
