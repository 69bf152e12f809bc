"""The async iterator returned by the asyncio client's ``generate_stream``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, Protocol

from .._protocol import EventStreamState, Response, generate_error, stream_event

__all__ = ["AsyncGenerateStream", "BodyStream"]


class BodyStream(Protocol):
    """What a transport hands out for an answer read as it arrives."""

    head: Response

    async def read(self) -> bytes: ...

    async def aclose(self) -> None: ...

    def abort(self) -> None: ...


class AsyncGenerateStream(
    EventStreamState[Callable[[], Awaitable[BodyStream]], BodyStream], AsyncIterator[Any]
):
    """The events of one ``generate_stream`` call, as parsed JSON objects, as they arrive.

    The request is sent when the stream is entered (``async with``) or first iterated.
    An error status, and an error event in the stream, raise ``InferenceServerException``
    (the stream is then closed). ``await stream.aclose()`` (or leaving the ``async with``
    block, or dropping the iterator, or cancelling the task reading it) ends the stream:
    the connection goes back to the pool only when the answer was read to its end,
    otherwise it is closed.
    """

    def __init__(
        self,
        start: Callable[[], Awaitable[BodyStream]],
        verbose: bool = False,
        show_head: Callable[[Response], object] = repr,
    ) -> None:
        super().__init__(start, verbose)
        self._show_head = show_head

    async def _open(self) -> BodyStream:
        start, self._start = self._start, None
        assert start is not None
        try:
            response = await start()
        except BaseException:
            self._closed = True
            raise
        self._response = response
        head = response.head
        if self._verbose:
            print(self._show_head(head))
        if head.status != 200:
            chunks = []
            try:
                while chunk := await response.read():
                    chunks.append(chunk)
            finally:
                await self.aclose()
            raise generate_error(head.status, b"".join(chunks), head.get("Content-Type"))
        return response

    async def __aenter__(self) -> AsyncGenerateStream:
        if self._start is not None:
            await self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncGenerateStream:
        return self

    async def __anext__(self) -> Any:
        events = self._events
        while not events:
            if self._closed:
                raise StopAsyncIteration
            response = self._response if self._start is None else await self._open()
            assert response is not None
            try:
                data = await response.read()
                if not data:
                    self._decoder.end()
            except BaseException:
                self._abort()
                raise
            if not data:
                await self.aclose()
                raise StopAsyncIteration
            events.extend(self._decoder.feed(data))
        # The step per event is written out here as in GenerateStream: a shared helper
        # would add a call to every event.
        data = events.popleft()
        if self._verbose:
            print(data)
        try:
            return stream_event(data)
        except BaseException:
            self._abort()
            raise

    async def aclose(self) -> None:
        """End the stream and release its connection (idempotent)."""
        response = self._finish()
        if response is not None:
            await response.aclose()

    def _abort(self) -> None:
        response = self._finish()
        if response is not None:
            response.abort()
