"""A scripted HTTP server on the test's own event loop (real sockets, misbehaving on purpose)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tritonhttp import _errors as errors

#: ``handler(writer, index_on_connection, request) -> keep the connection open?``
Handler = Callable[[asyncio.StreamWriter, int, bytes], Awaitable[bool]]

OK_JSON = b'HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{"name":"ok"}'
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(obj: bytes) -> bytes:
    """One SSE event as one HTTP chunk."""
    return chunk(b"data: " + obj + b"\n\n")


#: Streams that end or frame events in unusual ways, for the sync and asyncio clients:
#: (what the server writes, the events the client yields, the error raised, its text).
STREAM_CASES = [
    # the server goes away after one event (chunked body cut short)
    ((SSE_HEAD, event(b'{"n":1}')), [{"n": 1}], ConnectionResetError, "middle of a response"),
    # a body delimited by closing the connection, cut inside an event
    (
        (
            b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",
            b'data: {"n":1}\n\ndata: {"n',
        ),
        [{"n": 1}],
        errors.ProtocolError,
        "middle of an event",
    ),
    # ... and one that ends cleanly
    (
        (b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n", b'data: {"n":1}\n\n'),
        [{"n": 1}],
        None,
        None,
    ),
    # an event that is not JSON
    ((SSE_HEAD, event(b"not json"), b"0\r\n\r\n"), [], errors.ProtocolError, "not JSON"),
    # SSE framing: CRLF, comments, other fields, data over several lines, odd splits
    (
        (
            SSE_HEAD,
            chunk(b': comment\r\nevent: x\r\nid: 7\r\ndata: {"a":\r\ndata: 1}\r'),
            chunk(b'\n\r\ndata:{"b":2}\n\n'),
            chunk(b'data: {"c"'),
            chunk(b":3}\n"),
            chunk(b"\n"),
            b"0\r\n\r\n",
        ),
        [{"a": 1}, {"b": 2}, {"c": 3}],
        None,
        None,
    ),
    # the error event of a first response that failed (Triton: 400 + one event)
    (
        (
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n",
            event(b'{"error":"bad"}'),
            b"0\r\n\r\n",
        ),
        [],
        errors.BadRequestError,
        "[400] bad",
    ),
]


def check_stream_case(
    seen: list[Any], raised: BaseException | None, events: list[Any], error: Any, text: Any
) -> None:
    """A client's events and error for a STREAM_CASES entry are what the case says."""
    assert seen == events
    if error is None:
        assert raised is None
    else:
        assert isinstance(raised, error), raised
        assert text is not None and text in str(raised)


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    body = b""
    if match:
        try:
            body = await reader.readexactly(int(match.group(1)))
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
    return head + body


class ScriptedServer:
    """Calls ``handler`` for every request; counts connections and what it received."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0  # accepted so far
        self.open = 0  # open right now (the client has not closed them)
        self.requests: list[bytes] = []
        self.closed_by_client = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self._writers.add(writer)
        index = 0
        try:
            while True:
                request = await read_request(reader)
                if request is None:  # the client closed the connection
                    self.closed_by_client.set()
                    return
                self.requests.append(request)
                answering = asyncio.ensure_future(self.handler(writer, index, request))
                while not answering.done():  # notice a client that gives up meanwhile
                    await asyncio.wait({answering}, timeout=0.02)
                    if reader.at_eof() or reader.exception() is not None:
                        answering.cancel()
                        self.closed_by_client.set()
                        return
                keep = answering.result()
                await writer.drain()
                index += 1
                if not keep:
                    return
        except (ConnectionError, asyncio.CancelledError):
            self.closed_by_client.set()
        finally:
            self.open -= 1
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def wait_all_closed(self, timeout: float = 5.0) -> None:
        """Wait until the client has closed every connection."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.open:
            assert asyncio.get_running_loop().time() < deadline, "connections left open"
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer(handler)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


async def answer_ok(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
    writer.write(OK_JSON)
    return True


def slow(delay: float, reply: bytes = OK_JSON) -> Handler:
    """Answer after ``delay`` seconds when the request target contains ``slow``."""

    async def handler(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        if b"slow" in request.split(b"\r\n", 1)[0]:
            await asyncio.sleep(delay)
        writer.write(reply)
        return True

    return handler


def run(coro: Any, timeout: float = 60) -> Any:
    """asyncio.run with an overall limit (a hang fails the test instead of the suite)."""

    return asyncio.run(asyncio.wait_for(coro, timeout))
