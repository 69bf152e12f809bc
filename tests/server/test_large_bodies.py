"""Large request bodies: received straight into one buffer, byte for byte, in order.

The bundled server's uvicorn protocol writes the rest of a large ``/infer`` body into the
buffer ``read_body`` allocated (:class:`~tritonhttp.server._uvicorn.BodySink`); these
tests send bodies in many uneven pieces over a real socket and check every byte comes
back, and pin the sink's rule that nothing is taken out of order.
"""

from __future__ import annotations

import json
import re
import socket
import time

import numpy as np

from tritonhttp.server import _launch


def _identity_round_trip(url: str, payload: np.ndarray, pieces: int, pause: float) -> bytes:
    blob = payload.tobytes()
    head = json.dumps({
        "inputs": [{"name": "IN_FP32", "datatype": "FP32", "shape": [payload.size],
                    "parameters": {"binary_data_size": len(blob)}}],
        "outputs": [{"name": "OUT_FP32", "parameters": {"binary_data": True}}],
    }).encode()  # fmt: skip
    host, port = url.split(":")
    request = (
        f"POST /v2/models/identity_all/infer HTTP/1.1\r\nHost: {url}\r\n"
        f"Inference-Header-Content-Length: {len(head)}\r\n"
        f"Content-Length: {len(head) + len(blob)}\r\n\r\n"
    ).encode() + head
    rng = np.random.default_rng(1)
    cuts = sorted(set(rng.integers(1, len(blob), pieces - 1).tolist()))
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(request)
        start = 0
        for cut in [*cuts, len(blob)]:
            sock.sendall(blob[start:cut])
            start = cut
            if pause:
                time.sleep(pause)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        header, _, body = data.partition(b"\r\n\r\n")
        assert header.startswith(b"HTTP/1.1 200"), data[:300]
        length = int(re.search(rb"(?im)^content-length:\s*(\d+)", header).group(1))  # type: ignore[union-attr]
        while len(body) < length:
            chunk = sock.recv(1 << 20)
            assert chunk, "connection closed early"
            body += chunk
    ihcl = int(re.search(rb"(?i)inference-header-content-length:\s*(\d+)", header).group(1))  # type: ignore[union-attr]
    return body[ihcl:]


def test_large_body_in_uneven_pieces_comes_back_intact(
    bundled_server: _launch.BundledServer,
) -> None:
    payload = np.random.default_rng(0).random(3_000_000, dtype=np.float32)  # 12 MB
    assert _identity_round_trip(bundled_server.url, payload, 40, 0.002) == payload.tobytes()


def test_large_bodies_back_to_back_on_fresh_connections(
    bundled_server: _launch.BundledServer,
) -> None:
    for k in range(3):
        payload = np.full(1_000_000 + k, float(k), dtype=np.float32)
        assert _identity_round_trip(bundled_server.url, payload, 7, 0) == payload.tobytes()


def test_sink_takes_chunks_in_order_and_refuses_after_a_miss() -> None:
    from tritonhttp.server._uvicorn import BodySink

    buf = bytearray(10)
    sink = BodySink(memoryview(buf), 2)
    buf[:2] = b"ab"
    assert sink.take(b"cde")
    assert not sink.take(b"fghijk")  # 6 bytes do not fit in the 5 left
    assert not sink.take(b"f")  # would fit, but must not overtake the refused chunk
    assert sink.closed and sink.filled == 5 and bytes(buf[:5]) == b"abcde"
