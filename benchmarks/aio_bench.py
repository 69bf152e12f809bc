"""tritonhttp.aio vs tritonclient.http.aio against REAL Triton, side by side in one run.

Scenarios:

* ``aio x16 add_sub``   16 tasks on one event loop, each building the inputs, calling
  ``infer`` and reading both outputs, over and over; req/s and client CPU us/request
  (``time.process_time``: this process only; the server runs in its own)
* ``transports x16``    the transport candidates alone: the same pre-built add_sub
  request sent by 16 tasks through (a) tritonhttp.aio's asyncio protocol transport,
  (b) an ``aiohttp.ClientSession``, (c) a stock ``httpx.AsyncClient``, (d) tritonhttp.aio
  over that httpx client, reading each answer whole
* ``generate_stream``   events/s of one long stream (``text_stream``, 2,000 events)
  through tritonhttp.aio, tritonhttp.aio over httpx and the sync tritonhttp client;
  tritonclient has no generate_stream, so the baseline is httpx's ``aiter_lines`` with
  ``json.loads`` per event. Triton's decoupled Python model bounds this rate, so the
  same clients also read a replayed stream: 50,000 events in Triton's framing (one
  chunk per event) served from memory by a local socket, where only the client counts

The clients take turns within each round (a change in the machine's load hits all);
the best round counts.

Usage: ``python benchmarks/aio_bench.py [--url HOST:PORT] [--quick]`` (``--url`` must
serve tests/models and tests/repos/cli_generate). Prints ``name: ours X, reference Y,
ratio R`` lines (ratio > 1: ours is better).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import tritonclient.http.aio as ref_aio

import tritonhttp
import tritonhttp.aio as aio

try:
    from _common import ADD_A as A
    from _common import ADD_B as B
    from _common import aio_add_sub_once, line
except ImportError:  # run as a module
    from benchmarks._common import ADD_A as A
    from benchmarks._common import ADD_B as B
    from benchmarks._common import aio_add_sub_once, line

TESTS = Path(__file__).resolve().parent.parent / "tests"
REPOS = [TESTS / "models", TESTS / "repos" / "cli_generate"]
TASKS = 16


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from tritonhttp.testing import _real_triton as rt

    with rt.running(REPOS) as s:
        yield s.url


async def _drive(n: int, one: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """(req/s, CPU us/req) for ``n`` calls of ``one`` spread over TASKS tasks."""
    per_task = n // TASKS

    async def worker() -> None:
        for _ in range(per_task):
            await one()

    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(TASKS)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done = per_task * TASKS
    return done / wall, cpu / done * 1e6


async def client_x16(m: Any, url: str, n: int, **kw: Any) -> tuple[float, float]:
    client = m.InferenceServerClient(url, **kw)
    try:
        one = functools.partial(aio_add_sub_once, m, client)
        await _drive(TASKS * 20, one)  # open the connections, warm up
        return await _drive(n, one)
    finally:
        await client.close()


# -- transport candidates (pre-built request, answer read whole) -------------------------


def prebuilt() -> tuple[bytes, dict[str, str]]:
    inputs = [
        tritonhttp.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(A),
        tritonhttp.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(B),
    ]
    body, size = tritonhttp.InferenceServerClient.generate_request_body(inputs)
    return body, {"Inference-Header-Content-Length": str(size)}


async def transport_ours(url: str, n: int) -> tuple[float, float]:
    from tritonhttp._protocol import Endpoints, RequestContext, build_infer_body, parse_server_url
    from tritonhttp.aio._pool import ConnectionPool
    from tritonhttp.aio._timeouts import Limits

    address = parse_server_url(url, False)
    pool = ConnectionPool(address, 100, None)
    context = RequestContext("", address.host_header, "bench", False)
    inputs = [
        tritonhttp.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(A),
        tritonhttp.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(B),
    ]
    prepared = context.prepare(
        Endpoints.infer("add_sub", "", build_infer_body(inputs)), None, None, None
    )
    limits = Limits(60.0, None, None, None)

    async def one() -> None:
        response = await pool.request(prepared, limits)
        assert response.status == 200

    try:
        await _drive(TASKS * 20, one)
        return await _drive(n, one)
    finally:
        await pool.aclose()


async def transport_aiohttp(url: str, n: int) -> tuple[float, float]:
    body, headers = prebuilt()
    target = f"http://{url}/v2/models/add_sub/infer"
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=100), auto_decompress=False
    ) as session:

        async def one() -> None:
            async with session.post(target, data=body, headers=headers) as response:
                await response.read()
                assert response.status == 200

        await _drive(TASKS * 20, one)
        return await _drive(n, one)


async def transport_httpx(url: str, n: int) -> tuple[float, float]:
    body, headers = prebuilt()
    target = f"http://{url}/v2/models/add_sub/infer"
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=100)) as session:

        async def one() -> None:
            response = await session.post(target, content=body, headers=headers)
            assert response.status_code == 200

        await _drive(TASKS * 20, one)
        return await _drive(n, one)


async def client_over_httpx(url: str, n: int) -> tuple[float, float]:
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=100)) as session:
        return await client_x16(aio, url, n, http_client=session)


# -- generate_stream -----------------------------------------------------------------------

STREAM_REQUEST = {"text_input": "a b c d e f g h i j"}
STREAM_PARAMETERS = {"repeat": 200}  # 2,000 events
EVENTS = 2000


def _rates(start: tuple[float, float], count: int) -> tuple[float, float]:
    """(events/s, client CPU us/event) since ``start`` = (perf_counter, process_time)."""
    assert count == EVENTS, count
    wall, cpu = time.perf_counter() - start[0], time.process_time() - start[1]
    return count / wall, cpu / count * 1e6


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


async def stream_aio(url: str, **kw: Any) -> tuple[float, float]:
    async with aio.InferenceServerClient(url, **kw) as client:
        start = _now()
        count = 0
        async for _event in client.generate_stream(
            "text_stream", STREAM_REQUEST, parameters=STREAM_PARAMETERS
        ):
            count += 1
        return _rates(start, count)


async def stream_aio_httpx(url: str) -> tuple[float, float]:
    async with httpx.AsyncClient() as session:
        return await stream_aio(url, http_client=session)


def stream_sync(url: str) -> tuple[float, float]:
    with tritonhttp.InferenceServerClient(url) as client:
        start = _now()
        count = sum(
            1
            for _ in client.generate_stream(
                "text_stream", STREAM_REQUEST, parameters=STREAM_PARAMETERS
            )
        )
        return _rates(start, count)


async def stream_baseline(url: str) -> tuple[float, float]:
    async with httpx.AsyncClient(timeout=None) as session:
        start = _now()
        count = 0
        request = {**STREAM_REQUEST, "parameters": STREAM_PARAMETERS}
        async with session.stream(
            "POST", f"http://{url}/v2/models/text_stream/generate_stream", json=request
        ) as response:
            async for text in response.aiter_lines():
                if text.startswith("data:"):
                    json.loads(text[5:])
                    count += 1
        return _rates(start, count)


REPLAYED = 50_000


class Replay:
    """A local server answering every request with the same pre-built SSE stream."""

    def __init__(self, events: int) -> None:
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        pieces = []
        for i in range(events):
            data = (
                b'data: {"model_name":"text_stream","model_version":"1",'
                b'"text_output":"token-%d "}\n\n' % i
            )
            pieces.append(b"%x\r\n%s\r\n" % (len(data), data))
        self.answer = head + b"".join(pieces) + b"0\r\n\r\n"
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                while len(rest) < length:
                    rest += conn.recv(65536)
                buf = rest[length:]
                conn.sendall(self.answer)

    def close(self) -> None:
        self.sock.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="host:port of a running real Triton (default: start one)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    args = ap.parse_args()
    n = 800 if args.quick else 4000
    rounds = 1 if args.quick else 4

    with server(args.url) as url:
        run = asyncio.run
        run(client_x16(aio, url, n))  # warm the server up

        ours, ref = (0.0, float("inf")), (0.0, float("inf"))
        for _ in range(rounds):
            o, r = run(client_x16(aio, url, n)), run(client_x16(ref_aio, url, n))
            ours = (max(ours[0], o[0]), min(ours[1], o[1]))
            ref = (max(ref[0], r[0]), min(ref[1], r[1]))
        print(line("aio x16 add_sub", ours[0], ref[0], "req/s"))
        print(line("aio x16 add_sub client CPU", ours[1], ref[1], "us/req", False))

        candidates: dict[str, Callable[[str, int], Awaitable[tuple[float, float]]]] = {
            "asyncio protocol (tritonhttp.aio)": transport_ours,
            "aiohttp ClientSession": transport_aiohttp,
            "httpx AsyncClient": transport_httpx,
            "tritonhttp.aio over httpx (whole client)": client_over_httpx,
        }
        best: dict[str, tuple[float, float]] = {k: (0.0, float("inf")) for k in candidates}
        for _ in range(rounds):
            for name, fn in candidates.items():
                count = n if "httpx" not in name else n // 4
                rate, cpu = run(fn(url, count))
                best[name] = (max(best[name][0], rate), min(best[name][1], cpu))
        print("transports x16 (pre-built add_sub request; best of rounds):")
        for name, (rate, cpu) in best.items():
            print(f"  {name}: {rate:,.0f} req/s, {cpu:.1f} us/req client CPU")

        streams: dict[str, Callable[[], tuple[float, float]]] = {
            "tritonhttp.aio": lambda: run(stream_aio(url)),
            "tritonhttp.aio over httpx": lambda: run(stream_aio_httpx(url)),
            "tritonhttp (sync)": lambda: stream_sync(url),
            "httpx aiter_lines + json.loads": lambda: run(stream_baseline(url)),
        }
        rates = {k: (0.0, float("inf")) for k in streams}
        for _ in range(rounds):
            for name, fn in streams.items():
                rate, cpu = fn()
                rates[name] = (max(rates[name][0], rate), min(rates[name][1], cpu))
        ours_s, base_s = rates["tritonhttp.aio"], rates["httpx aiter_lines + json.loads"]
        print(line("generate_stream events/s", ours_s[0], base_s[0], "events/s"))
        print(line("generate_stream client CPU", ours_s[1], base_s[1], "us/event", False))
        for name, (rate, cpu) in rates.items():
            print(f"  {name}: {rate:,.0f} events/s, {cpu:.1f} us/event client CPU")

    global EVENTS
    replay = Replay(REPLAYED)
    EVENTS = REPLAYED
    try:
        for name in list(rates):
            rates[name] = (0.0, float("inf"))
        replayed = {
            "tritonhttp.aio": lambda: run(stream_aio(replay.url)),
            "tritonhttp.aio over httpx": lambda: run(stream_aio_httpx(replay.url)),
            "tritonhttp (sync)": lambda: stream_sync(replay.url),
            "httpx aiter_lines + json.loads": lambda: run(stream_baseline(replay.url)),
        }
        for _ in range(rounds):
            for name, fn in replayed.items():
                rate, cpu = fn()
                rates[name] = (max(rates[name][0], rate), min(rates[name][1], cpu))
    finally:
        replay.close()
    ours_s, base_s = rates["tritonhttp.aio"], rates["httpx aiter_lines + json.loads"]
    print(line("replayed stream events/s", ours_s[0], base_s[0], "events/s"))
    for name, (rate, cpu) in rates.items():
        print(f"  {name}: {rate:,.0f} events/s, {cpu:.1f} us/event client CPU")


if __name__ == "__main__":
    main()
