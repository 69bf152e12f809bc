"""tritonhttp vs tritonclient.http against REAL Triton, side by side in one run.

Scenarios (each client does the same work: build inputs, infer, read every output):

* ``sequential add_sub``  one request at a time; req/s and client CPU us/request
  (``time.process_time``, i.e. user + system time of this process)
* ``async_infer x16``     16 ``async_infer`` calls, then their 16 results, repeated
  (``concurrency=16`` for both clients)
* ``64 MB FP32``          ``identity_all`` round trip of a 64 MB FP32 tensor
* ``100k strings``        ``identity_bytes`` round trip of 100,000 short strings

Each scenario also prints its *floor*: the same request pre-built and sent over a
plain socket, the answer read but not decoded (server + kernel only). The reference's
time divided by the floor is the best ratio any client could reach.

Usage: ``python benchmarks/client_bench.py [--url HOST:PORT] [--quick]``.
Prints ``name: ours X, reference Y, ratio R`` lines (ratio > 1: ours is better), after
a line naming the machine and one naming the interpreter with the time of a fixed
pure-Python loop (how fast the host runs at that moment: on a shared virtual machine it
moves by half between runs).

``--runs N`` (N >= 5 for figures) measures instead the client's CPU, as distributions
over N runs in which the clients take turns (one run of each figure, ours then the
reference, then the next figure; the machine's load hits both alike):

* ``sequential CPU``   client CPU us/request (``time.process_time``: user + system time
  of this process) of 2,000 sequential add_sub requests, tritonhttp vs tritonclient.http
* ``async_infer x16``  req/s of rounds of 16 ``async_infer`` + 16 results (3,200
  requests for ours, 128 for tritonclient's, whose greenlets are slow); the same rounds
  against ``tritonhttp.aio`` x16; and ``async_infer`` keeping 16 requests in flight (a
  window: as the oldest result is read, the next request goes out, as ``aio x16``'s
  tasks do) against ``tritonhttp.aio`` x16, in 8 alternating blocks of 400 requests
  each with both clients open (never below it is the goal), in requests per second and
  in client CPU per request. Rounds drain the server's queue every 16 requests; the
  window and the tasks never do.
* ``aio x16``          req/s and CPU us/request of 3,072 add_sub requests from 16 tasks
  on one event loop, ``tritonhttp.aio`` vs ``tritonclient.http.aio``, in 8 alternating
  blocks of 384 requests each with both clients open
* ``100k strings CPU`` client CPU ms of one ``identity_bytes`` round trip of 100,000
  short strings (best of 3 per run)

Each figure prints min / median / max of both sides and of the ratio (> 1: ours
better).

``--window-vs-aio N`` runs only the window against ``tritonhttp.aio`` x16, N runs.

``--bound N`` measures, over N alternating runs, the sequential CPU of both clients and
of a bare pure-Python loop (one socket, the response head split by hand, the same
``InferInput`` and ``as_numpy`` calls): how far a pure-Python client can go.

``--async-paths N`` compares, over N alternating runs, ``async_infer`` x16 as it is
(small requests written from the caller's thread on idle connections) with the same
client sending every request from its thread pool.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import socket
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tritonclient.http as ref_http
import tritonclient.http.aio as ref_aio

import tritonhttp
import tritonhttp.aio as aio

try:
    from _common import ADD_A as A
    from _common import ADD_B as B
    from _common import aio_add_sub_once, line, machine, raw_round_trips, real_triton
except ImportError:  # run as a module
    from benchmarks._common import ADD_A as A
    from benchmarks._common import ADD_B as B
    from benchmarks._common import aio_add_sub_once, line, machine, raw_round_trips, real_triton

#: (req/s, client CPU us/request) of one client in one run
Measured = tuple[float, float]


def add_sub_once(m: Any, client: Any) -> None:
    inputs = [
        m.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(A),
        m.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(B),
    ]
    result = client.infer("add_sub", inputs)
    result.as_numpy("OUTPUT0")
    result.as_numpy("OUTPUT1")


def sequential(m: Any, url: str, n: int, blocks: int) -> tuple[float, float]:
    """(best req/s, lowest CPU us/req) over ``blocks`` blocks of ``n`` requests."""
    best_rate, best_cpu = 0.0, float("inf")
    with m.InferenceServerClient(url) as client:
        for _ in range(min(200, n)):
            add_sub_once(m, client)
        for _ in range(blocks):
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(n):
                add_sub_once(m, client)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best_rate, best_cpu = max(best_rate, n / wall), min(best_cpu, cpu / n * 1e6)
    return best_rate, best_cpu


def async16(m: Any, url: str, rounds: int) -> float:
    """req/s for rounds of 16 async_infer + 16 get_result."""
    return async16_cpu(m, url, rounds)[0]


def async16_cpu(m: Any, url: str, rounds: int, from_caller: bool = True) -> tuple[float, float]:
    """(req/s, client CPU us/request) for rounds of 16 async_infer + 16 get_result.

    ``from_caller=False`` (tritonhttp only): every request goes through the client's
    thread pool, never written from the caller's thread.
    """
    with m.InferenceServerClient(url, concurrency=16) as client:
        if not from_caller:
            client._inline = False

        def one_round() -> None:
            inputs = [
                m.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(A),
                m.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(B),
            ]
            handles = [client.async_infer("add_sub", inputs) for _ in range(16)]
            for handle in handles:
                handle.get_result().as_numpy("OUTPUT0")

        one_round()
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(rounds):
            one_round()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return 16 * rounds / wall, cpu / (16 * rounds) * 1e6


def best_of(rounds: int, fn: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def large(m: Any, url: str, data: np.ndarray[Any, Any], rounds: int) -> float:
    """Best seconds for one 64 MB identity round trip."""
    with m.InferenceServerClient(url, network_timeout=600) as client:

        def once() -> None:
            inp = m.InferInput("IN_FP32", [data.size], "FP32").set_data_from_numpy(data)
            out = client.infer("identity_all", [inp]).as_numpy("OUT_FP32")
            assert out.shape == data.shape and out[-1] == data[-1]

        return best_of(rounds, once)


def strings(m: Any, url: str, data: np.ndarray[Any, Any], rounds: int) -> float:
    """Best seconds for one round trip of the strings."""
    with m.InferenceServerClient(url, network_timeout=600) as client:

        def once() -> None:
            inp = m.InferInput("INPUT0", [data.size], "BYTES").set_data_from_numpy(data)
            out = client.infer("identity_bytes", [inp]).as_numpy("OUTPUT0")
            assert out.shape == data.shape and out[-1] == data[-1]

        return best_of(rounds, once)


def floor(url: str, model: str, m_inputs: list[Any], n: int) -> tuple[float, float]:
    body, json_size = tritonhttp.InferenceServerClient.generate_request_body(m_inputs)
    headers = {} if json_size is None else {"Inference-Header-Content-Length": str(json_size)}
    return raw_round_trips(url, f"/v2/models/{model}/infer", headers, [body], n)


# -- CPU distributions (--runs) ------------------------------------------------------


def sequential_cpu(m: Any, url: str, n: int, client_type: Any = None) -> float:
    """Client CPU us/request of ``n`` sequential add_sub requests (after a warm-up);
    ``client_type`` replaces ``m.InferenceServerClient``."""
    with (client_type or m.InferenceServerClient)(url) as client:
        for _ in range(100):
            add_sub_once(m, client)
        gc.collect()
        cpu = time.process_time()
        for _ in range(n):
            add_sub_once(m, client)
        return (time.process_time() - cpu) / n * 1e6


class _Window:
    """tritonhttp's ``async_infer`` keeping 16 requests in flight: as the oldest result
    is read, the next request goes out (what ``aio x16``'s 16 tasks do)."""

    def __init__(self, url: str) -> None:
        self.client = tritonhttp.InferenceServerClient(url, concurrency=16)
        self.inputs = [
            tritonhttp.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(A),
            tritonhttp.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(B),
        ]
        self.queue = collections.deque(self._send() for _ in range(16))

    def _send(self) -> Any:
        return self.client.async_infer("add_sub", self.inputs)

    def run(self, n: int) -> None:
        queue = self.queue
        for _ in range(n):
            result = queue.popleft().get_result()
            result.as_numpy("OUTPUT0")
            result.as_numpy("OUTPUT1")
            queue.append(self._send())

    def close(self) -> None:
        while self.queue:
            self.queue.popleft().get_result()
        self.client.close()


def _alternating(sides: list[Callable[[], None]], blocks: int, n: int) -> list[Measured]:
    """(req/s, CPU us/request) of each side, over ``blocks`` rounds in which every side
    runs one block of ``n`` requests in turn, after one warm-up block each (a slow minute
    of the machine hits every side alike)."""
    totals = [[0.0, 0.0] for _ in sides]  # wall, cpu per side
    for side in sides:
        side()  # warm-up: connections, first requests
    for _ in range(blocks):
        for side, total in zip(sides, totals, strict=True):
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            side()
            total[0] += time.perf_counter() - wall
            total[1] += time.process_time() - cpu
    done = blocks * n
    return [(done / wall, cpu / done * 1e6) for wall, cpu in totals]


async def _aio_block(m: Any, client: Any, count: int) -> None:
    """``count`` add_sub requests from 16 tasks sharing ``client``."""

    async def worker() -> None:
        for _ in range(count // 16):
            await aio_add_sub_once(m, client)

    await asyncio.gather(*(worker() for _ in range(16)))


def window_vs_aio(url: str, blocks: int, n: int) -> tuple[Measured, Measured]:
    """((req/s, CPU us/request) of ``async_infer`` x16 as a window, the same of
    ``tritonhttp.aio`` x16), over ``blocks`` alternating blocks of ``n`` requests each
    (the clients stay open)."""
    window = _Window(url)
    loop = asyncio.new_event_loop()
    aio_client = aio.InferenceServerClient(url)
    try:
        sides = [
            lambda: window.run(n),
            lambda: loop.run_until_complete(_aio_block(aio, aio_client, n)),
        ]
        ours, other = _alternating(sides, blocks, n)
    finally:
        window.close()
        loop.run_until_complete(aio_client.close())
        loop.close()
    return ours, other


def aio_vs_reference(url: str, blocks: int, n: int) -> tuple[Measured, Measured]:
    """((req/s, CPU us/request) of ``tritonhttp.aio`` x16, the same of
    ``tritonclient.http.aio`` x16), over ``blocks`` alternating blocks of ``n`` requests
    each, both clients open on one event loop."""
    loop = asyncio.new_event_loop()
    ours = loop.run_until_complete(_open(aio, url))
    other = loop.run_until_complete(_open(ref_aio, url))
    try:
        sides = [
            lambda: loop.run_until_complete(_aio_block(aio, ours, n)),
            lambda: loop.run_until_complete(_aio_block(ref_aio, other, n)),
        ]
        mine, theirs = _alternating(sides, blocks, n)
    finally:
        loop.run_until_complete(ours.close())
        loop.run_until_complete(other.close())
        loop.close()
    return mine, theirs


async def _open(m: Any, url: str) -> Any:
    """An asyncio client of module ``m``, created inside the running loop (aiohttp's
    session binds to it)."""
    return m.InferenceServerClient(url)


def strings_cpu(m: Any, url: str, data: np.ndarray[Any, Any], rounds: int) -> float:
    """Lowest client CPU ms of one round trip of the strings."""
    with m.InferenceServerClient(url, network_timeout=600) as client:
        best = float("inf")
        for _ in range(rounds):
            gc.collect()
            cpu = time.process_time()
            inp = m.InferInput("INPUT0", [data.size], "BYTES").set_data_from_numpy(data)
            out = client.infer("identity_bytes", [inp]).as_numpy("OUTPUT0")
            best = min(best, time.process_time() - cpu)
            assert out.shape == data.shape
        return best * 1e3


def _paired_runs(
    runs: int,
    measure: Callable[[], tuple[Measured, Measured]],
    names: tuple[str, str],
    cpu_ratio: str,
) -> None:
    """``runs`` runs of ``measure`` (a pair of figures), each printed, then the ratios of
    the first to the second in requests per second and in CPU (second / first, labelled
    ``cpu_ratio``)."""
    pairs = []
    for run in range(1, runs + 1):
        pairs.append(measure())
        sides = [f"{name} {rate:,.0f} req/s {cpu:.1f} us/request"
                 for name, (rate, cpu) in zip(names, pairs[-1], strict=True)]  # fmt: skip
        print(f"run {run}: {'; '.join(sides)}", flush=True)
    print("req/s ratio " + spread([a[0] / b[0] for a, b in pairs]))
    print(f"CPU ratio ({cpu_ratio}) " + spread([b[1] / a[1] for a, b in pairs]))


def async_paths(url: str, runs: int) -> None:
    """``async_infer`` x16 written from the caller's thread against the thread pool only,
    ``runs`` alternating runs (the device's figure in docs/performance.md)."""
    _paired_runs(
        runs,
        lambda: (async16_cpu(tritonhttp, url, 200), async16_cpu(tritonhttp, url, 200, False)),
        ("from the caller", "pool only"),
        "pool / caller",
    )


def window_runs(url: str, runs: int) -> None:
    """``runs`` runs of :func:`window_vs_aio` (8 alternating blocks of 400 requests)."""
    _paired_runs(
        runs,
        lambda: window_vs_aio(url, 8, 400),
        ("async_infer window", "tritonhttp.aio x16"),
        "aio / window",
    )


class _Bare:
    """The least a pure-Python client can do for one add_sub request: the caller's
    ``InferInput`` objects and ``as_numpy`` as with the clients, but one socket, no
    pool, lock, retry or header check, and the response head split by hand (it assumes
    a 200 answer arriving in one read). A bound for the clients' CPU, not a client."""

    def __init__(self, url: str) -> None:
        from tritonhttp._protocol import ParsedInferResponse, dumps, loads

        self._parsed, self._dumps, self._loads = ParsedInferResponse, dumps, loads
        host, port = url.rsplit(":", 1)
        self._url = url
        self._sock = socket.create_connection((host, int(port)))
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._scratch = bytearray(1 << 16)

    def infer(self, model: str, inputs: list[Any]) -> tritonhttp.InferResult:
        tensors = [i._get_tensor() for i in inputs]
        header = self._dumps({"inputs": tensors, "parameters": {"binary_data_output": True}})
        parts: list[Any] = [b"", header.encode()]
        size = len(header)
        for i in inputs:
            parts.append(i._get_binary_data())
            size += parts[-1].nbytes
        parts[0] = (
            f"POST /v2/models/{model}/infer HTTP/1.1\r\nUser-Agent: bare\r\n"
            f"Inference-Header-Content-Length: {len(header)}\r\nHost: {self._url}\r\n"
            f"Content-Length: {size}\r\n\r\n"
        ).encode()
        self._sock.sendmsg(parts)
        data = bytes(memoryview(self._scratch)[: self._sock.recv_into(self._scratch)])
        end = data.find(b"\r\n\r\n")
        fields = {}
        for field in data[:end].split(b"\r\n")[1:]:
            name, _, value = field.partition(b":")
            fields[name.lower()] = value.strip()
        body = memoryview(data)[end + 4 : end + 4 + int(fields[b"content-length"])]
        length = int(fields[b"inference-header-content-length"])
        result = self._loads(bytes(body[:length]))
        offsets, position = {}, 0
        for output in result["outputs"]:
            offsets[output["name"]] = position
            position += output["parameters"]["binary_data_size"]
        return tritonhttp.InferResult._from_parsed(self._parsed(result, body[length:], offsets))

    def __enter__(self) -> _Bare:
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()


def bound_runs(url: str, runs: int) -> None:
    """``runs`` alternating runs of 2,000 sequential add_sub requests: tritonclient.http,
    tritonhttp and :class:`_Bare`; client CPU per request and the ratios to tritonclient's."""
    cpu: dict[str, list[float]] = {"tritonclient": [], "tritonhttp": [], "bare": []}
    for run in range(1, runs + 1):
        cpu["tritonclient"].append(sequential_cpu(ref_http, url, 2000))
        cpu["tritonhttp"].append(sequential_cpu(tritonhttp, url, 2000))
        cpu["bare"].append(sequential_cpu(tritonhttp, url, 2000, _Bare))
        print(f"run {run}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in cpu.items()), flush=True)
    for name in ("tritonhttp", "bare"):
        ratios = [r / o for r, o in zip(cpu["tritonclient"], cpu[name], strict=True)]
        print(f"CPU us/request {name} {spread(cpu[name])}; tritonclient / {name} {spread(ratios)}")


def spread(values: list[float]) -> str:
    return (
        f"min {min(values):,.2f} / median {statistics.median(values):,.2f} / max {max(values):,.2f}"
    )


def distributions(url: str, runs: int, quick: bool, words: np.ndarray[Any, Any]) -> None:
    """The CPU figures as distributions over ``runs`` alternating runs (see the docstring)."""
    n_seq = 300 if quick else 2000
    aio_blocks = (2, 240) if quick else (8, 384)
    rounds_ours, rounds_ref = (20, 2) if quick else (200, 8)
    window_blocks = (2, 160) if quick else (8, 400)
    figures: dict[str, list[tuple[float, float]]] = {}

    def record(name: str, ours: float, ref: float) -> None:
        figures.setdefault(name, []).append((ours, ref))

    for run in range(1, runs + 1):
        record(
            "sequential CPU us/request (lower is better)",
            sequential_cpu(tritonhttp, url, n_seq),
            sequential_cpu(ref_http, url, n_seq),
        )
        ours_async = async16(tritonhttp, url, rounds_ours)
        ref_async = async16(ref_http, url, rounds_ref)
        (ours_aio, ours_aio_cpu), (ref_aio_rate, ref_aio_cpu) = aio_vs_reference(url, *aio_blocks)
        (window, window_cpu), (aio_rate, aio_cpu) = window_vs_aio(url, *window_blocks)
        record("async_infer x16 req/s", ours_async, ref_async)
        record("async_infer x16 rounds vs tritonhttp.aio x16 req/s", ours_async, ours_aio)
        record("async_infer x16 window vs tritonhttp.aio x16 req/s", window, aio_rate)
        record(
            "async_infer x16 window vs tritonhttp.aio x16 CPU us/request (lower is better)",
            window_cpu,
            aio_cpu,
        )
        record("aio x16 req/s", ours_aio, ref_aio_rate)
        record("aio x16 CPU us/request (lower is better)", ours_aio_cpu, ref_aio_cpu)
        record(
            "100k strings round trip CPU ms (lower is better)",
            strings_cpu(tritonhttp, url, words, 3),
            strings_cpu(ref_http, url, words, 3),
        )
        print(
            f"run {run}: "
            + "; ".join(f"{k}: {v[-1][0]:,.1f} vs {v[-1][1]:,.1f}" for k, v in figures.items()),
            flush=True,
        )
    print(f"\n{runs} alternating runs (ours / reference / ratio, ratio > 1: ours better)")
    for name, pairs in figures.items():
        ours = [o for o, _ in pairs]
        ref = [r for _, r in pairs]
        lower = "lower is better" in name
        ratios = [(r / o if lower else o / r) for o, r in pairs]
        print(f"{name}\n  ours  {spread(ours)}\n  other {spread(ref)}\n  ratio {spread(ratios)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="host:port of a running real Triton (default: start one)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    ap.add_argument(
        "--runs", type=int, default=0, help="CPU distributions over this many runs (>= 5)"
    )
    ap.add_argument(
        "--async-paths",
        type=int,
        default=0,
        help="async_infer from the caller's thread vs the thread pool, this many runs",
    )
    ap.add_argument(
        "--window-vs-aio",
        type=int,
        default=0,
        help="async_infer x16 as a window vs tritonhttp.aio x16, this many runs",
    )
    ap.add_argument(
        "--bound",
        type=int,
        default=0,
        help="sequential CPU of both clients and of a bare pure-Python loop, this many runs",
    )
    args = ap.parse_args()
    print(machine())
    if args.bound:
        with real_triton(args.url) as url:
            bound_runs(url, args.bound)
        return
    if args.window_vs_aio:
        with real_triton(args.url) as url:
            window_runs(url, args.window_vs_aio)
        return
    if args.async_paths:
        with real_triton(args.url) as url:
            async_paths(url, args.async_paths)
        return
    if args.runs:
        words = np.array([f"w{i}".encode() for i in range(100_000)], dtype=object)
        with real_triton(args.url) as url:
            tritonhttp.InferenceServerClient(url).close()
            distributions(url, args.runs, args.quick, words)
        return
    n_seq = 300 if args.quick else 2000
    rounds = 1 if args.quick else 5
    big = np.random.default_rng(0).random(64 * 1024 * 1024 // 4, dtype=np.float32)
    words = np.array([f"w{i}".encode() for i in range(100_000)], dtype=object)

    with real_triton(args.url) as url:
        inputs = [
            tritonhttp.InferInput("INPUT0", [4], "FP32").set_data_from_numpy(A),
            tritonhttp.InferInput("INPUT1", [4], "FP32").set_data_from_numpy(B),
        ]
        floor(url, "add_sub", inputs, 1000)  # warm the server up before measuring
        # Alternate the clients so that a change in the machine's load hits both.
        ours_seq, ref_seq = (0.0, float("inf")), (0.0, float("inf"))
        for _ in range(rounds):
            o, r = sequential(tritonhttp, url, n_seq, 1), sequential(ref_http, url, n_seq, 1)
            ours_seq = (max(ours_seq[0], o[0]), min(ours_seq[1], o[1]))
            ref_seq = (max(ref_seq[0], r[0]), min(ref_seq[1], r[1]))
        print(line("sequential add_sub req/s", ours_seq[0], ref_seq[0], "req/s"))
        print(line("sequential add_sub client CPU", ours_seq[1], ref_seq[1], "us/req", False))
        seq_floor, _ = floor(url, "add_sub", inputs, n_seq)
        print(
            f"  floor (raw pre-built requests): {1 / seq_floor:,.0f} req/s"
            f" -> best possible ratio {ref_seq[0] and (1 / seq_floor) / ref_seq[0]:.2f}"
        )

        ours_async = async16(tritonhttp, url, 20 if args.quick else 200)
        ref_async = async16(ref_http, url, 2 if args.quick else 8)
        print(line("async_infer x16", ours_async, ref_async, "req/s"))

        big_input = [tritonhttp.InferInput("IN_FP32", [big.size], "FP32").set_data_from_numpy(big)]
        large(tritonhttp, url, big, 1), large(ref_http, url, big, 1)  # warm up the server
        ours_big = ref_big = big_floor = float("inf")
        for _ in range(rounds):  # alternate: a change in load hits all three
            ours_big = min(ours_big, large(tritonhttp, url, big, 1))
            ref_big = min(ref_big, large(ref_http, url, big, 1))
            big_floor = min(big_floor, floor(url, "identity_all", big_input, 1)[1])
        gbs = big.nbytes / 1e9
        print(line("64 MB FP32 identity", gbs / ours_big, gbs / ref_big, "GB/s"))
        print(
            f"  floor (raw pre-built request): {gbs / big_floor:.2f} GB/s"
            f" -> best possible ratio {ref_big / big_floor:.2f}"
        )

        str_input = [
            tritonhttp.InferInput("INPUT0", [words.size], "BYTES").set_data_from_numpy(words)
        ]
        strings(tritonhttp, url, words, 1), strings(ref_http, url, words, 1)  # warm up
        ours_str = ref_str = str_floor = float("inf")
        for _ in range(rounds):
            ours_str = min(ours_str, strings(tritonhttp, url, words, 1))
            ref_str = min(ref_str, strings(ref_http, url, words, 1))
            str_floor = min(str_floor, floor(url, "identity_bytes", str_input, 1)[1])
        mps = words.size / 1e6
        print(line("100k strings identity", mps / ours_str, mps / ref_str, "M/s"))
        print(
            f"  floor (raw pre-built request): {mps / str_floor:.2f} M/s"
            f" -> best possible ratio {ref_str / str_floor:.2f}"
        )


if __name__ == "__main__":
    main()
