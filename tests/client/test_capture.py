"""The exact request bytes: tritonhttp must send what tritonclient.http sends.

A tiny real HTTP server on 127.0.0.1 records every request it receives and answers with
canned responses. Each scenario runs through both clients; the recorded bytes must be
identical except for the documented differences:

* the ``User-Agent`` value (``tritonhttp/<version>`` instead of geventhttpclient's), and
* the gzip header's MTIME field (``gzip.compress`` stamps the current time).
"""

from __future__ import annotations

import gzip
import importlib.metadata
import re
import socket
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import geventhttpclient
import ml_dtypes
import numpy as np
import pytest
import tritonclient.http as ref_http
from tritonclient.http.auth import BasicAuth as RefBasicAuth

import tritonhttp
from tritonhttp.auth import BasicAuth

from ._scripted import ScriptedServer, serving

_INFER_HEADER = (
    b'{"model_name":"m","model_version":"1","outputs":['
    b'{"name":"OUT","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},'
    b'{"name":"S","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":11}},'
    b'{"name":"J","datatype":"INT64","shape":[1,2],"data":[1,-2]}]}'
)
_INFER_BINARY = np.array([1.5, -2.0], np.float32).tobytes() + b"\x02\x00\x00\x00ab\x01\x00\x00\x00c"


def _response(status: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    head = f"HTTP/1.1 {status}\r\n"
    for k, v in (headers or {}).items():
        head += f"{k}: {v}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def answer(head: bytes) -> bytes:
    """A canned response for a request head."""
    request_line = head.split(b"\r\n", 1)[0].decode()
    method, target, _ = request_line.split(" ")
    lower = head.lower()
    if "fail" in target:
        return _response("400 Bad Request", b'{"error":"canned failure"}')
    if target.split("?")[0].endswith("/infer"):
        body = _INFER_HEADER + _INFER_BINARY
        headers = {"Inference-Header-Content-Length": str(len(_INFER_HEADER))}
        if b"accept-encoding: gzip" in lower:
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        elif b"accept-encoding: deflate" in lower:
            body = zlib.compress(body)
            headers["Content-Encoding"] = "deflate"
        return _response("200 OK", body, headers)
    if "/health/" in target or target.split("?")[0].endswith("/ready"):
        return _response("200 OK", b"")
    if method == "POST" and ("register" in target or "/load" in target or "/unload" in target):
        return _response("200 OK", b"")
    if "repository/index" in target:
        return _response("200 OK", b'[{"name":"m","state":"READY"}]')
    return _response("200 OK", b'{"name":"m","value":"\\u00e9"}')


def _answer(conn: socket.socket, index: int, request: bytes) -> bool:
    conn.sendall(answer(request.partition(b"\r\n\r\n")[0]))
    return True


@pytest.fixture(scope="module")
def capture() -> Iterator[ScriptedServer]:
    """Records the raw bytes of every request and answers it with a canned response."""
    with serving(_answer) as server:
        yield server


_UA = re.compile(rb"\r\nUser-Agent: (python/gevent-http-client-[\d.]+|tritonhttp/[^\r]+)\r\n")


#: The reference's transport before geventhttpclient 2.6 (2.4 is the newest for Python
#: 3.10) sends a POST without a body with no ``Content-Length`` and reads an answer into a
#: ``bytearray``; tritonhttp behaves as tritonclient does with a current geventhttpclient.
OLD_GEVENTHTTPCLIENT = tuple(
    int(p) for p in importlib.metadata.version("geventhttpclient").split(".")[:2]
) < (2, 6)


def normalize(raw: bytes) -> bytes:
    """Blank out the documented differences (default User-Agent, gzip MTIME), and the
    ``Content-Length: 0`` of a POST without a body under an old geventhttpclient."""
    raw = _UA.sub(b"\r\nUser-Agent: <default>\r\n", raw)
    head, _, body = raw.partition(b"\r\n\r\n")
    if OLD_GEVENTHTTPCLIENT and head.startswith(b"POST ") and not body:
        head = re.sub(rb"(?i)\r\ncontent-length: 0(?=\r\n|$)", b"", head)
    if re.search(rb"(?im)^content-encoding: gzip", head) and body[:2] == b"\x1f\x8b":
        body = body[:4] + b"\x00\x00\x00\x00" + body[8:]
    return head + b"\r\n\r\n" + body


F32 = np.array([1.5, float("nan"), float("inf"), 0.1], np.float32)


def _inputs(m: Any, binary: bool = True) -> list[Any]:
    return [m.InferInput("IN", [4], "FP32").set_data_from_numpy(F32, binary_data=binary)]


def _all_kinds(m: Any) -> list[Any]:
    strings = np.array([b"a", "\u00e9".encode(), b"", b"xyz"], dtype=object).reshape(2, 2)
    return [
        m.InferInput("F", [2, 2], "FP32").set_data_from_numpy(np.eye(2, dtype=np.float32).T),
        m.InferInput("B", [2, 2], "BYTES").set_data_from_numpy(strings),
        m.InferInput("BJ", [2, 2], "BYTES").set_data_from_numpy(strings, binary_data=False),
        m.InferInput("S", [3], "BYTES").set_data_from_numpy(np.array([b"a", b"bc", b""], "S2")),
        m.InferInput("H", [3], "BF16").set_data_from_numpy(np.array([1, 2, 3], ml_dtypes.bfloat16)),
        m.InferInput("I", [0], "INT64").set_data_from_numpy(np.zeros(0, np.int64)),
        m.InferInput("IJ", [3], "INT8").set_data_from_numpy(
            np.array([1, -2, 3], np.int8), binary_data=False
        ),
        m.InferInput("BOOL", [2], "BOOL").set_data_from_numpy(
            np.array([True, False]), binary_data=False
        ),
        m.InferInput("H16", [2], "FP16").set_data_from_numpy(
            np.array([0.1, 2], np.float16), binary_data=False
        ),
        m.InferInput("SHM", [4], "FP32").set_shared_memory("region", 16, offset=32),
        m.InferInput("SHM0", [4], "FP32").set_shared_memory("region", 16),
    ]


def _outputs(m: Any) -> list[Any]:
    shm = m.InferRequestedOutput("OSHM")
    shm.set_shared_memory("out_region", 64, offset=8)
    return [
        m.InferRequestedOutput("OUT"),
        m.InferRequestedOutput("OJ", binary_data=False),
        m.InferRequestedOutput("C", class_count=3),
        shm,
    ]


class Plugin:
    def __call__(self, request: Any) -> None:
        request.headers["X-Plugin"] = "p"


SCENARIOS: dict[str, Callable[[Any, Any], Any]] = {
    "live": lambda m, c: c.is_server_live(),
    "ready": lambda m, c: c.is_server_ready(headers={"X-A": "1"}),
    "model_ready": lambda m, c: c.is_model_ready("my model/x", "2"),
    "server_metadata": lambda m, c: c.get_server_metadata(
        query_params={"a": [1, 2], "b c": "d&e/f", "t": True, "n": None}
    ),
    "empty_query": lambda m, c: c.get_server_metadata(query_params={}),
    "model_metadata": lambda m, c: c.get_model_metadata("m\u00e9", "3"),
    "model_config": lambda m, c: c.get_model_config("m", 3),
    "index": lambda m, c: c.get_model_repository_index(),
    "load": lambda m, c: c.load_model("m"),
    "load_config_files": lambda m, c: c.load_model(
        "m",
        headers={"X-Load": "1"},
        config='{"backend":"onnx"}',
        files={"file:1/model.onnx": b"\x00\x01\xff"},
    ),
    "unload": lambda m, c: c.unload_model("m", unload_dependents=True),
    "stats_all": lambda m, c: c.get_inference_statistics(),
    "stats_model": lambda m, c: c.get_inference_statistics("m"),
    "stats_version": lambda m, c: c.get_inference_statistics("m", "1"),
    "trace_update": lambda m, c: c.update_trace_settings(
        settings={"trace_level": ["TIMESTAMPS"], "trace_rate": None}
    ),
    "trace_update_model": lambda m, c: c.update_trace_settings("m", {"log_frequency": "2"}),
    "trace_get": lambda m, c: c.get_trace_settings(),
    "trace_get_model": lambda m, c: c.get_trace_settings("m"),
    "log_update": lambda m, c: c.update_log_settings({"log_info": False, "x": 1.5}),
    "log_get": lambda m, c: c.get_log_settings(),
    "sys_status": lambda m, c: c.get_system_shared_memory_status(),
    "sys_status_region": lambda m, c: c.get_system_shared_memory_status("r 1"),
    "sys_register": lambda m, c: c.register_system_shared_memory("r", "/key", 128, 16),
    "sys_unregister": lambda m, c: c.unregister_system_shared_memory("r"),
    "sys_unregister_all": lambda m, c: c.unregister_system_shared_memory(),
    "cuda_status": lambda m, c: c.get_cuda_shared_memory_status("r"),
    "cuda_register": lambda m, c: c.register_cuda_shared_memory("r", b"aGFuZGxl", 1, 256),
    "cuda_unregister": lambda m, c: c.unregister_cuda_shared_memory("r"),
    "cuda_unregister_all": lambda m, c: c.unregister_cuda_shared_memory(),
    "server_error": lambda m, c: c.get_model_metadata("fail"),
    "infer_binary": lambda m, c: c.infer("m", _inputs(m)),
    "infer_json": lambda m, c: c.infer("m", _inputs(m, binary=False)),
    "infer_all_kinds": lambda m, c: c.infer("m", _all_kinds(m), outputs=_outputs(m)),
    "infer_options": lambda m, c: c.infer(
        "m",
        _inputs(m),
        model_version="2",
        request_id="r\u00e9q",
        sequence_id=42,
        sequence_start=True,
        sequence_end=False,
        priority=3,
        timeout=0,
        parameters={"custom": "\u00fc", "n": 1, "f": 1e100, "l": [1, 2]},
    ),
    "infer_seq_str": lambda m, c: c.infer("m", _inputs(m), sequence_id="corr", sequence_end=True),
    "infer_gzip": lambda m, c: c.infer("m", _all_kinds(m), request_compression_algorithm="gzip"),
    "infer_deflate": lambda m, c: c.infer("m", _inputs(m), request_compression_algorithm="deflate"),
    "infer_accept_gzip": lambda m, c: c.infer(
        "m", _inputs(m), response_compression_algorithm="gzip"
    ),
    "infer_accept_deflate": lambda m, c: c.infer(
        "m", _inputs(m, False), response_compression_algorithm="deflate"
    ),
    "infer_bad_algorithm": lambda m, c: c.infer(
        "m", _inputs(m), request_compression_algorithm="zstd", response_compression_algorithm="br"
    ),
    "infer_headers": lambda m, c: c.infer(
        "m",
        _inputs(m),
        headers={"content-encoding": "identity", "X-Int": 5, "X-List": ["a", "b"]},
        query_params={"q": "1"},
        request_compression_algorithm="deflate",
    ),
    "infer_user_agent": lambda m, c: c.infer("m", _inputs(m), headers={"User-Agent": "mine"}),
    "infer_error": lambda m, c: c.infer("fail", _inputs(m)),
    "async_infer": lambda m, c: c.async_infer("m", _inputs(m), request_id="a").get_result(),
}


def _client(module: Any, port: int, base: str = "", plugin: Any = None) -> Any:
    client = module.InferenceServerClient(f"127.0.0.1:{port}{base}")
    if plugin is not None:
        client.register_plugin(plugin)
    return client


def _record(
    capture: ScriptedServer, module: Any, scenario: Callable[[Any, Any], Any], **kw: Any
) -> tuple[list[bytes], Any]:
    from .conftest import run

    client = _client(module, capture.port, **kw)
    try:
        capture.take()
        outcome = run(scenario, module, client).describe()
    finally:
        client.close()
    return [normalize(r) for r in capture.take()], outcome


# The reference bytes are those of tritonclient 2.73.0 on geventhttpclient 2.6 (the
# version it installs on Python >= 3.11). Older geventhttpclient releases (what pip picks
# on Python 3.10) omit "Content-Length: 0" on empty POSTs and write list header values
# as one line; tritonhttp keeps 2.6's behaviour everywhere.
_GEVENT_26 = tuple(int(x) for x in geventhttpclient.__version__.split(".")[:2]) >= (2, 6)
_NEEDS_GEVENT_26 = {
    "index",
    "infer_headers",
    "sys_unregister",
    "sys_unregister_all",
    "cuda_unregister",
    "cuda_unregister_all",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_request_bytes_match_tritonclient(capture: ScriptedServer, name: str) -> None:
    if name in _NEEDS_GEVENT_26 and not _GEVENT_26:
        pytest.skip(f"reference bytes need geventhttpclient 2.6 ({geventhttpclient.__version__})")
    scenario = SCENARIOS[name]
    ours, our_outcome = _record(capture, tritonhttp, scenario)
    ref, ref_outcome = _record(capture, ref_http, scenario)
    assert ours, "no request recorded"
    assert ours == ref
    assert our_outcome == ref_outcome


@pytest.mark.parametrize("name", ["live", "infer_all_kinds", "load_config_files", "trace_get"])
def test_base_path_and_plugins_match(capture: ScriptedServer, name: str) -> None:
    scenario = SCENARIOS[name]
    for ours_plugin, ref_plugin in (
        (BasicAuth("user", "p\u0040ss:word"), RefBasicAuth("user", "p\u0040ss:word")),
        (Plugin(), Plugin()),
    ):
        ours, _ = _record(capture, tritonhttp, scenario, base="/base/x/", plugin=ours_plugin)
        ref, _ = _record(capture, ref_http, scenario, base="/base/x/", plugin=ref_plugin)
        assert ours == ref
        assert ours[0].split(b" ")[1].startswith(b"/base/x/v2")


def test_headers_dict_is_never_modified(capture: ScriptedServer) -> None:
    headers = {"X-A": "1"}
    with _client(tritonhttp, capture.port, plugin=BasicAuth("u", "p")) as c:
        c.infer("m", _inputs(tritonhttp), headers=headers, request_compression_algorithm="gzip")
        c.async_infer("m", _inputs(tritonhttp), headers=headers).get_result()
        c.get_server_metadata(headers=headers)
    assert headers == {"X-A": "1"}
    requests = capture.take()
    assert b"Content-Encoding" not in requests[-1]  # no stale library headers
    assert all(b"authorization: Basic dTpw" in r for r in requests)
