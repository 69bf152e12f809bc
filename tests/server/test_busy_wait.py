"""``--http-busy-wait-us``: polling for a quick client's next request never costs an answer.

The server is started with an exaggerated poll (0.3 s) so that every request below lands
while it polls: the next request of the same connection, a request on another open
connection, and a request on a connection opened during the poll (not among the polled
sockets: answered once the poll ends) must all be answered, correctly.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tritonhttp.server import _launch

MODELS = Path(__file__).resolve().parent.parent / "models"

BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
]}).encode()  # fmt: skip


def _request(url: str) -> bytes:
    return (
        f"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: {url}\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY


def _answer(sock: socket.socket) -> dict[str, Any]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "connection closed"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    length = int(head.lower().split(b"\r\ncontent-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(65536)
    outputs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
    assert outputs == {"OUTPUT0": [2.0, 3.0, 4.0, 5.0], "OUTPUT1": [0.0, 1.0, 2.0, 3.0]}
    return outputs


@pytest.fixture(scope="module")
def polling_server(bundled_server_factory: Callable[..., _launch.BundledServer]) -> Any:
    return bundled_server_factory(
        MODELS, "--python-isolation=in-process", "--http-busy-wait-us=300000"
    )


def test_requests_during_the_poll_are_all_answered(polling_server: Any) -> None:
    url = polling_server.url
    host, port = url.split(":")
    a = socket.create_connection((host, int(port)), timeout=10)
    b = socket.create_connection((host, int(port)), timeout=10)
    with a, b:
        for _ in range(3):  # back to back: the server polls after each answer
            a.sendall(_request(url))
            _answer(a)
        b.sendall(_request(url))  # another open connection, during the poll
        _answer(b)
        a.sendall(_request(url))
        _answer(a)
        t0 = time.perf_counter()
        with socket.create_connection((host, int(port)), timeout=10) as c:
            c.sendall(_request(url))  # a new connection, not among the polled ones
            _answer(c)
        assert time.perf_counter() - t0 < 5  # at most one poll's delay, never a hang
