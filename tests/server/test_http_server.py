"""The bundled HTTP/1.1 server (tritonhttp.server.http).

Three parts: whole responses byte for byte against real Triton (status line, header
names, their order and case, body); the server's own behaviour under a small ASGI
application of the test's (eager and suspended applications, pipelining, errors,
framing, flow control, disconnects, bounds); and ``--http-server=uvicorn`` still
serving the same application.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tritonhttp.server.http import HttpServer
from tritonhttp.server.http._connection import MAX_HEAD_BYTES, Connection
from tritonhttp.server.http._extensions import ON_DISCONNECT, RESPOND

from ._wire import exchange

MODELS = Path(__file__).resolve().parent.parent / "models"

ADD = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
]}, separators=(",", ":"))  # fmt: skip
ADD_BINARY_OUT = json.dumps({"inputs": json.loads(ADD)["inputs"], "outputs": [
    {"name": "OUTPUT0", "parameters": {"binary_data": True}}]}, separators=(",", ":"))  # fmt: skip


def _request(method: str, path: str, headers: tuple[str, ...], body: str, version: str) -> bytes:
    lines = [f"{method} {path} HTTP/{version}", "Host: x", *headers]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n" + body).encode()


def _get(path: str, *headers: str, version: str = "1.1") -> bytes:
    return _request("GET", path, headers, "", version)


def _post(path: str, body: str, *headers: str, version: str = "1.1") -> bytes:
    return _request("POST", path, headers, body, version)


# ----------------------------------------------------------------------------- raw I/O


def _read_response(sock: socket.socket, buf: bytearray) -> bytes:
    """One whole response from ``sock`` (Content-Length, chunked or to EOF)."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError(f"closed inside a response head: {bytes(buf)!r}")
        buf += data
    end = buf.index(b"\r\n\r\n") + 4
    head = bytes(buf[:end]).lower()
    if b" 100 continue" in head.split(b"\r\n", 1)[0]:
        del buf[:end]
        return bytes(head)
    m = re.search(rb"\r\ncontent-length: *(\d+)", head)
    if m is not None:
        total = end + int(m.group(1))
    elif b"transfer-encoding: chunked" in head:
        while not buf.endswith(b"0\r\n\r\n"):
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("closed inside a chunked body")
            buf += data
        total = len(buf)
    elif b"connection: close" in head or (
        head.startswith(b"http/1.0") and b"connection: keep-alive" not in head
    ):
        while data := sock.recv(65536):
            buf += data
        total = len(buf)
    else:  # (Triton's HTTP/1.0 keep-alive answer with an empty body has no length)
        total = end
    while len(buf) < total:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed inside a body")
        buf += data
    out = bytes(buf[:total])
    del buf[:total]
    return out


def _raw(url: str, request: bytes, responses: int = 1, timeout: float = 10.0) -> list[bytes]:
    host, port = url.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(request)
        buf = bytearray()
        return [_read_response(s, buf) for _ in range(responses)]


def _closed_after(sock: socket.socket, timeout: float = 5.0) -> bool:
    """Whether the peer closes the connection (EOF) within ``timeout``."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def _eventually(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


# ----------------------------------------------------------------------------- vs Triton

WIRE_CASES = {
    "http10-health": _get("/v2/health/ready", version="1.0"),
    "http10-keep-alive": _get("/v2", "Connection: keep-alive", version="1.0"),
    "http10-keep-alive-empty": _get("/v2/health/ready", "Connection: keep-alive", version="1.0"),
    "http10-error": _get("/v2/models/nope/ready", version="1.0"),
    "http10-infer": _post("/v2/models/add_sub/infer", ADD, version="1.0"),
    "http10-health-close": _get("/v2/health/live", "Connection: close", version="1.0"),
    "health": _get("/v2/health/live"),
    "health-close": _get("/v2/health/live", "Connection: close"),
    # server health is answered without running the application: these variants must not
    # change what is answered
    "health-query": _get("/v2/health/ready?x=1"),
    "health-percent-encoded": _get("/v2/health/l%69ve", "Connection: close"),
    "health-absolute-url": b"GET http://x/v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n",
    "health-with-body": _request("GET", "/v2/health/live", ("Connection: close",), "abc", "1.1"),
    "health-chunked-empty": b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n",
    "health-post": _post("/v2/health/live", "", "Connection: close"),
    "not-ready-close": _get("/v2/models/nope/ready", "Connection: close"),
    "405": b"PUT /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "404": _get("/nope"),
    "model-ready": _get("/v2/models/add_sub/ready"),
    "metadata": _get("/v2/models/add_sub", "Connection: close"),
    "infer-json": _post("/v2/models/add_sub/infer", ADD),
    "infer-binary": _post("/v2/models/add_sub/infer", ADD_BINARY_OUT, "Connection: close"),
    "infer-gzip": _post("/v2/models/add_sub/infer", ADD_BINARY_OUT, "Accept-Encoding: gzip"),
    "infer-unknown": _post("/v2/models/nope/infer", ADD),
    "infer-bad-json": _post("/v2/models/add_sub/infer", "{", "Connection: close"),
}


@pytest.mark.real_triton
@pytest.mark.parametrize("name", sorted(WIRE_CASES))
def test_whole_response_bytes_as_real_triton(
    name: str, real_triton: Any, bundled_server: Any
) -> None:
    real = _raw(real_triton.url, WIRE_CASES[name])
    ours = _raw(bundled_server.url, WIRE_CASES[name])
    assert ours == real


@pytest.mark.real_triton
def test_100_continue_as_real_triton(real_triton: Any, bundled_server: Any) -> None:
    def run(url: str) -> list[bytes]:
        host, port = url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            head = _post("/v2/models/add_sub/infer", ADD, "Expect: 100-continue")
            s.sendall(head[: -len(ADD)])
            buf = bytearray()
            first = _read_response(s, buf)
            s.sendall(ADD.encode())
            return [first, _read_response(s, buf)]

    assert run(bundled_server.url) == run(real_triton.url)


@pytest.mark.real_triton
def test_keep_alive_idle_connections_stay_open(real_triton: Any, bundled_server: Any) -> None:
    """Neither server closes an idle keep-alive connection (uvicorn did after 5 s)."""
    for url in (real_triton.url, bundled_server.url):
        host, port = url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            buf = bytearray()
            s.sendall(_get("/v2/health/live"))
            _read_response(s, buf)
            time.sleep(6)
            s.sendall(_get("/v2/health/live"))
            assert _read_response(s, buf).startswith(b"HTTP/1.1 200 OK")


def test_pipelined_requests_answered_in_order(bundled_server: Any) -> None:
    """Requests that complete at once and ones that wait for a worker, on one connection."""
    requests = [
        _get("/v2/health/live"),
        _post("/v2/models/add_sub/infer", ADD),
        b"GET /v2/models/add_sub/ready HTTP/1.1\r\nHost: x\r\n\r\n",
        _post("/v2/models/nope/infer", ADD),
        _post("/v2/models/add_sub/infer", ADD_BINARY_OUT),
    ] * 20
    answers = _raw(bundled_server.url, b"".join(requests), responses=len(requests))
    for i, answer in enumerate(answers):
        kind = i % 5
        if kind == 1:
            assert b'"data":[2.0,3.0,4.0,5.0]' in answer
        elif kind == 3:
            assert answer.startswith(b"HTTP/1.1 404 Not Found")
        elif kind == 4:
            assert answer.startswith(b"HTTP/1.1 200 OK")
            assert b"binary_data_size" in answer
        else:
            assert answer.startswith(b"HTTP/1.1 200 OK")


def test_unparsable_request_gets_400_and_close(bundled_server: Any) -> None:
    host, port = bundled_server.url.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"GARBAGE\r\n\r\n")
        answer = _read_response(s, bytearray())
        assert answer.startswith(b"HTTP/1.1 400 Bad Request")
        assert answer.endswith(b"Invalid HTTP request received.")
        assert _closed_after(s)


def test_oversized_request_head_gets_431_and_close(bundled_server: Any) -> None:
    host, port = bundled_server.url.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n")
        filler = b"X-Filler: " + b"a" * 60000 + b"\r\n"
        sent = 0
        try:
            while sent <= MAX_HEAD_BYTES:
                s.sendall(filler)
                sent += len(filler)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed while we were still sending
        answer = _read_response(s, bytearray())
        assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large")
        assert _closed_after(s)
    # the server keeps serving
    assert exchange(bundled_server.url, "GET", "/v2/health/live").status == 200


# ----------------------------------------------------------------------------- own app


class _AppServer:
    """An HttpServer on a loop of its own thread, serving the test's ASGI app."""

    def __init__(self, app: Callable[..., Any], **kwargs: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = HttpServer(app, **kwargs)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self.server.listen("127.0.0.1", 0))
        self.url = f"127.0.0.1:{self.server.ports[0]}"

    def call(self, coro: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self, timeout: float = 1.0) -> None:
        self.call(self.server.shutdown(timeout))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@contextmanager
def serving(app: Callable[..., Any], **kwargs: Any) -> Iterator[_AppServer]:
    s = _AppServer(app, **kwargs)
    try:
        yield s
    finally:
        s.close()


async def _read_all(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        assert message["type"] == "http.request"
        body += message["body"]
        if not message["more_body"]:
            return body


def _echo_app(delay: float | None = None, events: list[str] | None = None) -> Any:
    """Answers ``<path>:<body>``; waits ``delay`` (0: one bare yield) first when set."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await _read_all(receive)
        if delay is not None:
            await asyncio.sleep(delay)
        payload = scope["path"].encode() + b":" + body
        if events is not None:
            events.append(scope["path"])
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(payload)).encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": payload})

    return app


@pytest.mark.parametrize("delay", [None, 0, 0.01])
def test_eager_and_suspended_applications(delay: float | None) -> None:
    with serving(_echo_app(delay)) as s:
        r = exchange(s.url, "POST", "/a", b"hello")
        assert (r.status, r.body) == (200, b"/a:hello")
        pipelined = b"".join(_post(f"/{i}", str(i)) for i in range(30))
        answers = _raw(s.url, pipelined, responses=30)
        assert [a.split(b"\r\n\r\n", 1)[1] for a in answers] == [
            f"/{i}:{i}".encode() for i in range(30)
        ]
        # every application has ended (the last one a moment after its answer went out)
        assert _eventually(lambda: s.server.active == 0 and not s.server.tasks)


def test_application_waiting_on_a_future_set_later() -> None:
    gate: dict[str, asyncio.Future[bytes]] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await _read_all(receive)
        fut = gate[scope["path"]] = asyncio.get_running_loop().create_future()
        payload = await fut
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": payload})

    with serving(app) as s:
        result: list[Any] = []
        t = threading.Thread(target=lambda: result.append(exchange(s.url, "GET", "/f")))
        t.start()
        assert _eventually(lambda: "/f" in gate)
        s.loop.call_soon_threadsafe(gate["/f"].set_result, b"later")
        t.join(10)
        r = result[0]
        # no Content-Length from the app: the body goes out chunked
        assert (r.status, r.body, r.headers["transfer-encoding"]) == (201, b"later", "chunked")


def test_shutdown_cancels_a_waiting_application() -> None:
    seen: list[str] = []
    started = threading.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        started.set()
        try:
            await asyncio.get_running_loop().create_future()  # never set
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    s = _AppServer(app)
    host, port = s.url.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(_get("/v2/health/live"))
        assert started.wait(10)
        s.close(timeout=0.2)
        assert _closed_after(sock)
    assert seen == ["cancelled"]


@pytest.mark.parametrize("fault", ["raise-before", "no-response", "raise-after", "too-long"])
def test_application_faults(fault: str) -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["path"] == "/ok":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", b"2")]})  # fmt: skip
            await send({"type": "http.response.body", "body": b"ok"})
            return
        if fault == "raise-before":
            raise ValueError("boom")
        if fault == "no-response":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"10")]})  # fmt: skip
        if fault == "raise-after":
            await send({"type": "http.response.body", "body": b"12345", "more_body": True})
            raise ValueError("boom")
        await send({"type": "http.response.body", "body": b"0123456789abc"})

    with serving(app) as s:
        host, port = s.url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
            if fault in ("raise-before", "no-response"):
                answer = _read_response(sock, bytearray())
                assert answer.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
                assert b"Connection: close" in answer
            assert _closed_after(sock)  # the framing cannot be trusted any more
        assert exchange(s.url, "GET", "/ok").body == b"ok"  # still serving


def test_head_requests_get_no_body() -> None:
    with serving(_echo_app()) as s:
        host, port = s.url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while data := sock.recv(65536):
                answer += data
        head, _, body = answer.partition(b"\r\n\r\n")
        assert b"Content-Length: 3" in head and body == b""


def test_bodiless_statuses_get_no_framing() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    with serving(app) as s:
        host, port = s.url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            buf = bytearray()
            for _ in range(2):  # the connection stays usable
                sock.sendall(_get("/"))
                while b"\r\n\r\n" not in buf:
                    buf += sock.recv(65536)
                head, _, rest = bytes(buf).partition(b"\r\n\r\n")
                assert head == b"HTTP/1.1 204 No Content" and rest == b""
                buf.clear()


def test_http10_without_content_length_ends_with_the_connection() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for part in (b"one ", b"two ", b"three"):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    with serving(app) as s:
        answer = _raw(s.url, b"GET / HTTP/1.0\r\n\r\n")[0]
        assert answer == b"HTTP/1.0 200 OK\r\n\r\none two three"
        # asked to keep the connection, it still has to close it (and says nothing else)
        answer = _raw(s.url, b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")[0]
        assert answer == b"HTTP/1.0 200 OK\r\n\r\none two three"
        r = exchange(s.url, "GET", "/")
        assert (r.headers["transfer-encoding"], r.body) == ("chunked", b"one two three")


def test_chunked_request_body_and_expect_continue() -> None:
    with serving(_echo_app()) as s:
        host, port = s.url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                b"POST /c HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            buf = bytearray()
            assert _read_response(sock, buf) == b"http/1.1 100 continue\r\n\r\n"
            sock.sendall(b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")
            assert _read_response(sock, buf).endswith(b"\r\n\r\n/c:abcdefg")


def test_large_bodies_both_ways_with_a_slow_reader() -> None:
    size = 24 << 20

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await _read_all(receive)
        assert len(body) == size
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(2 * size).encode())]})  # fmt: skip
        view = memoryview(body)
        await send({"type": "http.response.body", "body": view, "more_body": True})
        await send({"type": "http.response.body", "body": view[::-1].tobytes()})

    payload = bytes(range(256)) * (size // 256)
    with serving(app) as s:
        host, port = s.url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            sock.sendall(b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size)
            sock.sendall(payload)
            time.sleep(0.5)  # the server fills the socket and has to wait for the reader
            answer = _read_response(sock, bytearray())
        body = answer.partition(b"\r\n\r\n")[2]
        assert body[:size] == payload and body[size:] == payload[::-1]


def test_disconnect_reaches_the_application() -> None:
    notes: list[str] = []
    waiting = threading.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        scope[ON_DISCONNECT] = lambda: notes.append("callback")
        await _read_all(receive)
        waiting.set()
        message = await receive()  # nothing more to read: waits for the client to go
        notes.append(message["type"])

    with serving(app) as s:
        host, port = s.url.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(_post("/d", "x"))
        assert waiting.wait(10)
        sock.close()
        assert _eventually(lambda: len(notes) == 2)
    assert notes == ["callback", "http.disconnect"]


#: request kinds whose answers must be the same bytes: (request line, extra headers)
_REQUEST_KINDS = [
    ("GET {} HTTP/1.1", ""),
    ("GET {} HTTP/1.1", "Connection: close\r\n"),
    ("GET {} HTTP/1.0", ""),
    ("GET {} HTTP/1.0", "Connection: keep-alive\r\n"),
    ("HEAD {} HTTP/1.1", "Connection: close\r\n"),
]


def _answers_per_kind(url: str, paths: tuple[str, ...], line: str, extra: str) -> list[bytes]:
    """Each path's answer on a new connection for one request kind; the connection must
    close or stay open (then answer the same again) as the kind says."""
    host, port = url.rsplit(":", 1)
    answers = []
    for path in paths:
        request = f"{line.format(path)}\r\nHost: x\r\n{extra}\r\n".encode()
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(request)
            if line.startswith("HEAD"):
                answers.append(sock.recv(1 << 20))  # (a head only, then the close)
                assert _closed_after(sock)
                continue
            buf = bytearray()
            answers.append(_read_response(sock, buf))
            if "close" in extra or ("1.0" in line and not extra):
                assert _closed_after(sock)
            else:
                sock.sendall(request)  # still open: answered again
                assert _read_response(sock, buf) == answers[-1]
    return answers


class _ImmediateApp:
    """Answers ``/now`` through ``immediate_answer`` and everything else through ASGI —
    ``/asgi-now`` with the same answer, ``/slow`` after a wait; ``/boom`` makes
    ``immediate_answer`` raise."""

    ANSWER = (201, ((b"content-length", b"3"), (b"content-type", b"text/plain")), b"now")

    def __init__(self) -> None:
        self.called: list[str] = []

    def immediate_answer(self, scope: dict[str, Any]) -> Any:
        if scope["path"] == "/boom":
            raise ValueError("boom")
        return self.ANSWER if scope["path"] == "/now" else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.called.append(scope["path"])
        await _read_all(receive)
        if scope["path"] == "/slow":
            await asyncio.sleep(0.01)
        status, headers, body = self.ANSWER
        await send({"type": "http.response.start", "status": status, "headers": list(headers)})
        await send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize("variant", _REQUEST_KINDS)
def test_immediate_answers_are_the_applications_bytes(variant: tuple[str, str]) -> None:
    app = _ImmediateApp()
    with serving(app) as s:
        for _ in range(2):  # the second answer comes from the server's cache of bytes
            answers = _answers_per_kind(s.url, ("/now", "/asgi-now"), *variant)
            assert answers[0] == answers[1]
    assert app.called.count("/now") == 0


def test_immediate_answers_in_order_and_their_fallbacks(caplog: Any) -> None:
    app = _ImmediateApp()
    with serving(app) as s:
        # pipelined: immediate answers behind a request that waits keep their place
        paths = ["/slow", "/now", "/now", "/slow", "/now"] * 4
        answers = _raw(s.url, b"".join(_get(p) for p in paths), responses=len(paths))
        assert len(answers) == len(paths)
        assert all(a.endswith(b"\r\n\r\nnow") for a in answers)
        assert app.called == ["/slow", "/slow"] * 4
        # a request with a body, an answer of None and a failing hook all run the app
        app.called.clear()
        assert exchange(s.url, "POST", "/now", b"x").status == 201
        assert exchange(s.url, "GET", "/other").status == 201
        assert exchange(s.url, "GET", "/boom").status == 201
        assert app.called == ["/now", "/other", "/boom"]
    assert "immediate_answer failed" in caplog.text


async def _respond_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/respond/<n>`` answers ``n`` bytes through ``scope[RESPOND]``, ``/asgi/<n>`` the
    same through two ASGI messages; ``/parts/<n>`` answers them in two parts (bytes, then
    a memoryview) with one more header through ``scope[RESPOND]``, ``/asgi-parts/<n>``
    the same through three ASGI messages; ``/twice`` calls ``respond`` after ``send``."""
    await _read_all(receive)
    kind, _, n = scope["path"][1:].partition("/")
    body = (b"0123456789abcdef" * (int(n or 0) // 16 + 1))[: int(n or 0)]
    half = len(body) // 2
    extra = ((b"x-part-length", b"%d" % half),)
    if kind == "twice":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        scope[RESPOND](200, b"text/plain", b"x")  # raises: the response has started
    if kind in ("respond", "parts"):
        if kind == "respond":
            waiting = scope[RESPOND](202, b"text/plain", body)
        else:
            parts = [body[:half], memoryview(body)[half:]]
            waiting = scope[RESPOND](202, b"application/octet-stream", parts, extra)
        if waiting is not None:
            await waiting
        return
    length = (b"content-length", str(len(body)).encode())
    if kind == "asgi-parts":
        headers = [(b"content-type", b"application/octet-stream"), *extra, length]
        await send({"type": "http.response.start", "status": 202, "headers": headers})
        await send({"type": "http.response.body", "body": body[:half], "more_body": True})
        await send({"type": "http.response.body", "body": body[half:]})
        return
    headers = [(b"content-type", b"text/plain"), length]
    await send({"type": "http.response.start", "status": 202, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize("variant", _REQUEST_KINDS)
@pytest.mark.parametrize("size", [0, 5, 70_000])
def test_respond_sends_the_asgi_bytes(variant: tuple[str, str], size: int) -> None:
    with serving(_respond_app) as s:
        for _ in range(2):  # the second head comes from the server's cache
            answers = _answers_per_kind(s.url, (f"/respond/{size}", f"/asgi/{size}"), *variant)
            assert answers[0] == answers[1]
            assert answers[0].startswith(b"HTTP/1.") and b" 202 " in answers[0][:13]


@pytest.mark.parametrize("variant", _REQUEST_KINDS)
@pytest.mark.parametrize("size", [0, 5, 70_000])
def test_respond_in_parts_sends_the_asgi_bytes_in_one_write(
    variant: tuple[str, str], size: int, monkeypatch: Any
) -> None:
    writes: collections.Counter[str] = collections.Counter()
    for name in ("write", "write_parts"):
        plain = getattr(Connection, name)

        def counted(self: Any, data: Any, _plain: Any = plain) -> None:
            writes[self.current.scope["path"] if self.current else ""] += 1
            _plain(self, data)

        monkeypatch.setattr(Connection, name, counted)
    calls: collections.Counter[str] = collections.Counter()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        calls[scope["path"]] += 1
        await _respond_app(scope, receive, send)

    parts, asgi = f"/parts/{size}", f"/asgi-parts/{size}"
    with serving(app) as s:
        answers = _answers_per_kind(s.url, (parts, asgi), *variant)
    assert answers[0] == answers[1]
    assert b"\r\nX-Part-Length: %d\r\n" % (size // 2) in answers[0]
    if size:  # one write per answer (an empty body takes the general path)
        assert writes[parts] == calls[parts] > 0
        if not variant[0].startswith("HEAD"):  # (the count sees the ASGI path's two writes)
            assert writes[asgi] > calls[asgi]


def test_respond_waits_for_a_slow_reader_and_refuses_a_started_response(caplog: Any) -> None:
    size = 24 << 20
    with serving(_respond_app) as s:
        host, port = s.url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            # pipelined: the second request waits until the first answer has drained
            sock.sendall(_get(f"/respond/{size}") + _get("/respond/3"))
            time.sleep(0.5)  # the server fills the socket and has to wait for the reader
            buf = bytearray()
            first = _read_response(sock, buf)
            assert len(first.partition(b"\r\n\r\n")[2]) == size
            assert _read_response(sock, buf).endswith(b"\r\n\r\n012")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(_get("/twice"))  # the head had started: the connection closes
            assert _closed_after(sock)
        assert _raw(s.url, _get("/respond/3"))[0].endswith(b"\r\n\r\n012")  # still serving
    assert "the response has already started" in caplog.text


def test_busy_wait_serves_back_to_back_requests() -> None:
    with serving(_echo_app(), busy_wait_us=2000) as s:
        host, port = s.url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            buf = bytearray()
            for i in range(50):
                sock.sendall(_post(f"/{i}", "b"))
                assert _read_response(sock, buf).endswith(f"/{i}:b".encode())


def test_busy_wait_polls_once_the_answered_application_has_ended(monkeypatch: Any) -> None:
    # the poll for the next request waits for nothing the answered request still does
    # after its send (that work would otherwise delay the next request)
    events: list[str] = []
    plain_poll = Connection._poll_next

    def poll_next(self: Any, *args: Any) -> None:
        events.append("poll")
        plain_poll(self, *args)

    monkeypatch.setattr(Connection, "_poll_next", poll_next)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await _read_all(receive)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"2")]})  # fmt: skip
        events.append("answering " + scope["path"])
        await send({"type": "http.response.body", "body": b"ok"})
        events.append("ended " + scope["path"])

    with serving(app, busy_wait_us=200_000) as s:
        host, port = s.url.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            buf = bytearray()
            for i in range(10):
                sock.sendall(_post(f"/{i}", "b"))
                assert _read_response(sock, buf).endswith(b"ok")
        assert _eventually(lambda: events.count("ended /9") == 1)
    polls = [i for i, e in enumerate(events) if e == "poll"]
    assert len(polls) >= 8, events  # (the first request is not yet "back to back")
    for i in polls:
        answering = [e for e in events[:i] if e.startswith("answering ")][-1]
        assert "ended " + answering.split()[1] in events[:i], events


# ----------------------------------------------------------------------------- uvicorn


def test_uvicorn_serves_the_same_application(bundled_server_factory: Any) -> None:
    native = bundled_server_factory(MODELS)
    uvicorn = bundled_server_factory(MODELS, "--http-server=uvicorn")
    for method, path, body in [
        ("GET", "/v2/health/ready", b""),
        ("POST", "/v2/models/add_sub/infer", ADD.encode()),
        ("PUT", "/v2/health/live", b""),
        ("GET", "/v2/models/add_sub/config", b""),
    ]:
        a = exchange(native.url, method, path, body)
        b = exchange(uvicorn.url, method, path, body)
        assert a.key() == b.key(), path
