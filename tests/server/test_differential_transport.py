"""Transport details over raw sockets: chunked uploads, HTTP/1.0, Connection: close,
keep-alive across many requests — same status and body as real Triton."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

pytestmark = pytest.mark.real_triton

BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
]}).encode()  # fmt: skip


def _raw(url: str, request: bytes) -> bytes:
    host, port = url.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


def _status_and_body(raw: bytes) -> tuple[bytes, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0].split(b" ", 2)[1], body


def _chunked(body: bytes) -> bytes:
    parts = [body[:10], body[10:50], body[50:]]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


CASES = {
    "chunked-upload": b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + _chunked(BODY),
    "http10": b"GET /v2/health/ready HTTP/1.0\r\n\r\n",
    "http10-infer": b"POST /v2/models/add_sub/infer HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s"
    % (len(BODY), BODY),
    "connection-close": b"GET /v2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "lowercase-ihcl": b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    b"inference-header-content-length: %d\r\nContent-Length: %d\r\n\r\n%s"
    % (len(BODY), len(BODY), BODY),
    # found by test_differential_fuzz_wire: Triton answers any Expect with 100 Continue
    # as soon as the head is read (the body sent along or not, whatever the method, in
    # HTTP/1.0 too), then the response
    "expect-continue-body-sent": b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\n"
    b"Expect: 100-continue\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
    % (len(BODY), BODY),
    "expect-continue-get": b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n"
    b"Expect: 100-continue\r\nConnection: close\r\n\r\n",
    "expect-continue-http10": b"POST /v2/models/add_sub/infer HTTP/1.0\r\n"
    b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY),
    # Content-Length given twice with one number (as some proxies forward it): read once
    "content-length-twice": b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\n"
    b"Content-Length: %d\r\nConnection: close\r\ncontent-length:  0%d\r\n\r\n%s"
    % (len(BODY), len(BODY), BODY),
    "content-length-twice-pipelined": b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\n"
    b"Content-Length: %d\r\n\r\n%sGET /v2 HTTP/1.1\r\nContent-Length: 0\r\n"
    b"Content-Length: 0\r\nConnection: close\r\n\r\n" % (len(BODY), BODY),
    # bytes after a request that closes the connection: it is answered, the rest dropped
    "pipelined-after-close": b"GET /v2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
    % (len(BODY), BODY),
    "pipelined-after-http10": b"GET /v2/health/ready HTTP/1.0\r\n\r\nGET /v2 HTTP/1.1\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_status_and_body(name: str, real_triton: Any, bundled_server: Any) -> None:
    real = _status_and_body(_raw(real_triton.url, CASES[name]))
    ours = _status_and_body(_raw(bundled_server.url, CASES[name]))
    assert ours == real


def test_keep_alive_many_requests_on_one_connection(bundled_server: Any) -> None:
    host, port = bundled_server.url.split(":")
    request = (
        b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
        % (
            len(BODY),
            BODY,
        )
    )
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request * 50)  # pipelined
        data = b""
        while data.count(b'"model_name":"add_sub"') < 50:
            chunk = s.recv(65536)
            assert chunk
            data += chunk
    assert data.count(b"HTTP/1.1 200 OK") == 50
