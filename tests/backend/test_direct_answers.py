"""A worker process writes a successful answer to the client's connection itself.

The answer must be the same bytes the server would have sent (checked against the same
model run in-process, where the server writes every answer), the worker must hold a
connection only while it is open, the server must still be able to close it, and a
client that reads slowly must still get the whole answer.
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritonhttp.server import _launch
from tritonhttp.server.backends.python import _direct, _worker
from tritonhttp.server.backends.python._messages import AnsweredDesc
from tritonhttp.server.front import _answer, _reply

from .conftest import Start, until

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            tensors = []
            for name in ("F", "I", "U", "B", "S", "H"):
                t = pb_utils.get_input_tensor_by_name(r, "IN_" + name)
                if t is not None:
                    tensors.append(pb_utils.Tensor("OUT_" + name, t.as_numpy()))
            params = json.loads(r.parameters() or "{}")
            if params.get("sleep_ms"):
                time.sleep(params["sleep_ms"] / 1000)
            answer = {"echo": params["echo"]} if "echo" in params else None
            out.append(pb_utils.InferenceResponse(tensors, parameters=answer))
        return out
"""

TYPES = {"F": "FP32", "I": "INT64", "U": "UINT64", "B": "BOOL", "S": "BYTES", "H": "FP16"}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("direct")
    model = root / "echo"
    (model / "1").mkdir(parents=True)
    code = "import json\nimport time\n" + textwrap.dedent(MODEL)
    (model / "1" / "model.py").write_text(code)
    inputs = ",\n".join(
        f'  {{ name: "IN_{k}" data_type: TYPE_{"STRING" if v == "BYTES" else v} '
        "dims: [ -1 ] optional: true }"
        for k, v in TYPES.items()
    )
    outputs = ",\n".join(
        f'  {{ name: "OUT_{k}" data_type: TYPE_{"STRING" if v == "BYTES" else v} dims: [ -1 ] }}'
        for k, v in TYPES.items()
    )
    (model / "config.pbtxt").write_text(
        f'backend: "python"\ninput [\n{inputs}\n]\noutput [\n{outputs}\n]\n'
        "instance_group [ { kind: KIND_CPU count: 2 } ]\n"
    )
    return root


@pytest.fixture(scope="module")
def both(servers: Start, repo: Path) -> dict[str, _launch.BundledServer]:
    return {mode: servers(repo, f"--python-isolation={mode}") for mode in ("process", "in-process")}


def _request(body: bytes | str, path: str = "/v2/models/echo/infer", extra: str = "") -> bytes:
    data = body.encode() if isinstance(body, str) else body
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n{extra}\r\n"
    ).encode() + data


def _read_answer(sock: socket.socket) -> bytes:
    """One whole HTTP answer (by its Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )  # fmt: skip
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return head + b"\r\n\r\n" + body


def _connect(server: _launch.BundledServer) -> socket.socket:
    host, port = server.url.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def _exchange(server: _launch.BundledServer, request: bytes) -> bytes:
    with _connect(server) as sock:
        sock.sendall(request)
        return _read_answer(sock)


def _body(*inputs: tuple[str, list[Any]], **extra: Any) -> str:
    doc: dict[str, Any] = {
        "inputs": [
            {"name": f"IN_{k}", "datatype": TYPES[k], "shape": [len(v)], "data": v}
            for k, v in inputs
        ]
    }
    doc.update(extra)
    return json.dumps(doc)


F = ("F", [1.5, -2.25, 3.0e-7, 1e20])
I64 = ("I", [-(2**63), 0, 2**63 - 1])
U64 = ("U", [0, 2**64 - 1])
BOOLS = ("B", [True, False, True])
STRS = ("S", ["a", 'q"uote\\', "ünï\u0001", ""])

CASES = {
    "json, with an id": _body(F, I64, U64, BOOLS, STRS, id="r-1"),
    "binary for every output": _body(F, STRS, parameters={"binary_data_output": True}),
    "binary for one output": _body(
        F,
        STRS,
        BOOLS,
        outputs=[{"name": "OUT_S", "parameters": {"binary_data": True}}, {"name": "OUT_F"}],
    ),
    "requested outputs only, in the request's order": _body(
        F, I64, STRS, outputs=[{"name": "OUT_S"}, {"name": "OUT_F"}]
    ),
    "response parameters": _body(F, parameters={"echo": "x\u00e9"}),
    "an empty tensor": json.dumps(
        {"inputs": [{"name": "IN_F", "datatype": "FP32", "shape": [0], "data": []}]}
    ),
}


def _fp16_request(**extra: Any) -> bytes:
    """IN_H = [1, 2] as FP16 binary data (JSON cannot carry FP16)."""
    blob = np.array([1.0, 2.0], np.float16).tobytes()
    tensor = {"name": "IN_H", "datatype": "FP16", "shape": [2]}
    tensor["parameters"] = {"binary_data_size": len(blob)}
    header = json.dumps({"inputs": [tensor], **extra}).encode()
    return _request(header + blob, extra=f"Inference-Header-Content-Length: {len(header)}\r\n")


REQUESTS = {name: _request(body) for name, body in CASES.items()}
REQUESTS["FP16 out as JSON: the server's error"] = _fp16_request()
REQUESTS["FP16 out as binary"] = _fp16_request(parameters={"binary_data_output": True})


@pytest.mark.parametrize("case", list(REQUESTS))
def test_the_worker_answers_byte_for_byte_as_the_server_would(
    both: dict[str, _launch.BundledServer], case: str
) -> None:
    request = REQUESTS[case]
    answers = {mode: _exchange(server, request) for mode, server in both.items()}
    assert answers["process"] == answers["in-process"]
    status = 400 if "error" in case else 200
    assert answers["process"].startswith(f"HTTP/1.1 {status} ".encode())


def _sockets_of(pid: int) -> set[str]:
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            out.add(target)
    return out


def _workers(server: _launch.BundledServer) -> list[int]:
    """The server's descendants: its workers (and their zygote, which holds no client
    connection)."""
    out, todo = [], [server.process.pid]
    while todo:
        pid = todo.pop()
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(p) for p in f.read().split()]
        out += children
        todo += children
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_worker_holds_a_connection_only_while_it_is_open(
    both: dict[str, _launch.BundledServer],
) -> None:
    server = both["process"]
    workers = _workers(server)
    before = {pid: _sockets_of(pid) for pid in workers}
    sock = _connect(server)
    for _ in range(4):  # several requests on one connection: handed over once
        sock.sendall(_request(_body(F)))
        assert _read_answer(sock).startswith(b"HTTP/1.1 200 OK\r\n")
    gained = {pid: _sockets_of(pid) - before[pid] for pid in workers}
    assert 1 <= sum(map(len, gained.values())) <= 2  # (either instance may have answered)
    sock.close()
    assert until(lambda: all(not (_sockets_of(p) & gained[p]) for p in workers))


def test_the_server_closes_a_connection_a_busy_worker_still_holds(
    both: dict[str, _launch.BundledServer],
) -> None:
    """A connection the server closes ends at once (the client sees the end), though a
    worker that answered on it is busy and has not closed its descriptor yet."""
    server = both["process"]
    sock = _connect(server)
    sock.sendall(_request(_body(F)))  # answered by a worker, which now holds the connection
    assert _read_answer(sock).startswith(b"HTTP/1.1 200 OK\r\n")
    busy = [_connect(server) for _ in range(2)]  # both instances sleep for 3 s
    for other in busy:
        other.sendall(_request(_body(F, parameters={"sleep_ms": 3000})))
    time.sleep(0.3)
    start = time.monotonic()
    sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    sock.settimeout(10)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    ended = time.monotonic() - start
    for other in busy:
        assert _read_answer(other).startswith(b"HTTP/1.1 200 OK\r\n")
        other.close()
    busy_for = time.monotonic() - start  # the baseline: until the busy workers answered
    assert busy_for >= 2.5  # (they slept 3 s, 0.3 s of it before ``start``)
    assert ended < 0.5 * busy_for, (ended, busy_for)  # at once, not when a worker is free
    sock.close()


def test_a_slow_reader_gets_the_whole_answer(both: dict[str, _launch.BundledServer]) -> None:
    """The client does not read for a while: what the worker could not write is sent by
    the server, in order."""
    values = np.arange(15_000, dtype=np.float32).tolist()  # 60,000 bytes
    request = _request(_body(("F", values), parameters={"binary_data_output": True}))
    expected = _exchange(both["in-process"], request)
    for _ in range(3):
        host, port = both["process"].url.rsplit(":", 1)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(30)
        sock.connect((host, int(port)))
        sock.sendall(request)
        time.sleep(0.3)
        assert _read_answer(sock) == expected
        sock.sendall(request)  # and the connection goes on
        assert _read_answer(sock) == expected
        sock.close()


def test_many_connections_at_once(both: dict[str, _launch.BundledServer]) -> None:
    """More connections than a worker holds: those past the limit are answered by the
    server, all correctly."""
    server = both["process"]
    request = _request(_body(F, id="many"))
    expected = _exchange(both["in-process"], request)
    socks = [_connect(server) for _ in range(300)]
    try:
        for sock in socks:
            sock.sendall(request)
            assert _read_answer(sock) == expected
        for sock in socks[:20]:  # again, on connections held or not
            sock.sendall(request)
            assert _read_answer(sock) == expected
    finally:
        for sock in socks:
            sock.close()
    for pid in _workers(server):
        assert until(lambda p=pid: len(_sockets_of(p)) < 20)


def _stats(server: _launch.BundledServer) -> dict[str, Any]:
    body = _exchange(server, b"GET /v2/models/echo/stats HTTP/1.1\r\nHost: x\r\n\r\n").partition(
        b"\r\n\r\n"
    )[2]
    stats: dict[str, Any] = json.loads(body)["model_stats"][0]
    return stats


def test_requests_sent_ahead_to_busy_workers(both: dict[str, _launch.BundledServer]) -> None:
    """Many clients at once on a quick model: busy workers are sent a request ahead
    (the scheduler's ``takes_ahead``). Each client gets its own answer, and the
    statistics count each request once, its wait behind another as queue time."""
    server = both["process"]
    before = _stats(server)
    clients, rounds = 12, 40
    failures: list[str] = []

    def client(k: int) -> None:
        with _connect(server) as sock:
            for i in range(rounds):
                value = float(k * 1000 + i)
                sock.sendall(_request(_body(("F", [value]), id=f"c{k}-{i}")))
                answer = json.loads(_read_answer(sock).partition(b"\r\n\r\n")[2])
                if answer.get("id") != f"c{k}-{i}" or answer["outputs"][0]["data"] != [value]:
                    failures.append(f"c{k}-{i}: {answer}")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures[:3]
    n = clients * rounds
    # (a worker answers the client before the server records the request)
    assert until(lambda: _stats(server)["inference_count"] - before["inference_count"] == n)
    after = _stats(server)
    assert after["execution_count"] - before["execution_count"] == n
    stats = {
        key: {
            part: after["inference_stats"][key][part] - before["inference_stats"][key][part]
            for part in ("count", "ns")
        }
        for key in ("success", "queue", "compute_input", "compute_infer", "compute_output")
    }
    assert all(stats[key]["count"] == n for key in stats)
    parts = sum(stats[key]["ns"] for key in ("queue", "compute_input", "compute_infer"))
    assert parts <= stats["success"]["ns"]


# ----------------------------------------------------------------------------- the worker

HEADS = (b"J %d\r\n\r\n", b"B %d %d\r\n\r\n")


class _Response:
    """What ``answer_client`` reads of a pb_utils response."""

    def __init__(self, outputs: list[Any], parameters: dict[str, Any] | None = None) -> None:
        self._error = None
        self._outputs = outputs
        self._parameters = parameters


class _Tensor:
    def __init__(self, name: str, wire: str, array: Any) -> None:
        self._name, self._wire, self._array, self._items = name, wire, array, None


def _worker_with(conn: socket.socket) -> Any:
    a, b = socket.socketpair()
    c, d = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    worker = _worker.Worker(_worker.Channel(a, c), _reply)
    worker.connections[7] = (conn, _reply.open_writer(*HEADS))
    return worker, (a, b, c, d)


def test_what_the_client_socket_does_not_take_is_handed_back() -> None:
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ours.setblocking(False)
    worker, keep = _worker_with(ours)
    data = np.arange(16_000, dtype=np.float32)
    response = _Response([_Tensor("OUT", "FP32", data)])
    spec = (b'{"model_name":"m","model_version":"1"', {}, True)
    desc = worker.answer_client((7, spec), response, None)
    assert isinstance(desc, AnsweredDesc)
    rest = desc.rest
    assert 0 < len(rest) < data.nbytes  # some was written, the rest handed back
    outputs = [("OUT", "FP32", [16000], data)]
    header, _ = _answer.encode_outputs(spec[0], None, outputs, {}, True, {})
    whole = HEADS[1] % (len(header), len(header) + data.nbytes) + header + data.tobytes()
    got = b""
    theirs.settimeout(1)
    while len(got) < len(whole) - len(rest):
        got += theirs.recv(65536)
    assert got + rest == whole
    for s in (ours, theirs, *keep):
        s.close()


def test_the_worker_leaves_to_the_server_what_it_should_not_write() -> None:
    ours, theirs = socket.socketpair()
    worker, keep = _worker_with(ours)
    prefix = b'{"model_name":"m","model_version":"1"'
    big = np.zeros(_direct.DIRECT_MAX // 4 + 1, np.float32)
    cases = [
        ((7, (prefix, {}, False)), _Response([_Tensor("H", "FP16", np.ones(2, np.float16))])),
        ((7, (prefix, {}, True)), _Response([_Tensor("BIG", "FP32", big)])),
        ((8, (prefix, {}, False)), _Response([_Tensor("F", "FP32", np.ones(2, np.float32))])),
        ((7, (prefix, {}, False)), _Response([_Tensor("F", "FP32", np.ones(2, np.float64))])),
    ]  # (JSON can't carry FP16; too big; a connection it doesn't hold; a dtype mismatch)
    for direct, response in cases:
        assert worker.answer_client(direct, response, None) is None
    error = _Response([])
    error._error = object()  # type: ignore[assignment]
    assert worker.answer_client((7, (prefix, {}, False)), error, None) is None
    # and another thread's answers always go through the server
    result: list[Any] = []
    ok = _Response([_Tensor("F", "FP32", np.ones(2, np.float32))])
    direct = (7, (prefix, {}, False))
    thread = threading.Thread(target=lambda: result.append(worker.answer_client(direct, ok, None)))
    thread.start()
    thread.join()
    assert result == [None]
    assert worker.answer_client(direct, ok, None) == AnsweredDesc(b"")
    for s in (ours, theirs, *keep):
        s.close()
