"""``await close()`` of the asyncio client ends every call in progress at once.

A call waiting out a retry back-off (``Retry-After: 30``) slept it out after
``close()``; calls waiting for an answer that never comes, for a free connection, or
reading a ``generate_stream``, and ``async_infer`` tasks, raise ``ClientClosedError``
soon after ``close()``, which returns soon too. The bound asserted (5 s) is far from
the waits it guards against (30 s, or for ever).

tritonclient 2.73's asyncio client (aiohttp) also ends a call waiting for its answer
(with aiohttp's "Connector is closed"); it has no retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import numpy as np
import pytest
import tritonclient.http.aio as ref_aio
from client._scripted import OK_JSON, ScriptedServer, serving

import tritonhttp
import tritonhttp.aio as aio
from tritonhttp._errors import ClientClosedError

from ._servers import SSE_HEAD, event, run

PROMPT = 5.0  # seconds: far below the waits guarded against, far above a prompt return


def _inputs() -> list[aio.InferInput]:
    x = aio.InferInput("IN", [1], "INT32")
    x.set_data_from_numpy(np.array([1], dtype=np.int32))
    return [x]


@contextlib.contextmanager
def _server(answer: Callable[[socket.socket], bool] | None) -> Iterator[ScriptedServer]:
    """A server that reads each request and answers with ``answer(conn)``, or (None)
    never answers, until the test ends."""
    stop = threading.Event()

    def handler(conn: socket.socket, index: int, request: bytes) -> bool:
        if answer is not None:
            return answer(conn)
        stop.wait()
        return False

    with serving(handler) as server:
        try:
            yield server
        finally:
            stop.set()


def _busy(conn: socket.socket) -> bool:
    conn.sendall(
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 30\r\n"
        b'Content-Length: 16\r\n\r\n{"error":"busy"}'
    )
    return True


async def _until(condition: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the server saw nothing"
        await asyncio.sleep(0.01)


async def _close_ends(client: Any, tasks: list[asyncio.Future[Any]]) -> list[BaseException]:
    """Close ``client``; what each task raised (both promptly)."""

    async def close() -> list[Any]:
        await client.close()
        return await asyncio.gather(*tasks, return_exceptions=True)

    outcomes = await asyncio.wait_for(close(), PROMPT)
    assert all(isinstance(o, BaseException) for o in outcomes), outcomes
    return outcomes  # type: ignore[return-value]


CALLS: dict[str, Callable[[aio.InferenceServerClient], Awaitable[Any]]] = {
    "get_server_metadata": lambda c: c.get_server_metadata(),
    "is_server_ready": lambda c: c.is_server_ready(),
    "infer": lambda c: c.infer("m", _inputs()),
    "async_infer": lambda c: c.async_infer("m", _inputs()),
}
RETRIED = tritonhttp.Retry(
    3, backoff_factor=5, backoff_max=30.0, methods=tritonhttp.Retry.SAFE_METHODS | {"infer"}
)


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("servers", [1, 2])
def test_close_ends_a_call_waiting_out_a_retry_back_off(call: str, servers: int) -> None:
    """The call slept out its back-off (Retry-After: 30) after close() had returned."""

    async def main() -> None:
        with _server(_busy) as server:
            client = aio.InferenceServerClient([server.url] * servers, retries=RETRIED)
            task = asyncio.ensure_future(CALLS[call](client))
            await _until(lambda: len(server.requests) == 1)
            await asyncio.sleep(0.1)  # the 503 is read: the call waits out its back-off
            (raised,) = await _close_ends(client, [task])
            assert isinstance(raised, ClientClosedError)
            assert len(server.take()) == 1

    run(main())


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("retries", [0, 3])
def test_close_ends_a_call_waiting_for_its_answer(call: str, retries: int) -> None:
    async def main() -> None:
        with _server(None) as server:
            client = aio.InferenceServerClient(
                server.url, conn_timeout=None, retries=tritonhttp.Retry(retries)
            )
            task = asyncio.ensure_future(CALLS[call](client))
            await _until(lambda: len(server.requests) == 1)
            (raised,) = await _close_ends(client, [task])
            assert isinstance(raised, ClientClosedError)
            assert len(server.take()) == 1

    run(main())


@pytest.mark.parametrize("call", sorted(CALLS))
def test_close_ends_a_call_still_connecting(call: str) -> None:
    """A server whose backlog is full drops the handshake: the call waited for ever (no
    connect_timeout) after close() had returned."""

    async def main() -> None:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(0)
            address = listener.getsockname()
            with socket.create_connection(address):  # the backlog's one place, taken
                client = aio.InferenceServerClient(f"127.0.0.1:{address[1]}", conn_timeout=None)
                task = asyncio.ensure_future(CALLS[call](client))
                await asyncio.sleep(0.3)  # in the handshake by now (either way it must end)
                (raised,) = await _close_ends(client, [task])
                assert isinstance(raised, ClientClosedError)

    run(main())


def test_a_cancelled_call_still_connecting_stays_cancelled() -> None:
    """Cancelling the task that is connecting cancels it (not a ClientClosedError)."""

    async def main() -> None:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(0)
            address = listener.getsockname()
            with socket.create_connection(address):
                client = aio.InferenceServerClient(f"127.0.0.1:{address[1]}", conn_timeout=None)
                task = asyncio.ensure_future(client.get_server_metadata())
                await asyncio.sleep(0.3)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await client.close()

    run(main())


def test_close_ends_calls_waiting_for_a_connection_and_a_stream_being_read() -> None:
    stop = threading.Event()

    def handler(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(SSE_HEAD + event(b'{"n":1}'))
        stop.wait()
        return False

    async def main() -> None:
        with serving(handler) as server:
            try:
                client = aio.InferenceServerClient(server.url, conn_limit=1, conn_timeout=None)
                seen: list[Any] = []

                async def read() -> None:
                    async for item in client.generate_stream("m", {"text_input": "x"}):
                        seen.append(item)

                reading = asyncio.ensure_future(read())
                await _until(lambda: bool(seen))
                waiting = asyncio.ensure_future(client.get_server_metadata())
                await asyncio.sleep(0.05)  # it waits for the one connection
                outcomes = await _close_ends(client, [reading, waiting])
                assert all(isinstance(o, ClientClosedError) for o in outcomes), outcomes
                assert seen == [{"n": 1}]
            finally:
                stop.set()

    run(main())


def test_close_twice_with_nothing_in_flight_and_calls_after_close() -> None:
    async def main() -> None:
        with serving(lambda conn, index, request: conn.sendall(OK_JSON) or True) as server:
            client = aio.InferenceServerClient(server.url, retries=RETRIED)
            assert await client.get_server_metadata() == {"name": "ok"}
            for _ in range(2):
                await asyncio.wait_for(client.close(), PROMPT)
            for call in (*CALLS.values(), lambda c: c.generate("m", {"text_input": "x"})):
                with pytest.raises(ClientClosedError):
                    await call(client)
            with pytest.raises(ClientClosedError):
                async for _ in client.generate_stream("m", {"text_input": "x"}):
                    pass
            async with aio.InferenceServerClient(server.url) as other:
                assert await other.get_server_metadata() == {"name": "ok"}

    run(main())


def test_tritonclient_close_ends_a_call_waiting_for_its_answer() -> None:
    """The reference, for the docs (tritonclient's asyncio client has no retries)."""

    async def main() -> None:
        with _server(None) as server:
            client = ref_aio.InferenceServerClient(server.url, conn_timeout=None)
            task = asyncio.ensure_future(client.get_server_metadata())
            await _until(lambda: len(server.requests) == 1)
            (raised,) = await _close_ends(client, [task])
            assert isinstance(raised, aiohttp.ClientConnectionError)

    run(main())
