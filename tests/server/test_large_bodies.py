"""Large request bodies: received straight into one buffer, byte for byte, in order.

The bundled HTTP server writes the rest of a large ``/infer`` body into the
buffer ``read_body`` allocated (:class:`~tritonhttp.server.http._extensions.BodySink`); these
tests send bodies in many uneven pieces over a real socket and check every byte comes
back, and pin the sink's rule that nothing is taken out of order.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import numpy as np

from tritonhttp.server import _launch

from ._wire import binary_request, exchange


def _identity_round_trip(url: str, payload: np.ndarray, pieces: int, pause: float) -> bytes:
    body, headers = binary_request(
        [("IN_FP32", "FP32", [payload.size], payload.tobytes())],
        [{"name": "OUT_FP32", "parameters": {"binary_data": True}}],
    )
    rng = np.random.default_rng(1)
    cuts = [0, *sorted(set(rng.integers(1, len(body), pieces - 1).tolist())), len(body)]

    def pieces_of_body() -> Iterator[bytes]:
        for start, end in itertools.pairwise(cuts):
            yield body[start:end]
            if pause:
                time.sleep(pause)

    reply = exchange(
        url, "POST", "/v2/models/identity_all/infer", pieces_of_body(),
        {**headers, "Content-Length": str(len(body))},
    )  # fmt: skip
    assert reply.status == 200, reply
    return reply.body[int(reply.headers["inference-header-content-length"]) :]


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
    from tritonhttp.server.http._extensions import BodySink

    buf = bytearray(10)
    sink = BodySink(memoryview(buf), 2)
    buf[:2] = b"ab"
    assert sink.take(b"cde")
    assert not sink.take(b"fghijk")  # 6 bytes do not fit in the 5 left
    assert not sink.take(b"f")  # would fit, but must not overtake the refused chunk
    assert sink.closed and sink.filled == 5 and bytes(buf[:5]) == b"abcde"
