"""Several servers and retries in the asyncio client, against real servers on real sockets
(the recording servers of ``tests/client/_httpd.py``)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np
import pytest
from client._httpd import (
    error_answer,
    infer_answer,
    json_answer,
    recorder,
    refusing_port,
    unreachable,
)

import tritonhttp
import tritonhttp.aio as aioclient
from tritonhttp._errors import ConnectError, ReadTimeout, ServiceUnavailableError


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """The test as a plain function running its coroutine in a fresh event loop."""

    @functools.wraps(test)
    def wrapper() -> None:
        asyncio.run(test())

    return wrapper


META = {"name": "recorder", "version": "0", "extensions": []}


def _inputs() -> list[tritonhttp.InferInput]:
    x = tritonhttp.InferInput("IN", [1], "INT32")
    x.set_data_from_numpy(np.array([1], dtype=np.int32))
    return [x]


@run
async def test_round_robin_and_failover() -> None:
    with recorder() as a, recorder() as b:
        async with aioclient.InferenceServerClient([a.url, b.url]) as client:
            results = await asyncio.gather(*(client.infer("m", _inputs()) for _ in range(20)))
        assert all(r.as_numpy("OUT").tolist() == [7] for r in results)
        assert (a.count("/infer"), b.count("/infer")) == (10, 10)
        async with aioclient.InferenceServerClient(
            [a.url, b.url], load_balancing="failover"
        ) as client:
            for _ in range(4):
                assert await client.get_server_metadata() == META
        assert (a.count(), b.count()) == (14, 10)


@run
async def test_down_and_unreachable_servers_are_set_aside() -> None:
    down = f"127.0.0.1:{refusing_port()}"
    with unreachable() as slow_to_connect, recorder() as up:
        async with aioclient.InferenceServerClient(
            [down, slow_to_connect, up.url], connect_timeout=0.5
        ) as client:
            t0 = time.perf_counter()
            await client.infer("m", _inputs())
            t1 = time.perf_counter()
            for _ in range(19):
                await client.infer("m", _inputs())
            t2 = time.perf_counter()
            assert client._servers.set_aside() == [0, 1]
            async_result = await client.async_infer("m", _inputs())
        assert async_result.as_numpy("OUT").tolist() == [7]
        assert up.count("/infer") == 21
        assert t2 - t1 < t1 - t0
        assert t1 - t0 >= 0.45


@run
async def test_an_infer_that_reached_a_slow_server_is_not_sent_elsewhere() -> None:
    def slow(seen: object) -> tuple[int, dict[str, str], bytes]:
        time.sleep(1.0)
        return infer_answer()

    with recorder(slow) as s, recorder() as fast:
        async with aioclient.InferenceServerClient([s.url, fast.url], read_timeout=0.3) as client:
            with pytest.raises(ReadTimeout):
                await client.infer("m", _inputs())
            assert fast.count("/infer") == 0
            assert client._servers.set_aside() == []


@run
async def test_every_server_down() -> None:
    urls = [f"127.0.0.1:{refusing_port()}" for _ in range(2)]
    async with aioclient.InferenceServerClient(urls) as client:
        with pytest.raises(ConnectError):
            await client.infer("m", _inputs())
        assert await client.is_server_live() is False


@run
async def test_a_safe_call_is_retried_after_503_then_succeeds() -> None:
    answers = [error_answer(503, "busy"), error_answer(502, "gateway"), json_answer(META)]
    with recorder(answers) as server:
        async with aioclient.InferenceServerClient(
            server.url, retries=tritonhttp.Retry(2, backoff_factor=0.01)
        ) as client:
            assert await client.get_server_metadata() == META
        assert server.count() == 3


@run
async def test_infer_retried_only_when_asked() -> None:
    with recorder([error_answer(503, "busy"), infer_answer()]) as server:
        async with aioclient.InferenceServerClient(server.url, retries=2) as client:
            with pytest.raises(ServiceUnavailableError):
                await client.infer("m", _inputs())
        assert server.count("/infer") == 1
    retry = tritonhttp.Retry(2, backoff_factor=0, methods={"infer"})
    with recorder([error_answer(503, "busy"), infer_answer()]) as server:
        async with aioclient.InferenceServerClient(server.url, retries=retry) as client:
            result = await client.infer("m", _inputs())
        assert result.as_numpy("OUT").tolist() == [7]
        assert server.count("/infer") == 2


@run
async def test_retry_after_is_honoured() -> None:
    answers = [error_answer(503, "later", **{"Retry-After": "1"}), json_answer(META)]
    with recorder(answers) as server:
        async with aioclient.InferenceServerClient(
            server.url, retries=tritonhttp.Retry(1, backoff_factor=0)
        ) as client:
            t0 = time.perf_counter()
            assert await client.get_server_metadata() == META
            waited = time.perf_counter() - t0
    assert waited >= 0.95
