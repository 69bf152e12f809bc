"""``examples/python_models`` (our own models mirroring the python_backend examples) on real
Triton 2.51 and on our server in both isolation modes: same answers, byte for byte."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

from ._http import exchange, infer_body, reference
from .conftest import EXAMPLES, Start

pytestmark = pytest.mark.real_triton

A = [1.0, 2.0, 3.0, 4.0]
B = [4.0, 3.0, 2.0, 1.0]


def fp32(a: list[float], b: list[float], shape: list[int] | None = None) -> list[Any]:
    shape = shape or [4]
    return [("INPUT0", "FP32", shape, a), ("INPUT1", "FP32", shape, b)]


# (method, path, body)
REQUESTS: list[tuple[str, str, str]] = [
    *[("POST", f"/v2/models/{m}/infer", infer_body(*fp32(A, B), id="r1"))
      for m in ("add_sub", "sub_add", "nobatch_auto_complete", "bls_async")],
    *[("POST", "/v2/models/bls_sync/infer",
       infer_body(("MODEL_NAME", "BYTES", [1], [callee]), *fp32(A, B)))
      for callee in ("add_sub", "sub_add", "nope")],
    *[("POST", f"/v2/models/{m}/infer", infer_body(("IN", "INT32", [1], [n])))
      for m in ("bls_decoupled_sync", "bls_decoupled_async") for n in (0, 1, 4)],
    ("POST", "/v2/models/square_int32/generate_stream", json.dumps({"IN": 3})),
    ("POST", "/v2/models/square_int32/generate_stream", json.dumps({"IN": 0})),
    ("POST", "/v2/models/square_int32/generate_stream", json.dumps({"IN": -1})),
    ("POST", "/v2/models/square_int32/generate", json.dumps({"IN": 1})),
    ("POST", "/v2/models/square_int32/generate", json.dumps({"IN": 2})),
    ("POST", "/v2/models/square_int32/infer", infer_body(("IN", "INT32", [1], [1]))),
    ("POST", "/v2/models/repeat_int32/generate_stream",
     json.dumps({"IN": [4, 2, 0], "DELAY": [1, 2, 3], "WAIT": 5})),
    ("POST", "/v2/models/repeat_int32/generate_stream",
     json.dumps({"IN": [4, 2], "DELAY": [1], "WAIT": 0})),
    ("POST", "/v2/models/batch_auto_complete/infer",
     infer_body(*fp32(A + A, B + B, [2, 4]))),
    ("POST", "/v2/models/batch_auto_complete/infer", infer_body(*fp32(A * 5, B * 5, [5, 4]))),
    ("GET", "/v2/models/batch_auto_complete/config", ""),
    ("GET", "/v2/models/nobatch_auto_complete/config", ""),
    ("GET", "/v2/models/square_int32/config", ""),
    ("POST", "/v2/models/custom_metrics/infer", infer_body(("INPUT0", "FP32", [3], [1, 2, 3]))),
    ("POST", "/v2/models/instance_kind/infer", infer_body(("INPUT0", "FP32", [2], [0, 0]))),
    ("POST", "/v2/models/optional_inputs/infer", infer_body(("INPUT0", "INT32", [1], [1]))),
    ("POST", "/v2/models/optional_inputs/infer", infer_body(("INPUT1", "INT32", [1], [1]))),
    ("POST", "/v2/models/optional_inputs/infer", infer_body()),
    ("POST", "/v2/models/parameters/infer",
     infer_body(("INPUT0", "BYTES", [1], ["x"]),
                parameters={"temperature": 1, "mode": "fast", "flag": True, "f": 0.5})),
    ("POST", "/v2/models/logging/infer", infer_body(("INPUT0", "BYTES", [1], ["x"]))),
]  # fmt: skip


def _normalise(body: bytes) -> bytes:
    return re.sub(rb"instance_kind_0_\d", b"instance_kind_0_N", body)


@pytest.fixture
def real(real_triton_factory: Any) -> Any:
    # per test: the pool starts real Triton again if ``reference`` stopped a hung one
    return real_triton_factory(EXAMPLES)


@pytest.mark.parametrize(("method", "path", "body"), REQUESTS)
def test_same_answer_as_triton(real: Any, ours: Start, method: str, path: str, body: str) -> None:
    server = ours(EXAMPLES)
    r = exchange(real.url, method, path, body)
    reference(r.body, real)
    o = exchange(server.url, method, path, body)
    assert (o.status, o.headers.get("content-type"), _normalise(o.body)) == (
        r.status,
        r.headers.get("content-type"),
        _normalise(r.body),
    )


def test_custom_metrics_on_the_metrics_endpoint(real: Any, ours: Start) -> None:
    server = ours(EXAMPLES)
    body = infer_body(("INPUT0", "FP32", [3], [1, 2, 3]))
    for url in (real.url, server.url):
        for _ in range(2):
            assert exchange(url, "POST", "/v2/models/custom_metrics/infer", body).status == 200
    texts = [exchange(s.metrics_url, "GET", "/metrics").body.decode() for s in (real, server)]
    for text in texts:
        assert (
            "# HELP requests_process_latency_ns Cumulative time spent processing requests" in text
        )
        assert "# TYPE requests_process_latency_ns counter" in text
        assert "# TYPE last_batch_size gauge" in text
        assert "# TYPE input_elements histogram" in text
        assert re.search(r'last_batch_size\{model="custom_metrics",version="1"\} 1(\.0)?\n', text)
        assert re.search(r'input_elements_count\{model="custom_metrics",version="1"\} \d', text)
        latency = re.search(
            r'requests_process_latency_ns\{model="custom_metrics",version="1"\} ([\d.e+]+)', text
        )
        assert latency is not None and float(latency.group(1)) > 0
    buckets = [
        sorted(re.findall(r'input_elements_bucket\{[^}]*le="([^"]+)"[^}]*\}', t)) for t in texts
    ]
    assert buckets[0] == buckets[1]


def test_the_example_client_runs(ours: Start) -> None:
    server = ours(EXAMPLES)
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "client.py"), "--url", server.url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "bls_decoupled_sync [9]" in out.stdout
    assert "optional_inputs [6] [-4]" in out.stdout
