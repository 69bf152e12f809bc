"""Which HTTP transport should the sync client sit on?  Measured, not guessed.

Every candidate sends the same pre-built add_sub inference request (JSON header + two
16-byte tensors) and the same 64 MB FP32 identity round trip to REAL Triton and reads the
whole answer into memory. Nothing else of tritonhttp is involved, so the numbers show the
transport alone:

* ``http.client``        stdlib ``HTTPConnection`` (header + buffers sent with ``send``)
* ``urllib3``            ``HTTPConnectionPool.urlopen`` (what ``requests`` sits on)
* ``geventhttpclient``   ``HTTPClient`` (what tritonclient.http uses; no monkey-patching)
* ``socket+httptools``   a plain socket, ``sendmsg`` of the buffer list, the head parsed
                         by httptools (llhttp), the body ``recv_into`` one bytearray

Usage: ``python benchmarks/transport_bench.py [--url HOST:PORT] [--n 2000]``; without
``--url`` it starts real Triton on ``tests/models`` (see ``tritonhttp.testing``).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httptools
import numpy as np
import rapidjson

Post = Callable[[str, dict[str, str], list[Any]], tuple[int, bytes | bytearray]]


def _infer_body(inputs: list[tuple[str, np.ndarray[Any, Any]]]) -> tuple[bytes, list[Any]]:
    header = {
        "inputs": [
            {
                "name": n,
                "shape": list(a.shape),
                "datatype": "FP32",
                "parameters": {"binary_data_size": a.nbytes},
            }
            for n, a in inputs
        ],
        "parameters": {"binary_data_output": True},
    }
    js = rapidjson.dumps(header).encode()
    return js, [js, *(memoryview(a).cast("B") for _, a in inputs)]


# --- candidates -------------------------------------------------------------------------


def stdlib(host: str, port: int) -> tuple[Post, Callable[[], None]]:
    conn = http.client.HTTPConnection(host, port)

    def post(path: str, headers: dict[str, str], bufs: list[Any]) -> tuple[int, bytes]:
        conn.putrequest("POST", path, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(sum(len(b) for b in bufs)))
        conn.endheaders()
        for b in bufs:
            conn.send(b)
        r = conn.getresponse()
        return r.status, r.read()

    return post, conn.close


def urllib3_pool(host: str, port: int) -> tuple[Post, Callable[[], None]]:
    import urllib3

    pool = urllib3.HTTPConnectionPool(host, port, maxsize=1, retries=False)

    def post(path: str, headers: dict[str, str], bufs: list[Any]) -> tuple[int, bytes]:
        body = bufs[0] if len(bufs) == 1 else b"".join(bufs)  # urllib3 wants one body
        r = pool.urlopen("POST", path, body=body, headers=headers, preload_content=True)
        return r.status, r.data

    return post, pool.close


def gevent_client(host: str, port: int) -> tuple[Post, Callable[[], None]]:
    from geventhttpclient import HTTPClient

    client = HTTPClient(host, port, concurrency=1)

    def post(path: str, headers: dict[str, str], bufs: list[Any]) -> tuple[int, bytes]:
        body = bufs[0] if len(bufs) == 1 else b"".join(bufs)  # one body, as tritonclient
        r = client.post(path, body=body, headers=headers)
        return r.status_code, r.read()

    return post, client.close


class _Head:
    """httptools callbacks: status, Content-Length and the first body bytes."""

    def __init__(self) -> None:
        self.length = -1
        self.done = False
        self.headers_done = False
        self.first: list[bytes] = []

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"content-length":
            self.length = int(value)

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.first.append(body)

    def on_message_complete(self) -> None:
        self.done = True


def socket_httptools(host: str, port: int) -> tuple[Post, Callable[[], None]]:
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    scratch = bytearray(65536)
    prefix = f"Host: {host}:{port}\r\n".encode()

    def post(path: str, headers: dict[str, str], bufs: list[Any]) -> tuple[int, bytearray]:
        size = sum(len(b) for b in bufs)
        head = (
            f"POST {path} HTTP/1.1\r\n".encode()
            + prefix
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode()
            + f"Content-Length: {size}\r\n\r\n".encode()
        )
        out = [head, *bufs]
        while out:
            sent = sock.sendmsg(out)
            while out and sent >= len(out[0]):
                sent -= len(out[0])
                out.pop(0)
            if sent:
                out[0] = memoryview(out[0])[sent:]
        h = _Head()
        parser = httptools.HttpResponseParser(h)
        view = memoryview(scratch)
        while not h.headers_done:
            n = sock.recv_into(scratch)
            if not n:
                raise ConnectionError("closed")
            parser.feed_data(view[:n])
        body = bytearray(h.length)
        got = 0
        for part in h.first:
            body[got : got + len(part)] = part
            got += len(part)
        bview = memoryview(body)
        while got < h.length:
            n = sock.recv_into(bview[got:])
            if not n:
                raise ConnectionError("closed")
            got += n
        return parser.get_status_code(), body

    return post, sock.close


CANDIDATES: dict[str, Callable[[str, int], tuple[Post, Callable[[], None]]]] = {
    "http.client": stdlib,
    "urllib3": urllib3_pool,
    "geventhttpclient": gevent_client,
    "socket+httptools": socket_httptools,
}


# --- measurement ------------------------------------------------------------------------


def measure(url: str, n: int, big_mb: int, rounds: int) -> list[tuple[str, float, float, float]]:
    host, port_s = url.rsplit(":", 1)
    port = int(port_s)
    a = np.arange(4, dtype=np.float32)
    js, small = _infer_body([("INPUT0", a), ("INPUT1", a)])
    small_hdr = {"Inference-Header-Content-Length": str(len(js))}
    big = np.ones(big_mb * 1024 * 1024 // 4, dtype=np.float32)
    bjs, large = _infer_body([("IN_FP32", big)])
    large_hdr = {"Inference-Header-Content-Length": str(len(bjs))}
    rows = []
    for name, make in CANDIDATES.items():
        post, close = make(host, port)
        try:
            for _ in range(50):  # warm up (and check)
                status, body = post("/v2/models/add_sub/infer", small_hdr, small)
                assert status == 200, body
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(n):
                post("/v2/models/add_sub/infer", small_hdr, small)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            best = float("inf")
            for _ in range(rounds):
                t0 = time.perf_counter()
                status, body = post("/v2/models/identity_all/infer", large_hdr, large)
                best = min(best, time.perf_counter() - t0)
                assert status == 200 and len(body) > big.nbytes, (status, len(body))
                del body
        finally:
            close()
        rows.append((name, n / wall, cpu / n * 1e6, big.nbytes / best / 1e9))
    return rows


@contextlib.contextmanager
def _server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from tritonhttp.testing import _real_triton as rt

    repo = Path(__file__).resolve().parent.parent / "tests" / "models"
    with rt.running(repo) as server:
        yield server.url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="host:port of a running real Triton (default: start one)")
    ap.add_argument("--n", type=int, default=2000, help="sequential add_sub requests")
    ap.add_argument("--mb", type=int, default=64, help="identity round trip size in MB")
    ap.add_argument("--rounds", type=int, default=3, help="large round trips (best of)")
    args = ap.parse_args()
    with _server(args.url) as url:
        rows = measure(url, args.n, args.mb, args.rounds)
    print(f"{'transport':<18} {'add_sub req/s':>14} {'CPU us/req':>11} {'64MB GB/s':>10}")
    for name, rps, cpu, gbs in rows:
        print(f"{name:<18} {rps:>14.0f} {cpu:>11.1f} {gbs:>10.2f}")


if __name__ == "__main__":
    main()
