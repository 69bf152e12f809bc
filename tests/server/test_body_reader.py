"""A large request body read from the socket straight into its sink.

When an application has set a :class:`~tritonhttp.server.http._extensions.BodySink` for the
rest of a body framed by ``Content-Length`` and at least ``RAW_BODY_MIN`` bytes are left,
the connection hands the socket to a buffered protocol that reads into the sink's memory,
never past the body's end, and takes over again after it. These tests drive the bundled
HTTP server on both event loops it runs on (uvloop and asyncio's own) over real sockets,
with the application reading the body as the inference front does (``read_body``): every
byte arrives in order, whatever follows the body on the connection is parsed as the next
request, and a client that leaves mid-body costs nothing but its own request.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import uvloop

from tritonhttp.server.front._http import read_body
from tritonhttp.server.http import HttpServer, _connection
from tritonhttp.server.http._connection import RAW_BODY_MIN

from ._wire import binary_request

LOOPS = {"uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}


class _Served:
    def __init__(self, loop_factory: Callable[[], asyncio.AbstractEventLoop]) -> None:
        self.loop = loop_factory()
        self.bodies: list[int] = []
        self.disconnects = 0
        self.server = HttpServer(self.app)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.listen("127.0.0.1", 0), self.loop).result(30)
        self.port = self.server.ports[0]

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Answers ``<length> <sha256>`` of the body, read as the inference front reads it."""
        expected = 0
        for k, v in scope["headers"]:
            if k == b"content-length":
                expected = int(v)
        try:
            body = await read_body(receive, expected, scope)
        except ConnectionError:
            self.disconnects += 1
            return
        self.bodies.append(len(body))
        answer = f"{len(body)} {hashlib.sha256(body).hexdigest()}".encode()
        head = {"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(answer)).encode())]}  # fmt: skip
        await send(head)
        await send({"type": "http.response.body", "body": answer})

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.shutdown(1.0), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(params=sorted(LOOPS))
def served(request: pytest.FixtureRequest) -> Iterator[_Served]:
    s = _Served(LOOPS[request.param])
    try:
        yield s
    finally:
        s.close()


class _Reads(list[int]):
    """The sizes of the reads the body readers made, and the readers."""

    readers: list[Any]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> _Reads:
    seen = _Reads()
    seen.readers = []
    original = _connection._BodyReader.buffer_updated

    def counting(self: Any, nbytes: int) -> None:
        seen.append(nbytes)
        if not any(r is self for r in seen.readers):
            seen.readers.append(self)
        original(self, nbytes)

    monkeypatch.setattr(_connection._BodyReader, "buffer_updated", counting)
    return seen


def _post(body: bytes, path: str = "/p") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def _answer(body: bytes) -> bytes:
    text = f"{len(body)} {hashlib.sha256(body).hexdigest()}".encode()
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(text) + text


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        data = sock.recv(n - len(buf))
        if not data:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes: {bytes(buf)!r}")
        buf += data
    return bytes(buf)


@contextmanager
def _connect(port: int) -> Iterator[socket.socket]:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        yield s
    finally:
        s.close()


def _body(size: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def test_large_body_in_pieces_arrives_whole_through_the_reader(
    served: _Served, reads: list[int]
) -> None:
    body = _body(3_000_001)
    request = _post(body)
    with _connect(served.port) as s:
        for at in range(0, len(request), 250_000):  # uneven pieces, the head in the first
            s.sendall(request[at : at + 250_000])
        expected = _answer(body)
        assert _read_exactly(s, len(expected)) == expected
    assert reads, "the body reader was not used"
    assert sum(reads) < len(body)  # (what the parser saw first is not read again)
    assert served.bodies == [len(body)]


def test_requests_after_a_large_body_in_the_same_write_are_parsed(
    served: _Served, reads: list[int]
) -> None:
    first, second = _body(1_000_000, 1), _body(500_000, 2)
    small = b"tail of the batch"
    # the head of the first arrives alone (so the sink is set before the body comes),
    # then its body, another large request and a small one, all in one write
    request = _post(first)
    head_end = request.index(b"\r\n\r\n") + 4
    with _connect(served.port) as s:
        s.sendall(request[:head_end] + first[:1000])
        rest = request[head_end + 1000 :] + _post(second) + _post(small)
        s.sendall(rest)
        for body in (first, second, small):
            expected = _answer(body)
            assert _read_exactly(s, len(expected)) == expected
    assert reads
    assert served.bodies == [len(first), len(second), len(small)]


def test_large_bodies_in_a_row_on_one_connection(served: _Served, reads: _Reads) -> None:
    with _connect(served.port) as s:
        for k in range(4):
            body = _body(RAW_BODY_MIN * 16 + k, k)
            s.sendall(_post(body))
            expected = _answer(body)
            assert _read_exactly(s, len(expected)) == expected
    assert len(reads.readers) == 4  # one for each body


def test_small_bodies_do_not_use_the_reader(served: _Served, reads: list[int]) -> None:
    body = _body(RAW_BODY_MIN // 2)
    with _connect(served.port) as s:
        request = _post(body)
        s.sendall(request[:100])
        s.sendall(request[100:])
        expected = _answer(body)
        assert _read_exactly(s, len(expected)) == expected
    assert reads == []


def test_a_client_leaving_mid_body_costs_only_its_request(
    served: _Served, reads: list[int]
) -> None:
    body = _body(2_000_000)
    request = _post(body)
    with _connect(served.port) as s:
        s.sendall(request[:1_000_000])
        while not reads:  # the reader has taken over
            threading.Event().wait(0.01)
    for _ in range(500):
        if served.disconnects:
            break
        threading.Event().wait(0.01)
    assert served.disconnects == 1
    with _connect(served.port) as s:  # the server serves on
        s.sendall(request)
        expected = _answer(body)
        assert _read_exactly(s, len(expected)) == expected


def _header(head: bytes, name: bytes) -> bytes:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    raise AssertionError(f"no {name!r} in {head!r}")


def _read_http_response(sock: socket.socket, buf: bytearray) -> tuple[bytes, bytes]:
    """(head, body) of one Content-Length response."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(1 << 16)
        assert data, "closed inside a response head"
        buf += data
    end = buf.index(b"\r\n\r\n") + 4
    head = bytes(buf[:end])
    length = int(_header(head, b"content-length"))
    while len(buf) < end + length:
        data = sock.recv(1 << 16)
        assert data, "closed inside a response body"
        buf += data
    body = bytes(buf[end : end + length])
    del buf[: end + length]
    return head, body


def test_the_inference_front_serves_large_bodies_on_one_connection(bundled_server: Any) -> None:
    """Two large binary /infer bodies and a health check written in one go on one
    keep-alive connection of the bundled server: every answer comes back, in order,
    with the tensors intact."""
    payloads = [np.random.default_rng(k).random(300_000 + k, dtype=np.float32) for k in range(2)]
    wire = b""
    for p in payloads:
        body, headers = binary_request(
            [("IN_FP32", "FP32", [p.size], p.tobytes())],
            [{"name": "OUT_FP32", "parameters": {"binary_data": True}}],
        )
        head = "POST /v2/models/identity_all/infer HTTP/1.1\r\nHost: x\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head += f"Content-Length: {len(body)}\r\n\r\n"
        wire += head.encode() + body
    wire += b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    port = int(bundled_server.url.rsplit(":", 1)[1])
    buf = bytearray()
    with _connect(port) as s:
        s.sendall(wire[:4096])  # the first head and a little of its body first
        time.sleep(0.05)
        s.sendall(wire[4096:])
        for p in payloads:
            head, body = _read_http_response(s, buf)
            assert head.startswith(b"HTTP/1.1 200"), head
            ihcl = int(_header(head, b"inference-header-content-length"))
            assert body[ihcl:] == p.tobytes()
        head, _ = _read_http_response(s, buf)
        assert head.startswith(b"HTTP/1.1 200")
