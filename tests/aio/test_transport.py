"""The asyncio transport with real sockets: loops, limits, timeouts, cancellation, errors.

Scripted servers (``_servers``) misbehave on purpose; where tritonclient.http.aio's
behaviour is the reference it runs the same scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import ssl
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.http.aio as ref_aio
from client._scripted import closed_port, full_backlog_port
from client.test_transport import (
    certificate,  # noqa: F401  (fixture)
    syn_drop_time,
)

import tritonhttp
import tritonhttp.aio as aio
from tritonhttp import _errors

from ._servers import (
    OK_JSON,
    SSE_HEAD,
    STREAM_CASES,
    answer_ok,
    check_stream_case,
    event,
    run,
    serving,
    slow,
)


def int_inputs() -> list[aio.InferInput]:
    return [aio.InferInput("I", [1], "INT32").set_data_from_numpy(np.ones(1, np.int32))]


BINARY_ANSWER_HEADER = (
    b'{"outputs":[{"name":"O","datatype":"INT32","shape":[1],"parameters":{"binary_data_size":4}}]}'
)
BINARY_ANSWER = (
    b"HTTP/1.1 200 OK\r\nInference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
    % (len(BINARY_ANSWER_HEADER), len(BINARY_ANSWER_HEADER) + 4)
    + BINARY_ANSWER_HEADER
    + b"\x07\x00\x00\x00"
)


# -- construction and event loops --------------------------------------------------------


def test_constructed_outside_a_loop_and_bound_to_the_loop_that_uses_it() -> None:
    client = aio.InferenceServerClient("127.0.0.1:1")  # no running loop: fine

    async def go() -> None:
        async with serving(answer_ok) as server:
            c = aio.InferenceServerClient(server.url)
            assert await c.get_server_metadata() == {"name": "ok"}
            # the same client used from a loop running in another thread: a clear error
            other = asyncio.new_event_loop()
            thread = threading.Thread(target=other.run_forever)
            thread.start()
            try:
                future = asyncio.run_coroutine_threadsafe(c.get_server_metadata(), other)
                with pytest.raises(tritonhttp.InferenceServerException, match="event loop"):
                    await asyncio.wrap_future(future)
            finally:
                other.call_soon_threadsafe(other.stop)
                thread.join()
                other.close()
            await c.close()
        await client.close()

    run(go())
    with pytest.raises(RuntimeError, match="no running event loop"):
        ref_aio.InferenceServerClient("127.0.0.1:1")


def test_a_client_moves_on_when_its_loop_is_gone() -> None:
    """Used by one ``asyncio.run`` and then another: the first loop's connections went
    with it (here the server closed them), the client binds to the new loop."""
    from client._scripted import serving as thread_serving

    def answer_and_close(conn: socket.socket, index: int, request: bytes) -> bool:
        conn.sendall(OK_JSON)
        return False

    with thread_serving(answer_and_close) as server:
        client = aio.InferenceServerClient(server.url)

        async def once() -> Any:
            result = await client.get_server_metadata()
            await asyncio.sleep(0.05)  # the server's close arrives
            return result

        assert run(once()) == {"name": "ok"}
        assert run(once()) == {"name": "ok"}
        run(client.close())
        assert server.connections == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"url": "http://localhost:8000"}, "scheme"),
        ({"url": "https://localhost:8000"}, "scheme"),
        ({"url": "localhost:8000", "conn_limit": -1}, "conn_limit"),
        ({"url": "localhost:8000", "conn_limit": 1.5}, "conn_limit"),
        ({"url": "localhost:8000", "conn_timeout": -1}, "conn_timeout"),
        ({"url": "localhost:8000", "read_timeout": 0}, "read timeout|read_timeout"),
        ({"url": "localhost:8000", "pool_timeout": "1"}, "pool_timeout"),
        ({"url": "localhost:8000", "http_client": object()}, "httpx.AsyncClient"),
    ],
)
def test_bad_arguments_are_inference_server_exceptions(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(tritonhttp.InferenceServerException, match=match):
        aio.InferenceServerClient(**kwargs)


def test_tritonclient_raises_name_error_for_a_scheme() -> None:
    async def ref() -> None:
        ref_aio.InferenceServerClient("http://localhost:8000")

    with pytest.raises(NameError):
        run(ref())


def test_bad_client_timeout_is_refused_before_sending() -> None:
    async def go() -> None:
        async with serving(answer_ok) as server, aio.InferenceServerClient(server.url) as c:
            with pytest.raises(TypeError) as info:
                await c.get_server_metadata(client_timeout="soon")  # type: ignore[arg-type]
            assert isinstance(info.value, tritonhttp.InferenceServerException)
            with pytest.raises(ValueError):
                await c.get_server_metadata(client_timeout=aio.Timeouts(read=-1))
            assert server.requests == []

    run(go())


def test_timeouts_value_object() -> None:
    t = aio.Timeouts(5, read=1)
    assert (t.total, t.read) == (5.0, 1.0)
    assert repr(t) == "Timeouts(total=5.0, read=1.0)"
    assert t == aio.Timeouts(5.0, read=1.0) and hash(t) == hash(aio.Timeouts(5.0, read=1.0))
    with pytest.raises(AttributeError):
        t.total = 3  # type: ignore[misc]


# -- unreachable servers ------------------------------------------------------------------


def test_connection_refused() -> None:
    url = f"127.0.0.1:{closed_port()}"

    async def go() -> None:
        async with aio.InferenceServerClient(url) as client:
            assert await client.is_server_live() is False
            assert await client.is_model_ready("m") is False
            with pytest.raises(ConnectionRefusedError) as info:
                await client.get_server_metadata()
            assert isinstance(info.value, _errors.ConnectError)
            assert f"http://{url}" in str(info.value)
        async with ref_aio.InferenceServerClient(url) as ref:
            with pytest.raises(OSError):  # aiohttp.ClientConnectorError
                await ref.is_server_live()

    run(go())


def test_connect_timeout() -> None:
    async def go(port: int, baseline: float) -> None:
        async with aio.InferenceServerClient(f"127.0.0.1:{port}", connect_timeout=0.3) as client:
            start = time.monotonic()
            with pytest.raises(_errors.ConnectTimeout) as info:  # (any other error fails)
                await client.get_server_metadata()
            assert isinstance(info.value, asyncio.TimeoutError)
            elapsed = time.monotonic() - start
            assert elapsed >= 0.3 * 0.9  # the timeout had to pass
            assert elapsed < 5 * baseline  # ...and no retry loop nor hang after it
            assert client._transport.open_connections == 0

    with full_backlog_port() as port:
        run(go(port, syn_drop_time(port)))


# -- timeouts ------------------------------------------------------------------------------


def test_read_timeout_never_leaves_a_broken_connection_in_the_pool() -> None:
    async def go() -> None:
        async with (
            serving(slow(0.6)) as server,
            aio.InferenceServerClient(server.url, read_timeout=0.2) as client,
        ):
            start = time.monotonic()
            with pytest.raises(_errors.ReadTimeout) as info:
                await client.get_model_metadata("slow")
            # after its 0.2 s timeout; the ReadTimeout (not the answer that would come at
            # 0.6 s) shows it did not wait for the answer
            assert time.monotonic() - start >= 0.2 * 0.9
            assert isinstance(info.value, asyncio.TimeoutError)
            assert server.url in str(info.value)
            assert client._transport.open_connections == 0
            await server.wait_all_closed()
            # the late answer of the first request cannot be mistaken for this one's
            assert await client.get_server_metadata() == {"name": "ok"}
            assert server.connections == 2
            assert await client.is_model_ready("slow") is False  # a probe: False

    run(go())


def test_total_deadline_and_per_call_overrides() -> None:
    async def go() -> None:
        async with (
            serving(slow(0.4)) as server,
            aio.InferenceServerClient(server.url, conn_timeout=0.15) as client,
        ):
            with pytest.raises(_errors.ReadTimeout):
                await client.get_model_metadata("slow")
            assert await client.get_model_metadata("slow", client_timeout=None) == {"name": "ok"}
            assert await client.get_model_metadata("slow", client_timeout=2) == {"name": "ok"}
            with pytest.raises(_errors.ReadTimeout):
                await client.get_model_metadata("slow", client_timeout=aio.Timeouts(None, read=0.1))
            assert await client.get_model_metadata("slow", client_timeout=aio.Timeouts(None)) == {
                "name": "ok"
            }
            # tritonclient: conn_timeout is a total deadline; asyncio.TimeoutError
            async with ref_aio.InferenceServerClient(server.url, conn_timeout=0.15) as ref:
                with pytest.raises(asyncio.TimeoutError):
                    await ref.get_model_metadata("slow")
            async with aio.InferenceServerClient(server.url, conn_timeout=0) as client:
                assert await client.get_model_metadata("slow") == {"name": "ok"}  # 0: no limit

    run(go())


def test_pool_limit_and_pool_timeout() -> None:
    async def go() -> None:
        async with (
            serving(slow(0.4)) as server,
            aio.InferenceServerClient(server.url, conn_limit=1, pool_timeout=0.1) as client,
        ):
            busy = asyncio.ensure_future(client.get_model_metadata("slow"))
            await asyncio.sleep(0.05)
            with pytest.raises(_errors.PoolTimeout) as info:
                await client.get_server_metadata()
            assert isinstance(info.value, TimeoutError)
            assert await busy == {"name": "ok"}
            assert await client.get_server_metadata() == {"name": "ok"}
            assert server.connections == 1
            async with aio.InferenceServerClient(server.url, conn_limit=3) as client:
                await asyncio.gather(*(client.get_model_metadata("slow") for _ in range(9)))
                assert client._transport.open_connections == 3

    run(go())


# -- cancellation and closing ---------------------------------------------------------------


def test_cancellation_leaves_no_open_connection() -> None:
    async def go() -> None:
        async with (
            serving(slow(5)) as server,
            aio.InferenceServerClient(server.url) as client,
        ):
            task = asyncio.ensure_future(client.get_model_metadata("slow"))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert client._transport.open_connections == 0
            await server.wait_all_closed()
            # cancelled while waiting for a free connection: the slot is not lost
            limited = aio.InferenceServerClient(server.url, conn_limit=1)
            first = asyncio.ensure_future(limited.get_model_metadata("slow"))
            await asyncio.sleep(0.05)
            second = asyncio.ensure_future(limited.get_server_metadata())
            await asyncio.sleep(0.05)
            second.cancel()
            first.cancel()
            await asyncio.gather(first, second, return_exceptions=True)
            assert await limited.get_server_metadata() == {"name": "ok"}
            await limited.close()
            assert limited._transport.open_connections == 0

    run(go())


def test_close_while_requests_are_in_flight() -> None:
    async def go() -> None:
        async with serving(slow(5)) as server:
            client = aio.InferenceServerClient(server.url)
            tasks = [asyncio.ensure_future(client.get_model_metadata("slow")) for _ in range(3)]
            await asyncio.sleep(0.1)
            await client.close()
            for task in tasks:
                with pytest.raises(_errors.ClientClosedError):
                    await task
            assert client._transport.open_connections == 0
            await server.wait_all_closed()
            await client.close()  # idempotent
            for call in (client.get_server_metadata(), client.is_server_live()):
                with pytest.raises(RuntimeError) as info:
                    await call
                assert isinstance(info.value, tritonhttp.InferenceServerException)
            with pytest.raises(RuntimeError):
                client.generate_stream("m", {"a": 1})

    run(go())


def test_an_unclosed_client_warns() -> None:
    with pytest.raises(tritonhttp.InferenceServerException, match="scheme"):
        aio.InferenceServerClient("http://localhost:8000")
    gc.collect()  # a half-built client must not complain from __del__

    async def go() -> None:
        async with serving(answer_ok) as server:
            client = aio.InferenceServerClient(server.url)
            await client.get_server_metadata()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                del client
                gc.collect()
            assert any(issubclass(w.category, ResourceWarning) for w in caught)
            await server.wait_all_closed()  # and its connections were aborted

    run(go())


# -- keep-alive, retries, broken answers ---------------------------------------------------


def test_connections_are_kept_alive_and_bounded() -> None:
    async def go() -> None:
        async with (
            serving(answer_ok) as server,
            aio.InferenceServerClient(server.url, conn_limit=4) as client,
        ):
            for _ in range(10):
                await client.get_server_metadata()
            assert server.connections == 1
            await asyncio.gather(*(client.get_server_metadata() for _ in range(64)))
            assert 1 <= server.connections <= 4

    run(go())


def test_idle_connection_closed_by_the_server_is_replaced() -> None:
    async def one_per_connection(writer: asyncio.StreamWriter, index: int, req: bytes) -> bool:
        writer.write(BINARY_ANSWER if req.startswith(b"POST") else OK_JSON)
        return False

    async def go() -> None:
        async with (
            serving(one_per_connection) as server,
            aio.InferenceServerClient(server.url) as client,
        ):
            for _ in range(3):
                assert await client.get_server_metadata() == {"name": "ok"}
                await asyncio.sleep(0.05)
                result = await client.infer("m", int_inputs())
                assert result.as_numpy("O").tolist() == [7]
                await asyncio.sleep(0.05)
            assert len(server.requests) == 6  # each reached the server exactly once

    run(go())


async def drop_second_request(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
    """Answer the first request of a connection; read the second and hang up."""
    if index == 0:
        writer.write(OK_JSON)
        return True
    return False


def test_safe_requests_are_retried_once_posts_are_not() -> None:
    async def go() -> None:
        async with (
            serving(drop_second_request) as server,
            aio.InferenceServerClient(server.url) as client,
        ):
            assert await client.get_server_metadata() == {"name": "ok"}
            assert await client.get_server_metadata() == {"name": "ok"}  # retried
            assert len(server.requests) == 3
            with pytest.raises(ConnectionResetError) as info:
                await client.get_model_repository_index()  # a POST: not sent again
            assert isinstance(info.value, _errors.TransportError)
            assert server.url in str(info.value)
            assert len(server.requests) == 4

    run(go())


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", _errors.ProtocolError),
        (b'HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{"partial', ConnectionResetError),
        (b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":', ConnectionResetError),
        (b"", ConnectionResetError),
    ],
)
def test_broken_answers(reply: bytes, error: type[Exception]) -> None:
    async def broken(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        writer.write(reply)
        return False

    async def go() -> None:
        async with serving(broken) as server, aio.InferenceServerClient(server.url) as client:
            with pytest.raises(error) as info:
                await client.get_model_repository_index()
            assert isinstance(info.value, tritonhttp.InferenceServerException)
            assert client._transport.open_connections == 0

    run(go())


def test_chunked_interim_and_close_delimited_answers() -> None:
    async def chunked(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'5\r\n{"a":\r\n3\r\n12}\r\n0\r\n\r\n'
        )
        return True

    async def until_close(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        writer.write(b'HTTP/1.0 200 OK\r\n\r\n{"b": [1, 2]}')
        return False

    async def go() -> None:
        async with serving(chunked) as server, aio.InferenceServerClient(server.url) as client:
            assert await client.get_server_metadata() == {"a": 12}
            assert await client.get_server_metadata() == {"a": 12}
            assert server.connections == 1
        async with serving(until_close) as server, aio.InferenceServerClient(server.url) as c:
            assert await c.get_server_metadata() == {"b": [1, 2]}
            assert await c.get_server_metadata() == {"b": [1, 2]}

    run(go())


def test_large_binary_answer_is_received_into_one_writable_buffer() -> None:
    payload = np.arange(1 << 20, dtype=np.int32)  # 4 MB
    header = (
        b'{"outputs":[{"name":"O","datatype":"INT32","shape":[%d],'
        b'"parameters":{"binary_data_size":%d}}]}' % (payload.size, payload.nbytes)
    )
    answer = (
        b"HTTP/1.1 200 OK\r\nInference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
        % (len(header), len(header) + payload.nbytes)
    )

    async def big(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        writer.write(answer + header)
        for start in range(0, payload.nbytes, 1 << 16):  # in pieces, as a network would
            writer.write(payload.data.cast("B")[start : start + (1 << 16)])
            await writer.drain()
        return True

    async def go() -> None:
        async with serving(big) as server, aio.InferenceServerClient(server.url) as client:
            out = (await client.infer("m", int_inputs())).as_numpy("O")
            np.testing.assert_array_equal(out, payload)
            assert out.flags.writeable

    run(go())


def test_invalid_header_values_fail_before_sending() -> None:
    async def go() -> None:
        async with serving(answer_ok) as server, aio.InferenceServerClient(server.url) as c:
            with pytest.raises(ValueError, match="invalid value") as info:
                await c.get_server_metadata(headers={"X-Bad": "a\r\nInjected: 1"})
            assert isinstance(info.value, tritonhttp.InferenceServerException)
            with pytest.raises(ValueError, match="model version"):
                await c.get_model_metadata("m", "1 HTTP/1.1")
            assert server.requests == []

    run(go())


# -- the request bytes are the sync client's ----------------------------------------------


def _calls(c: Any) -> list[Any]:
    return [
        lambda: c.get_server_metadata(),
        lambda: c.get_model_metadata("a b", "2", headers={"X-A": "1", "x-a": "2"}),
        lambda: c.get_server_metadata(query_params={"q": ["1", "2"], "r": "x y"}),
        lambda: c.infer(
            "m",
            int_inputs(),
            request_id="r",
            parameters={"p": 1},
            headers={"X-Trace": "t"},
            request_compression_algorithm="gzip",
        ),
        lambda: c.load_model("m", config='{"a": 1}', files={"file:1/x": b"\x00\x01"}),
        lambda: c.unregister_system_shared_memory("r"),
    ]


def test_the_request_bytes_are_the_sync_clients() -> None:
    """Same core, same bytes: the asyncio client's requests equal the sync client's."""

    async def any_answer(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        writer.write(BINARY_ANSWER if b"/infer " in request else OK_JSON)
        return True

    async def go() -> tuple[list[bytes], list[bytes]]:
        async with (
            serving(any_answer) as server,
            aio.InferenceServerClient(server.url) as client,
        ):
            for call in _calls(client):
                with contextlib.suppress(Exception):
                    await call()
            ours = list(server.requests)
            server.requests.clear()
            sync = tritonhttp.InferenceServerClient(server.url)
            try:
                for call in _calls(sync):
                    with contextlib.suppress(Exception):
                        await asyncio.to_thread(call)
            finally:
                sync.close()
            return ours, list(server.requests)

    ours, sync_requests = run(go())
    assert len(ours) == 6
    assert [_no_gzip_time(r) for r in ours] == [_no_gzip_time(r) for r in sync_requests]


def _no_gzip_time(request: bytes) -> bytes:
    """``request`` with the timestamp of its gzip body zeroed: ``gzip.compress`` stamps
    the current second (as tritonclient's does), which may tick between the two runs."""
    at = request.find(b"\x1f\x8b\x08")
    return request if at < 0 else request[: at + 4] + bytes(4) + request[at + 8 :]


# -- httpx ------------------------------------------------------------------------------------


def test_a_caller_supplied_httpx_client_sends_the_cores_request() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/infer"):
            return httpx.Response(
                200,
                content=BINARY_ANSWER.split(b"\r\n\r\n", 1)[1],
                headers={"Inference-Header-Content-Length": str(len(BINARY_ANSWER_HEADER))},
            )
        if "/nope" in request.url.path:
            return httpx.Response(404, json={"error": "no model"})
        return httpx.Response(200, json={"name": "ok"})

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            async with aio.InferenceServerClient(
                "triton.example:8000/base", http_client=http
            ) as client:
                assert await client.get_server_metadata(query_params={"a": "b c"}) == {"name": "ok"}
                result = await client.infer("m", int_inputs(), headers={"X-T": "1"})
                assert result.as_numpy("O").tolist() == [7]
                with pytest.raises(_errors.NotFoundError, match=r"\[404\] no model"):
                    await client.get_model_metadata("nope")
                assert await client.is_model_ready("nope") is False
            await http.get("http://other/")  # still open: the httpx client is the caller's

    run(go())
    get, post = seen[0], seen[1]
    assert str(get.url) == "http://triton.example:8000/base/v2?a=b+c"
    assert "accept-encoding" not in get.headers
    assert get.headers["user-agent"].startswith("tritonhttp/")
    assert post.headers["inference-header-content-length"] == str(len(post.content) - 4)
    assert post.headers["x-t"] == "1" and post.content.endswith(b"\x01\x00\x00\x00")


def test_httpx_transport_errors_are_typed() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    def stall(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    async def go() -> None:
        for handler, error in ((refuse, _errors.ConnectError), (stall, _errors.ReadTimeout)):
            async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
                client = aio.InferenceServerClient("h:1", http_client=http)
                with pytest.raises(error):
                    await client.get_server_metadata()
                assert await client.is_server_live() is False
                await client.close()

    run(go())


def test_httpx_over_real_sockets_with_deadline() -> None:
    async def go() -> None:
        async with (
            serving(slow(0.4)) as server,
            httpx.AsyncClient() as http,
            aio.InferenceServerClient(server.url, http_client=http, conn_timeout=0.15) as client,
        ):
            assert await client.get_server_metadata() == {"name": "ok"}
            with pytest.raises(_errors.ReadTimeout, match="deadline"):
                await client.get_model_metadata("slow")
            with pytest.raises(_errors.ReadTimeout):
                await client.get_model_metadata("slow", client_timeout=aio.Timeouts(read=0.1))
            assert await client.get_model_metadata("slow", client_timeout=None) == {"name": "ok"}
        async with httpx.AsyncClient() as http:
            client = aio.InferenceServerClient(f"127.0.0.1:{closed_port()}", http_client=http)
            with pytest.raises(ConnectionRefusedError):
                await client.get_server_metadata()
            await client.close()

    run(go())


# -- TLS ---------------------------------------------------------------------------------------


def test_tls(certificate: tuple[Path, Path]) -> None:  # noqa: F811
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(*certificate)

    async def go() -> None:
        server = await asyncio.start_server(_tls_answer, "localhost", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        try:
            trusted = ssl.create_default_context(cafile=str(certificate[0]))
            async with aio.InferenceServerClient(
                f"localhost:{port}", ssl=True, ssl_context=trusted
            ) as client:
                assert await client.get_server_metadata() == {"name": "ok"}
            async with aio.InferenceServerClient(f"localhost:{port}", ssl=True) as client:
                with pytest.raises(ssl.SSLError) as info:  # unknown CA
                    await client.get_server_metadata()
                assert isinstance(info.value, _errors.ConnectError)
        finally:
            server.close()
            await server.wait_closed()

    run(go())


async def _tls_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(OK_JSON)
        await writer.drain()
        await reader.read()  # until the client closes
    writer.close()


# -- streams that go wrong ------------------------------------------------------------------


def _stream_server(*pieces: bytes, close: bool = True) -> Any:
    async def handler(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)
        return not close

    return handler


async def _collect(client: aio.InferenceServerClient) -> tuple[list[Any], BaseException | None]:
    seen: list[Any] = []
    try:
        async for event in client.generate_stream("m", {"text_input": "x"}):
            seen.append(event)
    except tritonhttp.InferenceServerException as e:
        return seen, e
    return seen, None


@pytest.mark.parametrize(("pieces", "events", "error", "text"), STREAM_CASES)
def test_streams_that_go_wrong_raise_clearly(
    pieces: tuple[bytes, ...], events: list[Any], error: type[Exception] | None, text: str | None
) -> None:
    async def go() -> None:
        async with serving(_stream_server(*pieces)) as server:
            async with aio.InferenceServerClient(server.url, read_timeout=5) as client:
                seen, raised = await asyncio.wait_for(_collect(client), 10)
                check_stream_case(seen, raised, events, error, text)
                if isinstance(raised, _errors.TransportError):  # else: a complete answer
                    assert client._transport.open_connections == 0
            async with httpx.AsyncClient() as http:  # the same through httpx
                client = aio.InferenceServerClient(server.url, http_client=http)
                seen, raised = await asyncio.wait_for(_collect(client), 10)
                assert seen == events
                assert (raised is None) == (error is None), raised
                await client.close()

    run(go())


def test_a_stalled_stream_times_out() -> None:
    stalled = 3.0

    async def stall(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        writer.write(SSE_HEAD + event(b'{"n":1}'))
        await asyncio.sleep(stalled)
        return False

    async def go() -> None:
        async with serving(stall) as server:
            async with aio.InferenceServerClient(server.url, read_timeout=0.2) as client:
                start = time.monotonic()
                seen, raised = await _collect(client)
                assert seen == [{"n": 1}] and isinstance(raised, _errors.ReadTimeout)
                elapsed = time.monotonic() - start
                assert 0.2 * 0.9 <= elapsed < stalled  # its timeout, not the stall's end
                assert client._transport.open_connections == 0
            await server.wait_all_closed()

    run(go())


def test_a_consumer_slower_than_the_stream_loses_nothing() -> None:
    """Many events while the reader is busy: reading pauses and resumes, none is lost."""
    n = 3000
    body = b"".join(event(b'{"i":%d,"pad":"%s"}' % (i, b"x" * 600)) for i in range(n))

    async def flood(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        writer.write(SSE_HEAD + body + b"0\r\n\r\n")
        return True

    async def go() -> None:
        async with serving(flood) as server, aio.InferenceServerClient(server.url) as client:
            stream = client.generate_stream("m", {"a": 1})
            first = await stream.__anext__()
            await asyncio.sleep(0.3)  # everything arrives meanwhile (about 2 MB)
            rest = [e["i"] async for e in stream]
            assert [first["i"], *rest] == list(range(n))
            assert client._transport.open_connections == 1  # complete: kept for reuse

    run(go())


def test_verbose_streams_and_generate(capsys: pytest.CaptureFixture[str]) -> None:
    answer = SSE_HEAD + event(b'{"n":1}') + b"0\r\n\r\n"

    async def handler(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        if b"generate_stream" in request:
            writer.write(answer)
        else:
            writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{"n":2}')
        return True

    async def go() -> None:
        async with (
            serving(handler) as server,
            aio.InferenceServerClient(server.url, verbose=True) as client,
        ):
            assert [e async for e in client.generate_stream("m", {"a": 1})] == [{"n": 1}]
            assert await client.generate("m", {"a": 1}) == {"n": 2}
            url = f"http://{server.url}/v2/models/m"
            return url

    url = run(go())
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"POST {url}/generate_stream, headers {{'Content-Type': 'application/json'}}",
        '{"a":1}',
        f"<ClientResponse({url}/generate_stream) [200 OK]>",
        "<CIMultiDictProxy('Content-Type': 'text/event-stream; charset=utf-8', "
        "'Transfer-Encoding': 'chunked')>",
        "",
        "b'{\"n\":1}'",
        f"POST {url}/generate, headers {{'Content-Type': 'application/json'}}",
        '{"a":1}',
        f"<ClientResponse({url}/generate) [200 OK]>",
        "<CIMultiDictProxy('Content-Length': '7')>",
        "",
        "b'{\"n\":2}'",
    ]


def test_on_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")
    payload = SSE_HEAD + event(b'{"n":1}') + event(b'{"n":2}') + b"0\r\n\r\n"

    async def handler(writer: asyncio.StreamWriter, index: int, request: bytes) -> bool:
        if b"generate_stream" in request:
            writer.write(payload)
        elif b"/infer" in request:
            writer.write(BINARY_ANSWER)
        elif b"slow" in request:
            await asyncio.sleep(1)
        else:
            writer.write(OK_JSON)
        return True

    async def go() -> None:
        async with (
            serving(handler) as server,
            aio.InferenceServerClient(server.url, read_timeout=0.2) as client,
        ):
            results = await asyncio.gather(*(client.infer("m", int_inputs()) for _ in range(8)))
            assert all(r.as_numpy("O").tolist() == [7] for r in results)
            assert [e["n"] async for e in client.generate_stream("m", {"a": 1})] == [1, 2]
            with pytest.raises(_errors.ReadTimeout):
                await client.get_model_metadata("slow")
            assert await client.get_server_metadata() == {"name": "ok"}

    loop = uvloop.new_event_loop()
    try:
        loop.run_until_complete(asyncio.wait_for(go(), 30))
    finally:
        loop.close()
