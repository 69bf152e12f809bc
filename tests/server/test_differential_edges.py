"""Edges found using the server as a user would, each answered as real Triton answers it
(``tests/repos/edges`` served by both, models failing to load left out of readiness):
a raw binary request to a model whose one input is BYTES, ``last_inference`` after
executions that failed, a config.pbtxt that does not parse and a failed warm-up in the
repository index, and a metrics port already in use."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tritonhttp.testing import _process
from tritonhttp.testing import _real_triton as rt

from ._wire import exchange, infer_body
from .test_differential_lifecycle import _same
from .test_differential_state import _mask

pytestmark = pytest.mark.real_triton

ARGS = ("--exit-on-error=false", "--strict-readiness=false")
RAW = {"Inference-Header-Content-Length": "0"}


#: real Triton 2.51 sometimes crashes (SIGSEGV) right after ``warm_fail``'s warm-up
#: fails, before it serves; it is started again up to this many times
REAL_STARTS = 4


def _pair(real_factory: Any, ours_factory: Any, repo: Path) -> tuple[Any, Any]:
    for attempt in range(1, REAL_STARTS + 1):
        try:
            real = real_factory(repo, *ARGS)
            break
        except RuntimeError as e:
            if "exited with -11" not in str(e) or attempt == REAL_STARTS:
                raise
    return real, ours_factory(repo, *ARGS)


@pytest.mark.parametrize(
    "body",
    [b"hello world", b"\x05\x00\x00\x00hello", b"", bytes(range(256)) * 3],
    ids=["text", "framed", "empty", "binary"],
)
def test_raw_body_to_one_bytes_input(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any, body: bytes
) -> None:
    """The whole body is one element (the model answers ``<count>:<lengths>``)."""
    real, ours = _pair(real_triton_factory, bundled_server_factory, model_repo("edges"))
    r = exchange(real.url, "POST", "/v2/models/bytes_one/infer", body, RAW)
    o = exchange(ours.url, "POST", "/v2/models/bytes_one/infer", body, RAW)
    assert _same(o, r) is None, _same(o, r)
    assert o.status == 200
    assert o.body.endswith(f"1:{len(body)}".encode())


def test_last_inference_after_failed_executions(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    real, ours = _pair(real_triton_factory, bundled_server_factory, model_repo("edges"))
    stats = []
    for server in (real, ours):
        for _ in range(2):
            reply = exchange(
                server.url,
                "POST",
                "/v2/models/always_fail/infer",
                infer_body(("IN", "INT32", [1, 1], [1])),
            )
            assert reply.status == 500
        doc = json.loads(exchange(server.url, "GET", "/v2/models/always_fail/stats").body)
        stats.append(doc)
    assert _mask(stats[1]) == _mask(stats[0])
    model = stats[1]["model_stats"][0]
    assert model["last_inference"] > 0
    assert model["execution_count"] >= 2
    assert model["inference_count"] == 0


def test_index_with_unparsable_config_and_failed_warm_up(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """``bad_pbtxt`` shows by name only; ``warm_fail`` with Triton's reason, separators
    included."""
    real, ours = _pair(real_triton_factory, bundled_server_factory, model_repo("edges"))
    for path, body in (
        ("/v2/repository/index", ""),
        ("/v2/repository/index", '{"ready":true}'),
        ("/v2/models/bad_pbtxt", ""),
        ("/v2/models/bad_pbtxt/ready", ""),
        ("/v2/models/warm_fail/ready", ""),
    ):
        method = "POST" if "repository" in path else "GET"
        r = exchange(real.url, method, path, body)
        o = exchange(ours.url, method, path, body)
        assert _same(o, r) is None, f"{path}: {_same(o, r)}"
    index = json.loads(exchange(ours.url, "POST", "/v2/repository/index").body)
    assert {"name": "bad_pbtxt"} in index
    (warm,) = [m for m in index if m["name"] == "warm_fail"]
    assert warm["reason"].endswith("warm-up refused; ")


def _start_with_metrics_port_taken(real: bool, repo: Path) -> tuple[int, str, str]:
    """Start a server whose metrics port is held by another socket; its exit status, its
    output and the address it was given."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    http, grpc = _process.free_ports(2)
    try:
        if real:
            install = rt.ensure_installed()
            args = [
                str(install.binary),
                f"--model-repository={repo}",
                f"--backend-directory={install.backends}",
                "--http-address=127.0.0.1",
                f"--http-port={http}",
                "--grpc-address=127.0.0.1",
                f"--grpc-port={grpc}",
                "--metrics-address=127.0.0.1",
                f"--metrics-port={taken}",
            ]
            done = subprocess.run(args, env=install.environ(), capture_output=True, timeout=120)
        else:
            args = [sys.executable, "-m", "tritonhttp.server", f"--model-repository={repo}"]
            args += [f"--http-port={http}", f"--metrics-port={taken}"]
            done = subprocess.run(args, capture_output=True, timeout=120)
    finally:
        holder.close()
    return done.returncode, (done.stdout + done.stderr).decode(errors="replace"), str(taken)


@pytest.mark.usefixtures("real_triton_factory")  # (provisions real Triton, or skips)
def test_metrics_port_in_use(tmp_path: Path) -> None:
    """Both exit with status 1, naming the metrics service (not HTTP) in Triton's words."""
    outcomes = [_start_with_metrics_port_taken(real, tmp_path) for real in (True, False)]
    for rc, output, port in outcomes:
        expected = (
            f"failed to start Metrics service: Unavailable - Socket '127.0.0.1:{port}' "
            "already in use"
        )
        assert rc == 1
        assert expected in output, output[-2000:]
        assert "failed to start HTTP service" not in output


def _bytes_kinds_body(binary: bool) -> bytes:
    return json.dumps({
        "inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [1]}],
        "outputs": [{"name": "OUT", "parameters": {"binary_data": binary}}],
    }).encode()  # fmt: skip


def test_bytes_output_of_every_element_kind(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """An object array of bytes, ``np.bytes_``, str, numbers, ``bytearray`` and None as a
    BYTES output, in JSON and binary, from a worker process and in-process: only exact
    ``bytes`` go as they are, every other element as its ``str()`` in UTF-8."""
    repo = model_repo("edges")
    real, ours = _pair(real_triton_factory, bundled_server_factory, repo)
    inline = bundled_server_factory(repo, *ARGS, "--python-isolation=in-process")
    for binary in (False, True):
        body = _bytes_kinds_body(binary)
        r = exchange(real.url, "POST", "/v2/models/bytes_kinds/infer", body)
        assert r.status == 200, r.body
        for server in (ours, inline):
            o = exchange(server.url, "POST", "/v2/models/bytes_kinds/infer", body)
            assert _same(o, r) is None, _same(o, r)
    answer = exchange(ours.url, "POST", "/v2/models/bytes_kinds/infer", _bytes_kinds_body(False))
    data = json.loads(answer.body)["outputs"][0]["data"]
    assert data == ["raw", "b'npb'", "text", "nps", "7", "2.5", "bytearray(b'ba')", "None"]
