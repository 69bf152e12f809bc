"""A worker process parses the requests the server hands it unparsed.

For a model whose instances all run in worker processes, with no sequence batching, no
response cache and not decoupled (``ModelVersion.parses_in_backend``), the server hands a
plain ``/infer`` body to the worker as it came. Under the dynamic batcher (when nothing
it decides by depends on a request's shapes) the batcher counts such a request by the
batch size read off its header, and the worker parses the batch it forms. The worker parses and
checks it with the server's own code and writes the answer to the client; anything it
would not answer the same way (a request the server would refuse, shared memory,
classification) it declines, and the server parses and answers that request as it
always did.

Checked here against the same models run in-process, where the server parses every
request: the answers are the same bytes and the statistics the same counts. The server
under test runs on a thread of this process so that its own parsing can be counted:
requests the worker takes must not be parsed by the server at all.
"""

from __future__ import annotations

import gzip
import http.client
import json
import struct
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritonhttp.server.front import _app
from tritonhttp.testing import _process
from tritonhttp.testing.pytest_plugin import _ThreadedServer

from ._http import exchange
from .conftest import Start

ECHO = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            tensors = [pb_utils.Tensor("OUT_" + t.name()[3:], t.as_numpy()) for t in r.inputs()]
            seen = {
                "id": r.request_id(),
                "parameters": json.loads(r.parameters()),
                "requested": sorted(r.requested_output_names()),
                "dtypes": {t.name(): str(t.as_numpy().dtype) for t in r.inputs()},
                "writeable": all(t.as_numpy().flags.writeable for t in r.inputs()),
            }
            tensors.append(pb_utils.Tensor("SEEN", np.array([json.dumps(seen, sort_keys=True)],
                                                            dtype=np.object_)))
            if seen["parameters"].get("fail"):
                out.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("asked to fail")))
                continue
            out.append(pb_utils.InferenceResponse(tensors))
        return out
"""

TYPES = {"F": "FP32", "I": "INT32", "S": "BYTES", "B": "BOOL", "H": "FP16"}


def _config(name: str, batch: int, extra: str = "") -> str:
    def entry(prefix: str, k: str, v: str) -> str:
        dtype = "STRING" if v == "BYTES" else v
        dims = "[ -1 ]"
        return f'  {{ name: "{prefix}_{k}" data_type: TYPE_{dtype} dims: {dims} optional: true }}'

    inputs = ",\n".join(entry("IN", k, v) for k, v in TYPES.items())
    outputs = ",\n".join(
        entry("OUT", k, v).replace(" optional: true", "") for k, v in TYPES.items()
    )
    outputs += ',\n  { name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] }'
    return (
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: {batch}\n'
        f"input [\n{inputs}\n]\noutput [\n{outputs}\n]\n{extra}"
    )


def _pair_config(name: str, batching: str) -> str:
    """A model of two FP32 values per request, batched up to 8 by ``dynamic_batching``."""
    return textwrap.dedent(f"""\
        name: "{name}"
        backend: "python"
        max_batch_size: 8
        dynamic_batching {{ {batching} }}
        input [ {{ name: "IN_F" data_type: TYPE_FP32 dims: [ 2 ] }} ]
        output [ {{ name: "OUT_F" data_type: TYPE_FP32 dims: [ 2 ] }},
                 {{ name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] }} ]
        """)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("unparsed")
    configs = {
        "echo": _config("echo", 0),
        "batched": _config("batched", 8),
        "dynamic": _config("dynamic", 8, "dynamic_batching { }\n"),
        "limited_dynamic": _pair_config(
            "limited_dynamic", "default_queue_policy { max_queue_size: 4 }"
        ),
        "plain_dynamic": _pair_config("plain_dynamic", "max_queue_delay_microseconds: 20000"),
        "single": textwrap.dedent("""\
            name: "single"
            backend: "python"
            input [ { name: "IN_F" data_type: TYPE_FP32 dims: [ 3 ] } ]
            output [ { name: "OUT_F" data_type: TYPE_FP32 dims: [ 3 ] },
                     { name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] } ]
            """),
    }
    for name, config in configs.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(textwrap.dedent(ECHO))
        (root / name / "config.pbtxt").write_text(config)
    return root


class _Counted:
    """The server's ``parse_infer_request``, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self._parse = _app.parse_infer_request

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return self._parse(*args)


@pytest.fixture(scope="module")
def counted(repo: Path) -> Iterator[tuple[str, _Counted]]:
    """Our server with worker processes, on a thread here, its parsing counted."""
    counter = _Counted()
    patch = pytest.MonkeyPatch()
    patch.setattr(_app, "parse_infer_request", counter)
    port = _process.free_port()
    server = _ThreadedServer(
        ["--model-repository", str(repo), "--http-port", str(port), "--allow-metrics=false",
         "--python-isolation=process", "--log-info=false"]
    )  # fmt: skip
    server.start()
    try:
        yield f"127.0.0.1:{port}", counter
    finally:
        server.stop()
        patch.undo()


@pytest.fixture(scope="module")
def in_process(servers: Start, repo: Path) -> str:
    return servers(repo, "--python-isolation=in-process").url


def _json_input(k: str, data: list[Any], shape: list[int] | None = None) -> dict[str, Any]:
    return {"name": f"IN_{k}", "datatype": TYPES[k], "shape": shape or [len(data)], "data": data}


def _binary(header: dict[str, Any], blobs: list[bytes]) -> tuple[bytes, dict[str, str]]:
    head = json.dumps(header).encode()
    return head + b"".join(blobs), {"Inference-Header-Content-Length": str(len(head))}


def _strings(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(s)) + s for s in items)


F16 = np.array([1.5, -2.0], np.float16).tobytes()
F32 = np.array([1.0, 2.0, 3.0], np.float32).tobytes()

#: (model, body, headers, batch size): requests the worker takes
PLAIN: dict[str, tuple[str, bytes | str, dict[str, str], int]] = {
    "json inputs, an id and parameters": (
        "echo",
        json.dumps(
            {
                "id": "r-1",
                "parameters": {"p": "x\u00e9", "n": 3, "flag": True},
                "inputs": [
                    _json_input("F", [1.5, -2.25]),
                    _json_input("I", [1, -7]),
                    _json_input("S", ["a", 'q"u\\', "\u00fc"]),
                    _json_input("B", [True]),
                ],
            }
        ),
        {},
        1,
    ),
    "a member nested 900 deep": (
        "echo",
        '{"extra": '
        + '{"a":' * 900
        + "1"
        + "}" * 900
        + ', "inputs": ['
        + json.dumps(_json_input("F", [1.0]))
        + "]}",
        {},
        1,
    ),
    "requested outputs, one binary": (
        "echo",
        json.dumps(
            {
                "inputs": [_json_input("F", [1.0]), _json_input("S", ["z"])],
                "outputs": [
                    {"name": "OUT_S", "parameters": {"binary_data": True}},
                    {"name": "SEEN"},
                ],
            }
        ),
        {},
        1,
    ),
    "binary inputs and binary outputs": (
        "echo",
        *_binary(
            {
                "inputs": [
                    {
                        "name": "IN_H",
                        "datatype": "FP16",
                        "shape": [2],
                        "parameters": {"binary_data_size": len(F16)},
                    },
                    {
                        "name": "IN_S",
                        "datatype": "BYTES",
                        "shape": [2],
                        "parameters": {"binary_data_size": len(_strings([b"\x00\xff", b""]))},
                    },
                ],
                "parameters": {"binary_data_output": True},
            },
            [F16, _strings([b"\x00\xff", b""])],
        ),
        1,
    ),
    "a batch of three": (
        "batched",
        json.dumps({"inputs": [_json_input("F", [1, 2, 3, 4, 5, 6], [3, 2])]}),
        {},
        3,
    ),
    "a dynamically batched model, the header's first shape not the batch size": (
        "plain_dynamic",
        json.dumps(
            {
                "outputs": [{"name": "OUT_F", "shape": [3]}, {"name": "SEEN"}],
                "inputs": [_json_input("F", [1.0, 2.0], [1, 2])],
            }
        ),
        {},
        1,
    ),
    "a raw binary body": ("single", F32, {"Inference-Header-Content-Length": "0"}, 1),
    "a body past the inline size, in the arena": (
        "echo",
        json.dumps({"inputs": [_json_input("I", list(range(2000)))]}),
        {},
        1,
    ),
    "a body past 64 KiB, used in place": (
        "echo",
        *_binary(
            {
                "inputs": [
                    {
                        "name": "IN_F",
                        "datatype": "FP32",
                        "shape": [20_000],
                        "parameters": {"binary_data_size": 80_000},
                    }
                ],
                "outputs": [{"name": "SEEN"}],
            },
            [np.arange(20_000, dtype=np.float32).tobytes()],
        ),
        1,
    ),
    "outputs too large for the worker to write: the server encodes them": (
        "echo",
        *_binary(
            {
                "inputs": [
                    {
                        "name": "IN_F",
                        "datatype": "FP32",
                        "shape": [40_000],
                        "parameters": {"binary_data_size": 160_000},
                    }
                ],
                "outputs": [{"name": "OUT_F", "parameters": {"binary_data": True}}],
            },
            [np.arange(40_000, dtype=np.float32).tobytes()],
        ),
        1,
    ),
    "the model's own error": (
        "echo",
        json.dumps({"inputs": [_json_input("F", [1.0])], "parameters": {"fail": True}}),
        {},
        1,
    ),
}

#: requests the server answers itself (the worker declines them, or never sees them)
REFUSED: dict[str, tuple[str, bytes | str, dict[str, str]]] = {
    "not JSON": ("echo", '{"inputs": [', {}),
    "nested past the parser's depth": ("echo", '{"inputs": ' + "[" * 5000 + "]" * 5000 + "}", {}),
    "an unknown input": (
        "echo",
        json.dumps({"inputs": [_json_input("F", [1]) | {"name": "X"}]}),
        {},
    ),
    "a wrong datatype": (
        "echo",
        json.dumps({"inputs": [_json_input("F", [1]) | {"datatype": "INT32"}]}),
        {},
    ),
    "a wrong shape": ("single", json.dumps({"inputs": [_json_input("F", [1, 2])]}), {}),
    "a batch too large": (
        "batched",
        json.dumps({"inputs": [_json_input("F", list(range(9)), [9, 1])]}),
        {},
    ),
    "an unknown output": (
        "echo",
        json.dumps({"inputs": [_json_input("F", [1])], "outputs": [{"name": "NO"}]}),
        {},
    ),
    "a binary size past the end": (
        "echo",
        *_binary(
            {
                "inputs": [
                    {
                        "name": "IN_F",
                        "datatype": "FP32",
                        "shape": [1],
                        "parameters": {"binary_data_size": 8},
                    }
                ]
            },
            [b"\0" * 4],
        ),
    ),
    "a BYTES element cut short (the backend's failure)": (
        "echo",
        *_binary(
            {
                "inputs": [
                    {
                        "name": "IN_S",
                        "datatype": "BYTES",
                        "shape": [1],
                        "parameters": {"binary_data_size": 6},
                    }
                ]
            },
            [struct.pack("<I", 5) + b"ab"],
        ),
    ),
    "a shared memory region that is not registered": (
        "echo",
        json.dumps(
            {
                "inputs": [
                    {
                        "name": "IN_F",
                        "datatype": "FP32",
                        "shape": [1],
                        "parameters": {
                            "shared_memory_region": "nowhere",
                            "shared_memory_byte_size": 4,
                        },
                    }
                ]
            }
        ),
        {},
    ),
}

#: requests answered right but parsed by the server (not plain, or not such a model)
USUAL: dict[str, tuple[str, bytes | str, dict[str, str]]] = {
    "classification": (
        "echo",
        json.dumps(
            {
                "inputs": [_json_input("F", [0.5, 2.0, 1.0])],
                "outputs": [{"name": "OUT_F", "parameters": {"classification": 2}}],
            }
        ),
        {},
    ),
    "a model with dynamic batching and optional inputs": (
        "dynamic",
        json.dumps({"inputs": [_json_input("F", [1.0, 2.0], [1, 2])]}),
        {},
    ),
}


def _post(url: str, model: str, body: bytes | str, headers: dict[str, str]) -> Any:
    return exchange(url, "POST", f"/v2/models/{model}/infer", body, headers)


def _stats(url: str, model: str) -> dict[str, int]:
    doc = exchange(url, "GET", f"/v2/models/{model}/stats").json()["model_stats"][0]
    counts = {k: doc[k] for k in ("inference_count", "execution_count")}
    for k in ("success", "fail", "queue", "compute_infer"):
        counts[k] = doc["inference_stats"][k]["count"]
    for b in doc["batch_stats"]:
        counts[f"batch {b['batch_size']}"] = b["compute_infer"]["count"]
    return counts


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _both(
    counted: tuple[str, _Counted],
    in_process: str,
    model: str,
    body: bytes | str,
    headers: dict[str, str],
) -> tuple[Any, Any, int, list[dict[str, int]]]:
    """The request sent to both servers: their answers, how many times our server parsed
    it itself, and what it changed in each server's statistics of the model."""
    url, counter = counted
    before_stats = _stats(url, model), _stats(in_process, model)
    before = counter.calls
    ours = _post(url, model, body, headers)
    theirs = _post(in_process, model, body, headers)
    parses = counter.calls - before
    theirs_delta = _delta(_stats(in_process, model), before_stats[1])
    ours_delta = _settled(url, model, before_stats[0], lambda d: d == theirs_delta)
    return ours, theirs, parses, [ours_delta, theirs_delta]


def _settled(
    url: str, model: str, before: dict[str, int], done: Callable[[dict[str, int]], bool]
) -> dict[str, int]:
    """What the model's statistics changed since ``before``, once ``done`` says so or 5 s
    have passed: a worker that wrote an answer itself tells the server a moment after
    the client has it, so the statistics may trail the answer."""
    deadline = time.monotonic() + 5
    delta = _delta(_stats(url, model), before)
    while not done(delta) and time.monotonic() < deadline:
        time.sleep(0.02)
        delta = _delta(_stats(url, model), before)
    return delta


def test_parses_in_backend_only_where_the_worker_can_answer_alone(
    counted: tuple[str, _Counted],
) -> None:
    url, counter = counted
    before = counter.calls
    _post(url, "dynamic", *USUAL["a model with dynamic batching and optional inputs"][1:])
    assert counter.calls == before + 1  # (the batcher would need the request's inputs)
    before = counter.calls
    plain = json.dumps({"inputs": [_json_input("F", [1.0, 2.0], [1, 2])]})
    _post(url, "limited_dynamic", plain, {})
    assert counter.calls == before + 1  # (a queue that may refuse: it answers by its id)
    before = counter.calls
    _post(url, "echo", json.dumps({"inputs": [_json_input("F", [1.0])]}), {})
    _post(url, "plain_dynamic", plain, {})
    assert counter.calls == before


@pytest.mark.parametrize(
    ("header", "size"),
    [
        (b'{"inputs":[{"name":"X","datatype":"FP32","shape":[3,2],"data":[1,2,3,4,5,6]}]}', 3),
        (b'{"inputs":[{"name":"X","shape" : [ 4 ],"data":[1,2,3,4]}]}', 4),
        (b'{"inputs":[{"name":"X","shape":[],"data":[]}]}', 0),  # (not a batch size)
        (b'{"inputs":[{"name":"X","shape":"3","data":[]}]}', 0),
        (b'{"inputs":[{"name":"X","shape":[-1,2]}]}', 0),
        (b'{"inputs":[{"name":"X","shape":[12345678901,2]}]}', 0),
        (b'{"inputs":[{"name":"X","data":[1]}]}', 0),
    ],
)
def test_the_batch_size_the_batcher_counts_an_unparsed_request_by(header: bytes, size: int) -> None:
    """Read off the header's first ``"shape"``; 0 (the server parses the request) when it
    is not a plain count."""
    assert _app._batch_size_of(bytearray(header + b"tail"), len(header)) == size
    assert _app._batch_size_of(memoryview(header), len(header)) == size


@pytest.mark.parametrize("case", list(PLAIN))
def test_the_worker_parses_a_plain_request_and_answers_it_as_the_server_would(
    counted: tuple[str, _Counted], in_process: str, case: str
) -> None:
    model, body, headers, batch = PLAIN[case]
    ours, theirs, parses, deltas = _both(counted, in_process, model, body, headers)
    # (outputs too large for the worker to write: the server parses the body to encode them)
    expected = 1 if case.startswith("outputs too large") else 0
    assert parses == expected, "the server parsed what the worker should have"
    assert (ours.status, ours.headers, ours.body) == (theirs.status, theirs.headers, theirs.body)
    if ours.status == 200 and ours.headers["content-type"] == "application/json":
        seen = next(o for o in ours.json()["outputs"] if o["name"] == "SEEN")
        assert json.loads(seen["data"][0])["writeable"], "the model's inputs must be writeable"
    assert deltas[0] == deltas[1]
    if ours.status == 200:
        assert deltas[0]["inference_count"] == batch
        assert deltas[0][f"batch {batch}"] == 1


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_request_the_server_would_refuse_is_answered_by_the_server(
    counted: tuple[str, _Counted], in_process: str, case: str
) -> None:
    model, body, headers = REFUSED[case]
    ours, theirs, parses, deltas = _both(counted, in_process, model, body, headers)
    assert parses == 1
    assert ours.status >= 400
    assert (ours.status, ours.headers, ours.body) == (theirs.status, theirs.headers, theirs.body)
    assert deltas[0] == deltas[1]  # (a declined request is not counted twice, or at all)


@pytest.mark.parametrize("case", list(USUAL))
def test_what_the_worker_cannot_answer_alone_goes_the_usual_way(
    counted: tuple[str, _Counted], in_process: str, case: str
) -> None:
    model, body, headers = USUAL[case]
    ours, theirs, parses, _ = _both(counted, in_process, model, body, headers)
    assert parses == 1
    assert ours.status == 200
    assert (ours.status, ours.headers, ours.body) == (theirs.status, theirs.headers, theirs.body)


def _at_once(client: Callable[[int], None], count: int = 8) -> None:
    """``client(n)`` for n in 0 .. count - 1, each on a thread of its own, all at once."""
    threads = [threading.Thread(target=client, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


def test_clients_at_once_mixing_plain_and_refused_requests(
    counted: tuple[str, _Counted], in_process: str
) -> None:
    """Keep-alive clients in parallel, each alternating requests the worker answers with
    ones it declines: every client gets its own answers, in order, and the statistics
    count exactly the requests that ran."""
    url = counted[0]
    refused = {name: REFUSED[name][1] for name in ("not JSON", "an unknown input")}
    expected_errors = {}
    for name, body in refused.items():
        reply = _post(in_process, "echo", body, {})
        expected_errors[name] = (reply.status, reply.body)
    before = _stats(url, "echo")
    failures: list[str] = []

    def client(n: int) -> None:
        host, port = url.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            for i in range(30):
                if i % 3 == 2:
                    name = list(refused)[i % 2]
                    conn.request("POST", "/v2/models/echo/infer", refused[name])
                    r = conn.getresponse()
                    if (r.status, r.read()) != expected_errors[name]:
                        failures.append(f"client {n} request {i}: not the expected error")
                    continue
                value = float(n * 1000 + i)
                body = json.dumps({"id": f"{n}-{i}", "inputs": [_json_input("F", [value])]})
                conn.request("POST", "/v2/models/echo/infer", body)
                r = conn.getresponse()
                doc = json.loads(r.read())
                out = next(o for o in doc["outputs"] if o["name"] == "OUT_F")
                if r.status != 200 or doc["id"] != f"{n}-{i}" or out["data"] != [value]:
                    failures.append(f"client {n} request {i}: {doc}")
        finally:
            conn.close()

    _at_once(client)
    assert not failures, failures[:5]
    delta = _settled(url, "echo", before, lambda d: d.get("success") == 8 * 20)
    assert delta["success"] == delta["inference_count"] == delta["execution_count"] == 8 * 20
    assert "fail" not in delta


def _batched_client(url: str, n: int, failures: list[str], expected: dict[str, Any]) -> None:
    """One keep-alive client of ``plain_dynamic``: plain requests (the worker parses them,
    in batches), ones the worker declines (a batch too large), ones whose header's first
    ``"shape"`` is not their batch size (declined in a batch) and gzip-compressed ones
    (the server parses those: batches then mix both kinds)."""
    host, port = url.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        for i in range(24):
            value = float(n * 1000 + i)
            doc = {"id": f"{n}-{i}", "inputs": [_json_input("F", [value, -value], [1, 2])]}
            headers: dict[str, str] = {}
            if i % 6 == 5:
                doc = json.loads(expected["refused body"])
            elif i % 6 == 1:
                doc = {"outputs": [{"name": "OUT_F", "shape": [2]}], **doc}
            body = json.dumps(doc).encode()
            if i % 4 == 3:
                body, headers = gzip.compress(body), {"Content-Encoding": "gzip"}
            conn.request("POST", "/v2/models/plain_dynamic/infer", body, headers)
            r = conn.getresponse()
            answer = (r.status, r.read())
            if i % 6 == 5:
                if answer != expected["refused"]:
                    failures.append(f"client {n} request {i}: {answer}")
                continue
            out = json.loads(answer[1])
            data = next(o for o in out["outputs"] if o["name"] == "OUT_F")["data"]
            if answer[0] != 200 or out["id"] != f"{n}-{i}" or data != [value, -value]:
                failures.append(f"client {n} request {i}: {answer}")
    finally:
        conn.close()


def test_the_worker_parses_the_batches_the_dynamic_batcher_forms(
    counted: tuple[str, _Counted], in_process: str
) -> None:
    """Clients at once on a dynamically batched model: batches form of requests the
    server did not parse, each client gets its own answers, a request the worker
    declines (a batch size the model refuses) gets the server's own error, and the
    statistics count exactly the requests that ran, in batches."""
    url, counter = counted
    refused_body = json.dumps({"inputs": [_json_input("F", list(range(18)), [9, 2])]})
    reply = _post(in_process, "plain_dynamic", refused_body, {})
    assert reply.status == 400
    expected = {"refused body": refused_body, "refused": (reply.status, reply.body)}
    before, parsed_before = _stats(url, "plain_dynamic"), counter.calls
    failures: list[str] = []
    _at_once(lambda n: _batched_client(url, n, failures, expected))
    assert not failures, failures[:5]
    ran = 8 * 20  # (4 of each client's 24 are refused)
    delta = _settled(url, "plain_dynamic", before, lambda d: d.get("success") == ran)
    assert delta["success"] == delta["inference_count"] == ran
    assert "fail" not in delta
    assert delta["execution_count"] < ran / 2, "the requests should have run in batches"
    assert sum(int(k[6:]) * v for k, v in delta.items() if k.startswith("batch ")) == ran
    # the server parsed only the compressed requests and those the worker declined
    compressed, refused, misleading = 8 * 6, 8 * 4, 8 * 4
    assert counter.calls - parsed_before <= compressed + refused + misleading
