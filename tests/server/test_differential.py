"""The same requests to real Triton 2.51.0 and to our server: same status, type and bytes.

Every case runs against both servers serving ``tests/models``; bodies must match byte
for byte (statistics, whose timings differ, are compared by structure elsewhere).
"""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

import numpy as np
import pytest

from ._wire import binary_request, bytes_blob, compare, exchange

pytestmark = pytest.mark.real_triton

ADD = {"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
]}  # fmt: skip


IHCL = "Inference-Header-Content-Length"


def j(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


def add_with(**changes: Any) -> str:
    doc = json.loads(json.dumps(ADD))
    doc.update(changes)
    return j(doc)


def tensor(name: str, datatype: str, shape: list[int], data: Any) -> dict[str, Any]:
    """One JSON input tensor."""
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def inputs(*tensors: dict[str, Any], **fields: Any) -> str:
    """A JSON infer body: ``tensors`` as its inputs, then the other top-level ``fields``."""
    return j({"inputs": list(tensors), **fields})


def input0(**changes: Any) -> str:
    """ADD with these fields of INPUT0 changed (or added)."""
    return inputs({**ADD["inputs"][0], **changes}, ADD["inputs"][1])


def raw_tokens(name: str, datatype: str, tokens: str) -> str:
    """An identity_all request whose data are JSON tokens as written (``NaN,-Inf``...)."""
    shape = tokens.count(",") + 1
    head = f'{{"inputs":[{{"name":"IN_{name}","datatype":"{datatype}","shape":[{shape}],'
    return head + f'"data":[{tokens}]}}]}}'


#: 900 levels of arrays, and of objects (JSON text): deep, within what both servers parse
DEEP = "[" * 900 + "1" + "]" * 900
DEEP_OBJECT = '{"a":' * 900 + "1" + "}" * 900


def deep(body: str, text: str) -> str:
    """``body`` with its string ``"<deep>"`` replaced by the JSON ``text``."""
    return body.replace('"<deep>"', text)


def _fp32(values: list[float]) -> bytes:
    return np.array(values, dtype="<f4").tobytes()


_bin_add, _bin_add_h = binary_request(
    [
        ("INPUT0", "FP32", [4], _fp32([1, 2, 3, 4])),
        ("INPUT1", "FP32", [4], _fp32([0.5, 0.25, 3, -1])),
    ],
    outputs=[{"name": "OUTPUT1", "parameters": {"binary_data": True}}, {"name": "OUTPUT0"}],
)
_bin_all_types, _bin_all_types_h = binary_request(
    [
        ("IN_BOOL", "BOOL", [3], bytes([1, 0, 1])),
        ("IN_UINT64", "UINT64", [2], np.array([0, 2**64 - 1], "<u8").tobytes()),
        ("IN_INT64", "INT64", [2], np.array([-(2**63), 2**63 - 1], "<i8").tobytes()),
        ("IN_FP32", "FP32", [4], _fp32([0.1, 1e30, -2.5, 3.0])),
        ("IN_FP16", "FP16", [2], np.array([1.5, -2], "<f2").tobytes()),
        ("IN_BF16", "BF16", [2], np.array([0x3FC0, 0xC000], "<u2").tobytes()),
        ("IN_STRING", "BYTES", [3], bytes_blob([b"abc", b"", "héllo \"q\" \\ \n\x01".encode()])),
    ],
    outputs=[{"name": n, "parameters": {"binary_data": n in ("OUT_FP16", "OUT_BF16")}} for n in (
        "OUT_BOOL", "OUT_UINT64", "OUT_INT64", "OUT_FP32", "OUT_FP16", "OUT_BF16", "OUT_STRING")],
)  # fmt: skip

#: (id, method, path, body, headers)
Case = tuple[str, str, str, str | bytes, dict[str, str]]


def post(case_id: str, path: str, body: str | bytes, headers: dict[str, str] | None = None) -> Case:
    return (case_id, "POST", path, body, headers if headers is not None else {})


def infer(
    case_id: str, model: str, body: str | bytes, headers: dict[str, str] | None = None
) -> Case:
    """A POST to ``model``'s infer endpoint."""
    return post(case_id, f"/v2/models/{model}/infer", body, headers)


CASES: list[Case] = [
    # health, metadata, routing
    ("live", "GET", "/v2/health/live", "", {}),
    ("ready", "GET", "/v2/health/ready", "", {}),
    ("live-post", "POST", "/v2/health/live", "", {}),
    ("model-ready", "GET", "/v2/models/add_sub/ready", "", {}),
    ("model-ready-v1", "GET", "/v2/models/add_sub/versions/1/ready", "", {}),
    ("model-ready-v9", "GET", "/v2/models/add_sub/versions/9/ready", "", {}),
    ("model-ready-unknown", "GET", "/v2/models/nope/ready", "", {}),
    ("server-meta", "GET", "/v2", "", {}),
    ("server-meta-post", "POST", "/v2", "", {}),
    ("trailing-slash", "GET", "/v2/", "", {}),
    ("health-bare", "GET", "/v2/health", "", {}),
    ("models-bare", "GET", "/v2/models", "", {}),
    ("models-slash", "GET", "/v2/models/", "", {}),
    ("model-slash", "GET", "/v2/models/add_sub/", "", {}),
    ("bad-version", "GET", "/v2/models/add_sub/versions/abc", "", {}),
    ("neg-version", "GET", "/v2/models/add_sub/versions/-1", "", {}),
    ("query", "GET", "/v2/models/add_sub?foo=bar", "", {}),
    ("percent", "GET", "/v2/models/add%5Fsub", "", {}),
    ("unknown-path", "GET", "/v3/whatever", "", {}),
    ("model-meta", "GET", "/v2/models/add_sub", "", {}),
    ("model-meta-v1", "GET", "/v2/models/add_sub/versions/1", "", {}),
    ("model-meta-v01", "GET", "/v2/models/add_sub/versions/01", "", {}),
    ("model-meta-v2", "GET", "/v2/models/add_sub/versions/2", "", {}),
    ("model-meta-huge-version", "GET", "/v2/models/add_sub/versions/99999999999999999999", "", {}),
    ("model-meta-unknown", "GET", "/v2/models/nope", "", {}),
    ("model-meta-all", "GET", "/v2/models/identity_all", "", {}),
    ("model-meta-simple", "GET", "/v2/models/simple", "", {}),
    ("model-meta-delete", "DELETE", "/v2/models/add_sub", "", {}),
    ("config", "GET", "/v2/models/add_sub/config", "", {}),
    ("config-v1", "GET", "/v2/models/add_sub/versions/1/config", "", {}),
    ("config-all", "GET", "/v2/models/identity_all/config", "", {}),
    ("config-simple", "GET", "/v2/models/simple/config", "", {}),
    ("config-slow", "GET", "/v2/models/slow_model/config", "", {}),
    ("config-error", "GET", "/v2/models/error_model/config", "", {}),
    ("config-bytes", "GET", "/v2/models/identity_bytes/config", "", {}),
    ("config-unknown", "GET", "/v2/models/nope/config", "", {}),
    ("config-post", "POST", "/v2/models/add_sub/config", "", {}),
    ("stats-post", "POST", "/v2/models/stats", "", {}),
    ("stats-unknown", "GET", "/v2/models/nope/stats", "", {}),
    ("stats-bad-version", "GET", "/v2/models/add_sub/versions/7/stats", "", {}),
    ("index", "POST", "/v2/repository/index", "", {}),
    ("index-ready", "POST", "/v2/repository/index", '{"ready":true}', {}),
    ("index-bad-ready", "POST", "/v2/repository/index", '{"ready":1}', {}),
    ("index-bad-json", "POST", "/v2/repository/index", "{", {}),
    ("index-get", "GET", "/v2/repository/index", "", {}),
    ("load-none-mode", "POST", "/v2/repository/models/add_sub/load", "", {}),
    ("unload-none-mode", "POST", "/v2/repository/models/add_sub/unload", "", {}),
    ("load-named-repo", "POST", "/v2/repository/foo/models/add_sub/load", "", {}),
    # inference: JSON
    ("infer-json", "POST", "/v2/models/add_sub/infer", j(ADD), {}),
    ("infer-json-v1", "POST", "/v2/models/add_sub/versions/1/infer", j(ADD), {}),
    ("infer-id", "POST", "/v2/models/add_sub/infer", add_with(id="my-id-1"), {}),
    ("infer-empty-id", "POST", "/v2/models/add_sub/infer", add_with(id=""), {}),
    ("infer-bad-id", "POST", "/v2/models/add_sub/infer", add_with(id=5), {}),
    ("infer-get", "GET", "/v2/models/add_sub/infer", "", {}),
    ("infer-unknown", "POST", "/v2/models/nope/infer", j(ADD), {}),
    ("infer-bad-ver", "POST", "/v2/models/add_sub/versions/3/infer", j(ADD), {}),
    post("infer-huge-ver", "/v2/models/add_sub/versions/99999999999999999999/infer", j(ADD)),
    infer(
        "infer-outputs-order",
        "add_sub",
        add_with(outputs=[{"name": "OUTPUT1"}, {"name": "OUTPUT0"}]),
    ),
    infer("infer-outputs-one", "add_sub", add_with(outputs=[{"name": "OUTPUT1"}])),
    ("infer-outputs-empty", "POST", "/v2/models/add_sub/infer", add_with(outputs=[]), {}),
    infer(
        "infer-outputs-dup", "add_sub", add_with(outputs=[{"name": "OUTPUT1"}, {"name": "OUTPUT1"}])
    ),
    infer("infer-outputs-unknown", "add_sub", add_with(outputs=[{"name": "NOPE"}])),
    ("infer-outputs-noname", "POST", "/v2/models/add_sub/infer", add_with(outputs=[{}]), {}),
    ("infer-outputs-notarray", "POST", "/v2/models/add_sub/infer", add_with(outputs={}), {}),
    infer(
        "infer-out-bin-bad",
        "add_sub",
        add_with(outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": 1}}]),
    ),
    infer("infer-binary-output", "add_sub", add_with(parameters={"binary_data_output": True})),
    infer(
        "infer-binary-output-mixed",
        "add_sub",
        add_with(
            parameters={"binary_data_output": True},
            outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": False}}],
        ),
    ),
    infer("infer-bdo-bad", "add_sub", add_with(parameters={"binary_data_output": "yes"})),
    infer(
        "infer-params", "add_sub", add_with(parameters={"s": "str", "i": -5, "b": True, "d": 1.5})
    ),
    infer("infer-params-reserved", "add_sub", add_with(parameters={"triton_x": 1})),
    ("infer-params-null", "POST", "/v2/models/add_sub/infer", add_with(parameters={"x": None}), {}),
    ("infer-params-list", "POST", "/v2/models/add_sub/infer", add_with(parameters={"x": [1]}), {}),
    ("infer-params-notobj", "POST", "/v2/models/add_sub/infer", add_with(parameters=[1]), {}),
    infer(
        "infer-params-seq",
        "add_sub",
        add_with(
            parameters={
                "sequence_id": 5,
                "sequence_start": True,
                "sequence_end": True,
                "priority": 0,
                "timeout": 100,
            }
        ),
    ),
    infer("infer-params-seq-neg", "add_sub", add_with(parameters={"sequence_id": -5})),
    infer("infer-params-seq-start-bad", "add_sub", add_with(parameters={"sequence_start": 1})),
    infer("infer-params-priority-bad", "add_sub", add_with(parameters={"priority": -1})),
    infer("infer-params-timeout-bad", "add_sub", add_with(parameters={"timeout": "x"})),
    infer("infer-missing-input", "add_sub", j({"inputs": ADD["inputs"][:1]})),
    infer(
        "infer-extra-input",
        "add_sub",
        j(
            {
                "inputs": [
                    *ADD["inputs"],
                    {"name": "BOGUS", "datatype": "FP32", "shape": [1], "data": [1]},
                ]
            }
        ),
    ),
    infer(
        "infer-unknown-input",
        "add_sub",
        j(
            {
                "inputs": [
                    ADD["inputs"][0],
                    {"name": "BOGUS", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
                ]
            }
        ),
    ),
    infer("infer-dup-input", "add_sub", j({"inputs": [ADD["inputs"][0], ADD["inputs"][0]]})),
    infer("infer-wrong-dtype", "add_sub", input0(datatype="INT32")),
    infer("infer-wrong-shape", "add_sub", input0(shape=[2, 2])),
    infer("infer-lowercase-dtype", "add_sub", input0(datatype="fp32")),
    infer("infer-data-short", "add_sub", input0(data=[1, 2, 3])),
    infer("infer-data-long", "add_sub", input0(data=[1, 2, 3, 4, 5])),
    infer("infer-data-nested", "add_sub", input0(data=[[1, 2], [3, 4]])),
    infer("infer-data-str", "add_sub", input0(data=[1, "2", 3, 4])),
    infer("infer-data-bool", "add_sub", input0(data=[1, True, 3, 4])),
    infer("infer-data-notarray", "add_sub", input0(data=5)),
    infer(
        "infer-no-source",
        "add_sub",
        j({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}, ADD["inputs"][1]]}),
    ),
    infer("infer-two-sources", "add_sub", input0(parameters={"binary_data_size": 16})),
    infer(
        "infer-no-name",
        "add_sub",
        j({"inputs": [{"datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}),
    ),
    infer(
        "infer-no-datatype",
        "add_sub",
        j({"inputs": [{"name": "INPUT0", "shape": [4], "data": [1, 2, 3, 4]}]}),
    ),
    infer(
        "infer-no-shape",
        "add_sub",
        j({"inputs": [{"name": "INPUT0", "datatype": "FP32", "data": [1, 2, 3, 4]}]}),
    ),
    infer("infer-neg-shape", "add_sub", inputs(tensor("INPUT0", "FP32", [-4], [1, 2, 3, 4]))),
    ("infer-no-inputs", "POST", "/v2/models/add_sub/infer", "{}", {}),
    ("infer-inputs-obj", "POST", "/v2/models/add_sub/infer", '{"inputs":{}}', {}),
    ("infer-array-body", "POST", "/v2/models/add_sub/infer", "[1,2]", {}),
    ("infer-bad-json", "POST", "/v2/models/add_sub/infer", '{"inputs":[1,]}', {}),
    ("infer-bad-json2", "POST", "/v2/models/add_sub/infer", '{"inputs"', {}),
    ("infer-trailing-garbage", "POST", "/v2/models/add_sub/infer", j(ADD) + " x", {}),
    ("infer-empty-body", "POST", "/v2/models/add_sub/infer", "", {}),
    ("infer-whitespace", "POST", "/v2/models/add_sub/infer", "   " + j(ADD) + "\n", {}),
    infer("infer-fp16-json", "identity_all", inputs(tensor("IN_FP16", "FP16", [1], [1]))),
    infer("infer-bf16-json", "identity_all", inputs(tensor("IN_BF16", "BF16", [1], [1]))),
    infer(
        "infer-fp16-out-json",
        "identity_all",
        j(
            {
                "inputs": [
                    {
                        "name": "IN_FP16",
                        "datatype": "FP16",
                        "shape": [1],
                        "parameters": {"binary_data_size": 0},
                    }
                ]
            }
        ),
    ),
    infer(
        "infer-all-json",
        "identity_all",
        inputs(
            tensor("IN_BOOL", "BOOL", [3], [True, False, True]),
            tensor("IN_UINT8", "UINT8", [2], [300, 255]),
            tensor("IN_INT8", "INT8", [2], [-129, 127]),
            tensor("IN_UINT64", "UINT64", [2], [0, 18446744073709551615]),
            tensor("IN_INT64", "INT64", [2], [-9223372036854775808, 9223372036854775807]),
            tensor("IN_FP32", "FP32", [6], [0.1, 1e30, -2.5, 3, 0.3, 1e-7]),
            tensor("IN_FP64", "FP64", [6], [1e21, 1e20, 0.000001, 1.5e-7, -0.0, 5e-324]),
            tensor("IN_STRING", "BYTES", [3], ["abc", "", 'héllo "q" \\ \n\u0001/']),
        ),
    ),
    infer("infer-int-float", "identity_all", inputs(tensor("IN_INT32", "INT32", [1], [1.0]))),
    infer("infer-uint-neg", "identity_all", inputs(tensor("IN_UINT32", "UINT32", [1], [-1]))),
    infer("infer-bool-int", "identity_all", inputs(tensor("IN_BOOL", "BOOL", [1], [1]))),
    infer("infer-bytes-int", "identity_all", inputs(tensor("IN_STRING", "BYTES", [1], [1]))),
    infer("infer-bytes-count", "identity_all", inputs(tensor("IN_STRING", "BYTES", [2], ["a"]))),
    infer("infer-zero-elems", "identity_all", inputs(tensor("IN_FP32", "FP32", [0], []))),
    infer(
        "infer-zero-elems-bin",
        "identity_all",
        inputs(
            tensor("IN_FP32", "FP32", [0], []),
            outputs=[{"name": "OUT_FP32", "parameters": {"binary_data": True}}],
        ),
    ),
    ("infer-no-inputs-optional", "POST", "/v2/models/identity_all/infer", '{"inputs":[]}', {}),
    infer("infer-scalar-shape", "identity_all", inputs(tensor("IN_FP32", "FP32", [], [1]))),
    infer(
        "infer-simple-batch",
        "simple",
        inputs(
            tensor("INPUT0", "INT32", [2, 16], list(range(32))),
            tensor("INPUT1", "INT32", [2, 16], [1] * 32),
        ),
    ),
    infer(
        "infer-simple-nobatch",
        "simple",
        inputs(
            tensor("INPUT0", "INT32", [16], list(range(16))),
            tensor("INPUT1", "INT32", [16], [1] * 16),
        ),
    ),
    infer(
        "infer-simple-toobig",
        "simple",
        inputs(
            tensor("INPUT0", "INT32", [9, 16], [0] * 144),
            tensor("INPUT1", "INT32", [9, 16], [1] * 144),
        ),
    ),
    infer(
        "infer-simple-mismatch",
        "simple",
        inputs(
            tensor("INPUT0", "INT32", [1, 16], [0] * 16),
            tensor("INPUT1", "INT32", [2, 16], [1] * 32),
        ),
    ),
    infer(
        "infer-simple-shape",
        "simple",
        inputs(
            tensor("INPUT0", "INT32", [1, 8], [0] * 8), tensor("INPUT1", "INT32", [1, 16], [1] * 16)
        ),
    ),
    infer("infer-error-internal", "error_model", inputs(tensor("MODE", "INT32", [1], [0]))),
    infer("infer-error-invalid", "error_model", inputs(tensor("MODE", "INT32", [1], [1]))),
    infer("infer-error-echo", "error_model", inputs(tensor("MODE", "INT32", [1], [7]))),
    infer(
        "infer-bytes-json",
        "identity_bytes",
        inputs(
            tensor("INPUT0", "BYTES", [2], ["hello", ""]),
            outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        ),
    ),
    # binary
    ("bin-add", "POST", "/v2/models/add_sub/infer", _bin_add, _bin_add_h),
    ("bin-all-types", "POST", "/v2/models/identity_all/infer", _bin_all_types, _bin_all_types_h),
    ("bin-no-ihcl", "POST", "/v2/models/add_sub/infer", _bin_add, {}),
    infer("bin-ihcl-big", "add_sub", _bin_add, {"Inference-Header-Content-Length": "99999"}),
    infer("bin-ihcl-neg", "add_sub", _bin_add, {"Inference-Header-Content-Length": "-1"}),
    infer("bin-ihcl-abc", "add_sub", _bin_add, {"Inference-Header-Content-Length": "abc"}),
    infer("bin-ihcl-short", "add_sub", _bin_add, {"Inference-Header-Content-Length": "20"}),
    # a UTF-8 byte-order mark before the JSON: each of its bytes skipped where present, in
    # order; a second mark is not; error offsets count from the first byte
    *[
        infer(f"bom-{name}", "add_sub", mark + j(ADD).encode())
        for name, mark in (
            ("whole", b"\xef\xbb\xbf"),
            ("ef-bb", b"\xef\xbb"),
            ("ef", b"\xef"),
            ("bb", b"\xbb"),
            ("twice", b"\xef\xbb\xbf\xef\xbb\xbf"),
            ("after-a-blank", b" \xef\xbb\xbf"),
        )
    ],
    infer("bom-then-error", "add_sub", b"\xef\xbb\xbf{nope"),
    infer(
        "bom-binary-header",
        "add_sub",
        b"\xef\xbb\xbf" + _bin_add,
        {"Inference-Header-Content-Length": str(int(_bin_add_h[IHCL]) + 3)},
    ),
    # glibc atoi: strtol's value cast to int32 (2**32 reads as 0: the body is a raw input;
    # 2**32 + n as n)
    infer("bin-ihcl-2to32", "add_sub", _bin_add, {"Inference-Header-Content-Length": "4294967296"}),
    infer(
        "bin-ihcl-wraps-to-length",
        "add_sub",
        _bin_add,
        {
            "Inference-Header-Content-Length": str(
                2**32 + int(_bin_add_h["Inference-Header-Content-Length"])
            )
        },
    ),
    infer(
        "bin-ihcl-beyond-64-bits",
        "add_sub",
        _bin_add,
        {"Inference-Header-Content-Length": "18446744073709551616"},
    ),
    ("bin-truncated", "POST", "/v2/models/add_sub/infer", _bin_add[:-5], _bin_add_h),
    ("bin-extra", "POST", "/v2/models/add_sub/infer", _bin_add + b"xx", _bin_add_h),
    infer(
        "bin-json-trailing",
        "add_sub",
        j(ADD) + "xx",
        {"Inference-Header-Content-Length": str(len(j(ADD)))},
    ),
    (
        "bin-size-mismatch",
        "POST",
        "/v2/models/add_sub/infer",
        *binary_request(
            [
                ("INPUT0", "FP32", [4], _fp32([1, 2, 3, 4])),
                ("INPUT1", "FP32", [4], _fp32([1, 2, 3])),
            ]
        ),
    ),
    (
        "bin-huge-declared",
        "POST",
        "/v2/models/add_sub/infer",
        *binary_request([("INPUT0", "FP32", [4], _fp32([1, 2, 3, 4]))])[:1],
        {"Inference-Header-Content-Length": "0"},
    ),
    (
        "bin-bytes-garbage",
        "POST",
        "/v2/models/identity_bytes/infer",
        *binary_request([("INPUT0", "BYTES", [1], bytes_blob([b"ab"]) + b"\x01\x00")]),
    ),
    (
        "bin-bytes-count",
        "POST",
        "/v2/models/identity_bytes/infer",
        *binary_request([("INPUT0", "BYTES", [2], bytes_blob([b"ab"]))]),
    ),
    # BYTES element counts and truncated strings: refused at admission (JSON, with the
    # request id) or, for a truncated last string in the right count, by the backend
    # (text/plain, no prefix)
    *[
        (
            f"bin-bytes-{case}",
            "POST",
            "/v2/models/identity_bytes/infer",
            *binary_request([("INPUT0", "BYTES", [count], blob)], request_id=request_id),
        )
        for case, count, blob, request_id in [
            ("short-last", 2, bytes_blob([b"ab", b"cdef"])[:-2], None),
            ("short-only", 1, bytes_blob([b"abcdef"])[:-1], None),
            ("short-last-of-3", 3, bytes_blob([b"ab", b"x", b"cdef"])[:-3], None),
            ("short-no-data", 1, b"\x05\x00\x00\x00", None),
            ("short-huge-length", 1, b"\xff\xff\xff\xffab", None),
            ("short-with-id", 1, bytes_blob([b"abcdef"])[:-1], "r1"),
            ("too-few", 3, bytes_blob([b"ab", b"c"]), None),
            ("too-few-short", 3, bytes_blob([b"ab"]) + b"\x05\x00\x00\x00ab", None),
            ("too-many", 1, bytes_blob([b"ab", b"c"]), None),
            ("too-many-3", 1, bytes_blob([b"a", b"b", b"c"]), None),
            ("too-many-short", 1, bytes_blob([b"ab", b"cd"])[:-1], None),
            ("too-many-short-2", 2, bytes_blob([b"ab", b"x", b"cd"])[:-1], None),
            ("too-many-with-id", 1, bytes_blob([b"a", b"b"]), "r1"),
            ("too-many-cut-length", 1, bytes_blob([b"ab"]) + b"\x01\x00", None),
            ("zero-shape", 0, bytes_blob([b"a"]), None),
            ("empty", 2, b"", None),
        ]
    ],
    infer(
        "infer-bytes-too-many", "identity_all", inputs(tensor("IN_STRING", "BYTES", [1], ["a"] * 3))
    ),
    (
        # the admission error of one input wins over the backend error of another
        "bin-bytes-short-and-bad-size",
        "POST",
        "/v2/models/identity_all/infer",
        *binary_request(
            [
                ("IN_STRING", "BYTES", [1], bytes_blob([b"abc"])[:-1]),
                ("IN_FP32", "FP32", [2], _fp32([1.0])),
            ]
        ),
    ),
    (
        "bin-bytes-short-and-ok",
        "POST",
        "/v2/models/identity_all/infer",
        *binary_request(
            [
                ("IN_FP32", "FP32", [1], _fp32([1.0])),
                ("IN_STRING", "BYTES", [1], bytes_blob([b"abc"])[:-1]),
            ]
        ),
    ),
    infer(
        "raw-two-inputs", "add_sub", _fp32([1, 2, 3, 4]), {"Inference-Header-Content-Length": "0"}
    ),
    infer(
        "raw-bytes", "identity_bytes", bytes_blob([b"x"]), {"Inference-Header-Content-Length": "0"}
    ),
    infer(
        "raw-error-model",
        "error_model",
        np.array([7], "<i4").tobytes(),
        {"Inference-Header-Content-Length": "0"},
    ),
    infer(
        "raw-error-model-size",
        "error_model",
        np.array([7, 8], "<i4").tobytes(),
        {"Inference-Header-Content-Length": "0"},
    ),
    # compression
    infer("gzip-req", "add_sub", gzip.compress(j(ADD).encode()), {"Content-Encoding": "gzip"}),
    infer(
        "deflate-req", "add_sub", zlib.compress(j(ADD).encode()), {"Content-Encoding": "deflate"}
    ),
    ("br-req", "POST", "/v2/models/add_sub/infer", j(ADD), {"Content-Encoding": "br"}),
    ("GZIP-req", "POST", "/v2/models/add_sub/infer", j(ADD), {"Content-Encoding": "GZIP"}),
    ("identity-req", "POST", "/v2/models/add_sub/infer", j(ADD), {"Content-Encoding": "identity"}),
    ("gzip-empty", "POST", "/v2/models/add_sub/infer", "", {"Content-Encoding": "gzip"}),
    ("gzip-resp", "POST", "/v2/models/add_sub/infer", j(ADD), {"Accept-Encoding": "gzip"}),
    ("deflate-resp", "POST", "/v2/models/add_sub/infer", j(ADD), {"Accept-Encoding": "deflate"}),
    infer("q-resp", "add_sub", j(ADD), {"Accept-Encoding": "gzip;q=0.5, deflate;q=0.9"}),
    ("q0-resp", "POST", "/v2/models/add_sub/infer", j(ADD), {"Accept-Encoding": "gzip;q=0"}),
    infer("space-q-resp", "add_sub", j(ADD), {"Accept-Encoding": "gzip; q=0.5"}),
    infer("bin-gzip-resp", "add_sub", _bin_add, {**_bin_add_h, "Accept-Encoding": "gzip"}),
    # classification
    infer(
        "classify",
        "add_sub",
        add_with(outputs=[{"name": "OUTPUT0", "parameters": {"classification": 2}}]),
    ),
    infer(
        "classify-big-k",
        "add_sub",
        add_with(outputs=[{"name": "OUTPUT0", "parameters": {"classification": 9}}]),
    ),
    infer(
        "classify-zero",
        "add_sub",
        add_with(outputs=[{"name": "OUTPUT0", "parameters": {"classification": 0}}]),
    ),
    infer(
        "classify-bad",
        "add_sub",
        add_with(outputs=[{"name": "OUTPUT0", "parameters": {"classification": -1}}]),
    ),
    infer(
        "classify-batch",
        "simple",
        inputs(
            tensor("INPUT0", "INT32", [2, 16], list(range(32))),
            tensor("INPUT1", "INT32", [2, 16], [1] * 32),
            outputs=[{"name": "OUTPUT0", "parameters": {"classification": 1}}],
        ),
    ),
    infer(
        "classify-binary",
        "add_sub",
        add_with(
            outputs=[{"name": "OUTPUT0", "parameters": {"classification": 2, "binary_data": True}}]
        ),
    ),
    # shm errors
    ("shm-status", "GET", "/v2/systemsharedmemory/status", "", {}),
    ("shm-status-unknown", "GET", "/v2/systemsharedmemory/region/nope/status", "", {}),
    post("shm-register-noregion", "/v2/systemsharedmemory/register", '{"key":"/x","byte_size":8}'),
    post("shm-register-nokey", "/v2/systemsharedmemory/region/r/register", '{"byte_size":8}'),
    ("shm-register-nosize", "POST", "/v2/systemsharedmemory/region/r/register", '{"key":"/x"}', {}),
    post(
        "shm-register-badkey", "/v2/systemsharedmemory/region/r/register", '{"key":5,"byte_size":8}'
    ),
    post(
        "shm-register-badsize",
        "/v2/systemsharedmemory/region/r/register",
        '{"key":"/x","byte_size":-8}',
    ),
    post(
        "shm-register-missing",
        "/v2/systemsharedmemory/region/r/register",
        '{"key":"/tritonhttp-does-not-exist","byte_size":8}',
    ),
    ("shm-register-empty", "POST", "/v2/systemsharedmemory/region/r/register", "", {}),
    ("shm-unregister", "POST", "/v2/systemsharedmemory/region/nope/unregister", "", {}),
    ("shm-unregister-all", "POST", "/v2/systemsharedmemory/unregister", "", {}),
    ("shm-status-post", "POST", "/v2/systemsharedmemory/status", "", {}),
    infer(
        "shm-infer-unknown",
        "add_sub",
        j(
            {
                "inputs": [
                    {
                        "name": "INPUT0",
                        "datatype": "FP32",
                        "shape": [4],
                        "parameters": {
                            "shared_memory_region": "nope",
                            "shared_memory_byte_size": 16,
                        },
                    },
                    ADD["inputs"][1],
                ]
            }
        ),
    ),
    infer(
        "shm-infer-badregion",
        "add_sub",
        j(
            {
                "inputs": [
                    {
                        "name": "INPUT0",
                        "datatype": "FP32",
                        "shape": [4],
                        "parameters": {"shared_memory_region": 5},
                    },
                    ADD["inputs"][1],
                ]
            }
        ),
    ),
    infer(
        "shm-out-and-class",
        "add_sub",
        add_with(
            outputs=[
                {
                    "name": "OUTPUT0",
                    "parameters": {"shared_memory_region": "x", "classification": 1},
                }
            ]
        ),
    ),
    infer(
        "shm-out-and-binary",
        "add_sub",
        add_with(
            outputs=[
                {
                    "name": "OUTPUT0",
                    "parameters": {"shared_memory_region": "x", "binary_data": True},
                }
            ]
        ),
    ),
    ("cuda-status", "GET", "/v2/cudasharedmemory/status", "", {}),
    ("cuda-status-unknown", "GET", "/v2/cudasharedmemory/region/nope/status", "", {}),
    ("cuda-register-noregion", "POST", "/v2/cudasharedmemory/register", "{}", {}),
    post(
        "cuda-register-nohandle",
        "/v2/cudasharedmemory/region/r/register",
        '{"device_id":0,"byte_size":8}',
    ),
    post(
        "cuda-register-nob64",
        "/v2/cudasharedmemory/region/r/register",
        '{"raw_handle":{},"device_id":0,"byte_size":8}',
    ),
    post(
        "cuda-register-short",
        "/v2/cudasharedmemory/region/r/register",
        '{"raw_handle":{"b64":"AAAA"},"device_id":0,"byte_size":8}',
    ),
    post(
        "cuda-register",
        "/v2/cudasharedmemory/region/r/register",
        j({"raw_handle": {"b64": "A" * 88}, "device_id": 0, "byte_size": 8}),
    ),
    ("cuda-unregister", "POST", "/v2/cudasharedmemory/region/r/unregister", "", {}),
    # trace & logging (read-only / erroring here: state-changing ones run elsewhere)
    ("trace-get", "GET", "/v2/trace/setting", "", {}),
    ("trace-model-get", "GET", "/v2/models/add_sub/trace/setting", "", {}),
    ("trace-unknown-model", "GET", "/v2/models/nope/trace/setting", "", {}),
    ("trace-versioned", "GET", "/v2/models/add_sub/versions/1/trace/setting", "", {}),
    ("trace-empty-post", "POST", "/v2/trace/setting", "", {}),
    ("trace-file", "POST", "/v2/trace/setting", '{"trace_file":"x"}', {}),
    ("trace-level-nofile", "POST", "/v2/trace/setting", '{"trace_level":["TIMESTAMPS"]}', {}),
    ("trace-off-plus", "POST", "/v2/trace/setting", '{"trace_level":["OFF","TIMESTAMPS"]}', {}),
    ("trace-rate-bad", "POST", "/v2/trace/setting", '{"trace_rate":"abc"}', {}),
    ("trace-rate-int", "POST", "/v2/trace/setting", '{"trace_rate":5}', {}),
    ("trace-rate-range", "POST", "/v2/trace/setting", '{"trace_rate":"99999999999"}', {}),
    ("trace-count-low", "POST", "/v2/trace/setting", '{"trace_count":"-5"}', {}),
    ("trace-level-notarray", "POST", "/v2/trace/setting", '{"trace_level":"OFF"}', {}),
    ("trace-put", "PUT", "/v2/trace/setting", "", {}),
    ("trace-noop", "POST", "/v2/trace/setting", "{}", {}),
    ("log-get", "GET", "/v2/logging", "", {}),
    ("log-noop", "POST", "/v2/logging", "{}", {}),
    ("log-empty", "POST", "/v2/logging", "", {}),
    ("log-file", "POST", "/v2/logging", '{"log_file":"x"}', {}),
    ("log-info-bad", "POST", "/v2/logging", '{"log_info":1}', {}),
    ("log-verbose-bad", "POST", "/v2/logging", '{"log_verbose_level":-1}', {}),
    ("log-format-bad", "POST", "/v2/logging", '{"log_format":"xml"}', {}),
    ("log-delete", "DELETE", "/v2/logging", "", {}),
    # generate
    post(
        "generate",
        "/v2/models/add_sub/generate",
        j({"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}),
    ),
    post(
        "generate-stream",
        "/v2/models/add_sub/generate_stream",
        j({"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}),
    ),
    post(
        "generate-id-params",
        "/v2/models/add_sub/generate",
        j({"id": "g1", "INPUT0": [1, 2, 3, 4], "parameters": {"INPUT1": [1, 1, 1, 1], "x": 1}}),
    ),
    post(
        "generate-scalar",
        "/v2/models/identity_all/generate",
        j({"IN_BOOL": True, "IN_INT64": [1, 2]}),
    ),
    post(
        "generate-bad-shape",
        "/v2/models/add_sub/generate",
        j({"INPUT0": [1, 2, 3], "INPUT1": [1, 1, 1, 1]}),
    ),
    post(
        "generate-dup",
        "/v2/models/add_sub/generate",
        j({"INPUT0": [1, 2, 3, 4], "parameters": {"INPUT0": [1, 1, 1, 1]}}),
    ),
    post(
        "generate-bad-param",
        "/v2/models/add_sub/generate",
        j({"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1], "x": {"a": 1}}),
    ),
    ("generate-params-notobj", "POST", "/v2/models/add_sub/generate", j({"parameters": 1}), {}),
    ("generate-unknown", "POST", "/v2/models/nope/generate", "{}", {}),
    post(
        "generate-encoding",
        "/v2/models/add_sub/generate",
        j({"INPUT0": [1, 2, 3, 4]}),
        {"Content-Encoding": "gzip"},
    ),
    ("generate-model-error", "POST", "/v2/models/error_model/generate", j({"MODE": 0}), {}),
    ("generate-model-invalid", "POST", "/v2/models/error_model/generate", j({"MODE": 1}), {}),
    ("generate-bad-json", "POST", "/v2/models/add_sub/generate", "{", {}),
    # nested lists of strings that disagree with the shape their outer list gives
    *[
        post(f"generate-bytes-nested-{i}", f"/v2/models/identity_bytes/{path}", j(body))
        for i, (path, body) in enumerate(
            [
                ("generate", {"INPUT0": [["", ""]]}),
                ("generate_stream", {"INPUT0": [["a", "b"], ["c", "d"]]}),
                ("generate", {"INPUT0": [["a"], []]}),
                ("generate", {"id": "r1", "parameters": {"INPUT0": [["a", "b", "c"]]}}),
            ]
        )
    ],
    # NaN and Infinity: Triton's RapidJSON takes NaN, Inf and Infinity (signed) as numbers
    *[
        (
            f"nan-{dt.lower()}-{i}",
            "POST",
            "/v2/models/identity_all/infer",
            raw_tokens(name, dt, tokens),
            {},
        )
        for i, (name, dt, tokens) in enumerate(
            [
                ("FP64", "FP64", "NaN,Infinity,-Infinity"),
                ("FP64", "FP64", "Inf,-Inf,-NaN"),
                ("FP32", "FP32", "NaN,-Infinity,1e400"),
                ("FP64", "FP64", "nan"),
                ("FP64", "FP64", "inf"),
                ("FP64", "FP64", "NaNx"),
                ("FP64", "FP64", "Infin"),
                ("FP64", "FP64", "+Inf"),
                ("INT32", "INT32", "NaN"),
                ("INT64", "INT64", "-Infinity"),
                ("UINT8", "UINT8", "Inf"),
                ("BOOL", "BOOL", "NaN"),
                ("STRING", "BYTES", "NaN"),
            ]
        )
    ],
    infer(
        "nan-shape",
        "identity_all",
        '{"inputs":[{"name":"IN_FP64","datatype":"FP64","shape":[NaN],"data":[1]}]}',
    ),
    infer("nan-parameter", "add_sub", add_with(parameters={"x": "P"}).replace('"P"', "NaN")),
    ("nan-id", "POST", "/v2/models/add_sub/infer", add_with(id="I").replace('"I"', "-Inf"), {}),
    infer(
        "nan-binary-size",
        "add_sub",
        add_with().replace('"data":[1,1,1,1]', '"parameters":{"binary_data_size":NaN}'),
    ),
    post(
        "nan-generate",
        "/v2/models/identity_all/generate",
        '{"IN_FP64":[NaN,-Inf],"IN_INT64":[1],"parameters":{"p":Infinity}}',
    ),
    ("nan-index", "POST", "/v2/repository/index", '{"ready":NaN}', {}),
    ("nan-log", "POST", "/v2/logging", '{"log_verbose_level":NaN}', {}),
    ("nan-trace", "POST", "/v2/trace/setting", '{"trace_rate":Infinity}', {}),
    post(
        "nan-shm-register",
        "/v2/systemsharedmemory/region/r/register",
        '{"key":"/x","offset":0,"byte_size":NaN}',
    ),
    # --- found by test_differential_fuzz.py (each the smallest request that showed it)
    # a repeated member: RapidJSON keeps both, Triton's lookups find the first
    infer(
        "dup-member-first",
        "identity_bytes",
        '{"inputs":[{"name":"INPUT0","datatype":"BYTES","datatype":5,"shape":[1],"data":["a"]}]}',
    ),
    infer("dup-inputs-first", "add_sub", j(ADD)[:-1] + ',"inputs":{}}'),
    infer(
        "dup-param-first",
        "add_sub",
        j(ADD)[:-1] + ',"parameters":{"binary_data_output":true,"binary_data_output":5}}',
    ),
    # names, datatypes and ids are read as C strings (cut at a NUL)
    infer("nul-id", "add_sub", add_with(id="a\0b")),
    infer("nul-input-name", "add_sub", input0(name="INPUT0\0x")),
    infer("nul-datatype", "add_sub", input0(datatype="FP32\0x")),
    infer("nul-output-name", "add_sub", add_with(outputs=[{"name": "OUTPUT0\0x"}])),
    infer("nul-param-key", "add_sub", add_with(parameters={"x\0": 1})),
    infer("nul-param-reserved", "add_sub", add_with(parameters={"sequence_id\0": 2})),
    infer("nul-param-triton", "add_sub", add_with(parameters={"triton_\0": 2})),
    # shape [] counts 0 elements: its data is not read at all
    infer("empty-shape-data", "identity_all", inputs(tensor("IN_INT32", "INT32", [], [1, 2]))),
    infer("empty-shape-not-array", "identity_all", inputs(tensor("IN_INT32", "INT32", [], 5))),
    # JSON text RapidJSON reads differently from python-rapidjson
    infer("utf8-after-root", "identity_all", b'{"inputs":-169}E\xcb_'),
    infer("ctrl-char-in-string", "identity_all", b'{"in\x01puts":[]}'),
    infer("ctrl-char-utf8", "identity_all", b'{"in\xff\x01"'),
    infer(
        "lone-low-surrogate",
        "identity_bytes",
        inputs(tensor("INPUT0", "BYTES", [2], ["a\udd06b", "\\udc00"])),
    ),
    infer(
        "fp64-rapidjson-digits",
        "identity_all",
        raw_tokens("FP64", "FP64", "3.1868867035930297e-232,0.1,123456789012345678901234567890"),
    ),
    # outputs: into shared memory, classification and binary_data are refused before the
    # name is read; otherwise classification is read before binary_data
    infer(
        "out-shm-before-name",
        "add_sub",
        add_with(
            outputs=[{"name": 7, "parameters": {"shared_memory_region": "r", "binary_data": 5}}]
        ),
    ),
    infer(
        "out-shm-class-zero",
        "add_sub",
        add_with(
            outputs=[
                {
                    "name": "OUTPUT1",
                    "parameters": {"classification": 0, "shared_memory_region": "x"},
                }
            ]
        ),
    ),
    infer(
        "out-shm-binary-before-region",
        "add_sub",
        add_with(
            outputs=[
                {"name": "OUTPUT1", "parameters": {"shared_memory_region": 5, "binary_data": True}}
            ]
        ),
    ),
    infer(
        "out-class-before-binary",
        "add_sub",
        add_with(
            outputs=[{"name": "OUTPUT1", "parameters": {"binary_data": "x", "classification": "y"}}]
        ),
    ),
    infer(
        "outputs-sorted",
        "identity_all",
        inputs(tensor("IN_BOOL", "BOOL", [1], [True]), outputs=[{"name": "b"}, {"name": "a"}]),
    ),
    # inputs
    infer("fp16-json-not-array", "identity_all", inputs(tensor("IN_FP16", "FP16", [1], "x"))),
    infer("bad-dtype-no-data", "identity_all", inputs(tensor("IN_FP16", "fp16", [0], "x"))),
    (
        "bin-bad-dtype",
        "POST",
        "/v2/models/identity_all/infer",
        *binary_request([("IN_FP16", "fp16", [1], b"")]),
    ),
    infer("data-stray-shm-offset", "add_sub", input0(parameters={"shared_memory_offset": "x"})),
    infer(
        "data-stray-shm-size",
        "add_sub",
        input0(shape=[0], parameters={"shared_memory_byte_size": "y"}),
    ),
    # Triton walks inputs in its std::unordered_map's order and checks each in turn
    infer(
        "inputs-map-order",
        "identity_bytes",
        inputs(
            *[
                tensor(n, "FP32", [1], [1])
                for n in ["IN_BOOL", "OUT_FP16", "OUT_BF16", "IN_UINT16", "IN_INT64", "OUT_UINT16"]
            ]
        ),
    ),
    infer(
        "inputs-map-order-error",
        "identity_all",
        inputs(*[tensor(n, "FP32", [1], [1]) for n in ["IN_BOOL", "IN_UINT8", "IN_INT8"]]),
    ),
    infer(
        "inputs-each-in-turn",
        "identity_all",
        inputs(tensor("IN_INT32", "FP32", [1], [1]), tensor("IN_STRING", "BYTES", [2], ["a"])),
    ),
    (
        "bin-inputs-each-in-turn",
        "POST",
        "/v2/models/identity_all/infer",
        *binary_request(
            [("IN_INT32", "FP32", [1], _fp32([1])), ("IN_FP32", "FP32", [2], _fp32([1]))]
        ),
    ),
    # dims are int64 and element counts wrap (only requests Triton survives)
    infer(
        "huge-dim-negative",
        "identity_all",
        inputs(tensor("IN_INT32", "INT32", [2**63, 0], [1])),
    ),
    infer(
        "huge-dims-count-zero",
        "identity_all",
        inputs(tensor("IN_INT32", "INT32", [2**32, 2**32], [1])),
    ),
    infer(
        "bytes-negative-count",
        "identity_bytes",
        inputs(tensor("INPUT0", "BYTES", [2**63], ["a", "b"])),
    ),
    infer("bytes-negative-none", "identity_bytes", inputs(tensor("INPUT0", "BYTES", [2**63], []))),
    (
        "bin-huge-dim-bytes-wrap",
        "POST",
        "/v2/models/identity_all/infer",
        *binary_request([("IN_INT32", "INT32", [2**62], _fp32([1]))]),
    ),
    (
        "bin-wildcard-dim",
        "POST",
        "/v2/models/identity_all/infer",
        *binary_request([("IN_INT32", "INT32", [2**64 - 1], _fp32([1]))]),
    ),
    # Triton's batch size: the first non-zero batch dimension; 0 leaves none at all
    infer(
        "batch-zero-mixed",
        "simple",
        inputs(
            tensor("INPUT0", "INT32", [1, 16], [0] * 16), tensor("INPUT1", "INT32", [0, 16], [])
        ),
    ),
    infer(
        "batch-zero-all",
        "simple",
        inputs(tensor("INPUT0", "INT32", [0, 16], []), tensor("INPUT1", "INT32", [0, 16], [])),
    ),
    infer(
        "batch-unknown-after-no-shape",
        "simple",
        inputs(tensor("BOGUS", "FP32", [1], [1]), tensor("INPUT0", "FP32", [], [1])),
    ),
    # nested 900 deep: parsed, and every check after the parse reaches any depth
    infer("deep-data", "add_sub", deep(input0(data="<deep>"), DEEP)),
    infer("deep-shape", "add_sub", deep(input0(shape="<deep>"), DEEP)),
    infer(
        "deep-request-parameter", "add_sub", deep(add_with(parameters={"p": "<deep>"}), DEEP_OBJECT)
    ),
    infer("deep-input-parameter", "add_sub", deep(input0(parameters={"p": "<deep>"}), DEEP_OBJECT)),
    infer("deep-outputs", "add_sub", deep(add_with(outputs="<deep>"), DEEP)),
    infer("deep-unknown-member", "add_sub", deep(add_with(extra="<deep>"), DEEP_OBJECT)),
    post("deep-trace-setting", "/v2/trace/setting", deep(j({"trace_rate": "<deep>"}), DEEP)),
    post("deep-log-setting", "/v2/logging", deep(j({"extra": "<deep>"}), DEEP_OBJECT)),
]

_IDS = [c[0] for c in CASES]
assert len(set(_IDS)) == len(_IDS)


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_same_answer(
    case: tuple[str, str, str, Any, dict[str, str]], real_triton: Any, bundled_server: Any
) -> None:
    _, method, path, body, headers = case
    real = exchange(real_triton.url, method, path, body, headers)
    ours = exchange(bundled_server.url, method, path, body, headers)
    compare(ours, real)
