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

from ._wire import Reply, binary_request, bytes_blob, exchange

pytestmark = pytest.mark.real_triton

ADD = {"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
]}  # fmt: skip


def j(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


def add_with(**changes: Any) -> str:
    doc = json.loads(json.dumps(ADD))
    doc.update(changes)
    return j(doc)


def raw_tokens(name: str, datatype: str, tokens: str) -> str:
    """An identity_all request whose data are JSON tokens as written (``NaN,-Inf``...)."""
    shape = tokens.count(",") + 1
    head = f'{{"inputs":[{{"name":"IN_{name}","datatype":"{datatype}","shape":[{shape}],'
    return head + f'"data":[{tokens}]}}]}}'


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

# (id, method, path, body, headers)
CASES: list[tuple[str, str, str, str | bytes, dict[str, str]]] = [
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
    (
        "infer-huge-ver",
        "POST",
        "/v2/models/add_sub/versions/99999999999999999999/infer",
        j(ADD),
        {},
    ),
    (
        "infer-outputs-order",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(outputs=[{"name": "OUTPUT1"}, {"name": "OUTPUT0"}]),
        {},
    ),
    (
        "infer-outputs-one",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(outputs=[{"name": "OUTPUT1"}]),
        {},
    ),
    ("infer-outputs-empty", "POST", "/v2/models/add_sub/infer", add_with(outputs=[]), {}),
    (
        "infer-outputs-dup",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(outputs=[{"name": "OUTPUT1"}, {"name": "OUTPUT1"}]),
        {},
    ),
    (
        "infer-outputs-unknown",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(outputs=[{"name": "NOPE"}]),
        {},
    ),
    ("infer-outputs-noname", "POST", "/v2/models/add_sub/infer", add_with(outputs=[{}]), {}),
    ("infer-outputs-notarray", "POST", "/v2/models/add_sub/infer", add_with(outputs={}), {}),
    (
        "infer-out-bin-bad",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": 1}}]),
        {},
    ),
    (
        "infer-binary-output",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(parameters={"binary_data_output": True}),
        {},
    ),
    (
        "infer-binary-output-mixed",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(
            parameters={"binary_data_output": True},
            outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": False}}],
        ),
        {},
    ),
    (
        "infer-bdo-bad",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(parameters={"binary_data_output": "yes"}),
        {},
    ),
    (
        "infer-params",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(parameters={"s": "str", "i": -5, "b": True, "d": 1.5}),
        {},
    ),
    (
        "infer-params-reserved",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(parameters={"triton_x": 1}),
        {},
    ),
    ("infer-params-null", "POST", "/v2/models/add_sub/infer", add_with(parameters={"x": None}), {}),
    ("infer-params-list", "POST", "/v2/models/add_sub/infer", add_with(parameters={"x": [1]}), {}),
    ("infer-params-notobj", "POST", "/v2/models/add_sub/infer", add_with(parameters=[1]), {}),
    (
        "infer-params-seq",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(
            parameters={
                "sequence_id": 5,
                "sequence_start": True,
                "sequence_end": True,
                "priority": 0,
                "timeout": 100,
            }
        ),
        {},
    ),
    (
        "infer-params-seq-neg",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(parameters={"sequence_id": -5}),
        {},
    ),
    (
        "infer-params-seq-start-bad",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(parameters={"sequence_start": 1}),
        {},
    ),
    (
        "infer-params-priority-bad",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(parameters={"priority": -1}),
        {},
    ),
    (
        "infer-params-timeout-bad",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(parameters={"timeout": "x"}),
        {},
    ),
    (
        "infer-missing-input",
        "POST",
        "/v2/models/add_sub/infer",
        j({"inputs": ADD["inputs"][:1]}),
        {},
    ),
    (
        "infer-extra-input",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    *ADD["inputs"],
                    {"name": "BOGUS", "datatype": "FP32", "shape": [1], "data": [1]},
                ]
            }
        ),
        {},
    ),
    (
        "infer-unknown-input",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    ADD["inputs"][0],
                    {"name": "BOGUS", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
                ]
            }
        ),
        {},
    ),
    (
        "infer-dup-input",
        "POST",
        "/v2/models/add_sub/infer",
        j({"inputs": [ADD["inputs"][0], ADD["inputs"][0]]}),
        {},
    ),
    (
        "infer-wrong-dtype",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "INT32", "shape": [4], "data": [1, 2, 3, 4]},
                    ADD["inputs"][1],
                ]
            }
        ),
        {},
    ),
    (
        "infer-wrong-shape",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3, 4]},
                    ADD["inputs"][1],
                ]
            }
        ),
        {},
    ),
    (
        "infer-lowercase-dtype",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "fp32", "shape": [4], "data": [1, 2, 3, 4]},
                    ADD["inputs"][1],
                ]
            }
        ),
        {},
    ),
    (
        "infer-data-short",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3]},
                    ADD["inputs"][1],
                ]
            }
        ),
        {},
    ),
    (
        "infer-data-long",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4, 5]},
                    ADD["inputs"][1],
                ]
            }
        ),
        {},
    ),
    (
        "infer-data-nested",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [[1, 2], [3, 4]]},
                    ADD["inputs"][1],
                ]
            }
        ),
        {},
    ),
    (
        "infer-data-str",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, "2", 3, 4]},
                    ADD["inputs"][1],
                ]
            }
        ),
        {},
    ),
    (
        "infer-data-bool",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, True, 3, 4]},
                    ADD["inputs"][1],
                ]
            }
        ),
        {},
    ),
    (
        "infer-data-notarray",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": 5},
                    ADD["inputs"][1],
                ]
            }
        ),
        {},
    ),
    (
        "infer-no-source",
        "POST",
        "/v2/models/add_sub/infer",
        j({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}, ADD["inputs"][1]]}),
        {},
    ),
    (
        "infer-two-sources",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {
                        "name": "INPUT0",
                        "datatype": "FP32",
                        "shape": [4],
                        "data": [1, 2, 3, 4],
                        "parameters": {"binary_data_size": 16},
                    },
                    ADD["inputs"][1],
                ]
            }
        ),
        {},
    ),
    (
        "infer-no-name",
        "POST",
        "/v2/models/add_sub/infer",
        j({"inputs": [{"datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]}),
        {},
    ),
    (
        "infer-no-datatype",
        "POST",
        "/v2/models/add_sub/infer",
        j({"inputs": [{"name": "INPUT0", "shape": [4], "data": [1, 2, 3, 4]}]}),
        {},
    ),
    (
        "infer-no-shape",
        "POST",
        "/v2/models/add_sub/infer",
        j({"inputs": [{"name": "INPUT0", "datatype": "FP32", "data": [1, 2, 3, 4]}]}),
        {},
    ),
    (
        "infer-neg-shape",
        "POST",
        "/v2/models/add_sub/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "FP32", "shape": [-4], "data": [1, 2, 3, 4]}
                ]
            }
        ),
        {},
    ),
    ("infer-no-inputs", "POST", "/v2/models/add_sub/infer", "{}", {}),
    ("infer-inputs-obj", "POST", "/v2/models/add_sub/infer", '{"inputs":{}}', {}),
    ("infer-array-body", "POST", "/v2/models/add_sub/infer", "[1,2]", {}),
    ("infer-bad-json", "POST", "/v2/models/add_sub/infer", '{"inputs":[1,]}', {}),
    ("infer-bad-json2", "POST", "/v2/models/add_sub/infer", '{"inputs"', {}),
    ("infer-trailing-garbage", "POST", "/v2/models/add_sub/infer", j(ADD) + " x", {}),
    ("infer-empty-body", "POST", "/v2/models/add_sub/infer", "", {}),
    ("infer-whitespace", "POST", "/v2/models/add_sub/infer", "   " + j(ADD) + "\n", {}),
    (
        "infer-fp16-json",
        "POST",
        "/v2/models/identity_all/infer",
        j({"inputs": [{"name": "IN_FP16", "datatype": "FP16", "shape": [1], "data": [1]}]}),
        {},
    ),
    (
        "infer-bf16-json",
        "POST",
        "/v2/models/identity_all/infer",
        j({"inputs": [{"name": "IN_BF16", "datatype": "BF16", "shape": [1], "data": [1]}]}),
        {},
    ),
    (
        "infer-fp16-out-json",
        "POST",
        "/v2/models/identity_all/infer",
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
        {},
    ),
    (
        "infer-all-json",
        "POST",
        "/v2/models/identity_all/infer",
        j(
            {
                "inputs": [
                    {
                        "name": "IN_BOOL",
                        "datatype": "BOOL",
                        "shape": [3],
                        "data": [True, False, True],
                    },
                    {"name": "IN_UINT8", "datatype": "UINT8", "shape": [2], "data": [300, 255]},
                    {"name": "IN_INT8", "datatype": "INT8", "shape": [2], "data": [-129, 127]},
                    {
                        "name": "IN_UINT64",
                        "datatype": "UINT64",
                        "shape": [2],
                        "data": [0, 18446744073709551615],
                    },
                    {
                        "name": "IN_INT64",
                        "datatype": "INT64",
                        "shape": [2],
                        "data": [-9223372036854775808, 9223372036854775807],
                    },
                    {
                        "name": "IN_FP32",
                        "datatype": "FP32",
                        "shape": [6],
                        "data": [0.1, 1e30, -2.5, 3, 0.3, 1e-7],
                    },
                    {
                        "name": "IN_FP64",
                        "datatype": "FP64",
                        "shape": [6],
                        "data": [1e21, 1e20, 0.000001, 1.5e-7, -0.0, 5e-324],
                    },
                    {
                        "name": "IN_STRING",
                        "datatype": "BYTES",
                        "shape": [3],
                        "data": ["abc", "", 'héllo "q" \\ \n\u0001/'],
                    },
                ]
            }
        ),
        {},
    ),
    (
        "infer-int-float",
        "POST",
        "/v2/models/identity_all/infer",
        j({"inputs": [{"name": "IN_INT32", "datatype": "INT32", "shape": [1], "data": [1.0]}]}),
        {},
    ),
    (
        "infer-uint-neg",
        "POST",
        "/v2/models/identity_all/infer",
        j({"inputs": [{"name": "IN_UINT32", "datatype": "UINT32", "shape": [1], "data": [-1]}]}),
        {},
    ),
    (
        "infer-bool-int",
        "POST",
        "/v2/models/identity_all/infer",
        j({"inputs": [{"name": "IN_BOOL", "datatype": "BOOL", "shape": [1], "data": [1]}]}),
        {},
    ),
    (
        "infer-bytes-int",
        "POST",
        "/v2/models/identity_all/infer",
        j({"inputs": [{"name": "IN_STRING", "datatype": "BYTES", "shape": [1], "data": [1]}]}),
        {},
    ),
    (
        "infer-bytes-count",
        "POST",
        "/v2/models/identity_all/infer",
        j({"inputs": [{"name": "IN_STRING", "datatype": "BYTES", "shape": [2], "data": ["a"]}]}),
        {},
    ),
    (
        "infer-zero-elems",
        "POST",
        "/v2/models/identity_all/infer",
        j({"inputs": [{"name": "IN_FP32", "datatype": "FP32", "shape": [0], "data": []}]}),
        {},
    ),
    (
        "infer-zero-elems-bin",
        "POST",
        "/v2/models/identity_all/infer",
        j(
            {
                "inputs": [{"name": "IN_FP32", "datatype": "FP32", "shape": [0], "data": []}],
                "outputs": [{"name": "OUT_FP32", "parameters": {"binary_data": True}}],
            }
        ),
        {},
    ),
    ("infer-no-inputs-optional", "POST", "/v2/models/identity_all/infer", '{"inputs":[]}', {}),
    (
        "infer-scalar-shape",
        "POST",
        "/v2/models/identity_all/infer",
        j({"inputs": [{"name": "IN_FP32", "datatype": "FP32", "shape": [], "data": [1]}]}),
        {},
    ),
    (
        "infer-simple-batch",
        "POST",
        "/v2/models/simple/infer",
        j(
            {
                "inputs": [
                    {
                        "name": "INPUT0",
                        "datatype": "INT32",
                        "shape": [2, 16],
                        "data": list(range(32)),
                    },
                    {"name": "INPUT1", "datatype": "INT32", "shape": [2, 16], "data": [1] * 32},
                ]
            }
        ),
        {},
    ),
    (
        "infer-simple-nobatch",
        "POST",
        "/v2/models/simple/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "INT32", "shape": [16], "data": list(range(16))},
                    {"name": "INPUT1", "datatype": "INT32", "shape": [16], "data": [1] * 16},
                ]
            }
        ),
        {},
    ),
    (
        "infer-simple-toobig",
        "POST",
        "/v2/models/simple/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "INT32", "shape": [9, 16], "data": [0] * 144},
                    {"name": "INPUT1", "datatype": "INT32", "shape": [9, 16], "data": [1] * 144},
                ]
            }
        ),
        {},
    ),
    (
        "infer-simple-mismatch",
        "POST",
        "/v2/models/simple/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": [0] * 16},
                    {"name": "INPUT1", "datatype": "INT32", "shape": [2, 16], "data": [1] * 32},
                ]
            }
        ),
        {},
    ),
    (
        "infer-simple-shape",
        "POST",
        "/v2/models/simple/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "INT32", "shape": [1, 8], "data": [0] * 8},
                    {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16},
                ]
            }
        ),
        {},
    ),
    (
        "infer-error-internal",
        "POST",
        "/v2/models/error_model/infer",
        j({"inputs": [{"name": "MODE", "datatype": "INT32", "shape": [1], "data": [0]}]}),
        {},
    ),
    (
        "infer-error-invalid",
        "POST",
        "/v2/models/error_model/infer",
        j({"inputs": [{"name": "MODE", "datatype": "INT32", "shape": [1], "data": [1]}]}),
        {},
    ),
    (
        "infer-error-echo",
        "POST",
        "/v2/models/error_model/infer",
        j({"inputs": [{"name": "MODE", "datatype": "INT32", "shape": [1], "data": [7]}]}),
        {},
    ),
    (
        "infer-bytes-json",
        "POST",
        "/v2/models/identity_bytes/infer",
        j(
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "BYTES", "shape": [2], "data": ["hello", ""]}
                ],
                "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
            }
        ),
        {},
    ),
    # binary
    ("bin-add", "POST", "/v2/models/add_sub/infer", _bin_add, _bin_add_h),
    ("bin-all-types", "POST", "/v2/models/identity_all/infer", _bin_all_types, _bin_all_types_h),
    ("bin-no-ihcl", "POST", "/v2/models/add_sub/infer", _bin_add, {}),
    (
        "bin-ihcl-big",
        "POST",
        "/v2/models/add_sub/infer",
        _bin_add,
        {"Inference-Header-Content-Length": "99999"},
    ),
    (
        "bin-ihcl-neg",
        "POST",
        "/v2/models/add_sub/infer",
        _bin_add,
        {"Inference-Header-Content-Length": "-1"},
    ),
    (
        "bin-ihcl-abc",
        "POST",
        "/v2/models/add_sub/infer",
        _bin_add,
        {"Inference-Header-Content-Length": "abc"},
    ),
    (
        "bin-ihcl-short",
        "POST",
        "/v2/models/add_sub/infer",
        _bin_add,
        {"Inference-Header-Content-Length": "20"},
    ),
    ("bin-truncated", "POST", "/v2/models/add_sub/infer", _bin_add[:-5], _bin_add_h),
    ("bin-extra", "POST", "/v2/models/add_sub/infer", _bin_add + b"xx", _bin_add_h),
    (
        "bin-json-trailing",
        "POST",
        "/v2/models/add_sub/infer",
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
    (
        "infer-bytes-too-many",
        "POST",
        "/v2/models/identity_all/infer",
        j(
            {
                "inputs": [
                    {"name": "IN_STRING", "datatype": "BYTES", "shape": [1], "data": ["a"] * 3}
                ]
            }
        ),
        {},
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
    (
        "raw-two-inputs",
        "POST",
        "/v2/models/add_sub/infer",
        _fp32([1, 2, 3, 4]),
        {"Inference-Header-Content-Length": "0"},
    ),
    (
        "raw-bytes",
        "POST",
        "/v2/models/identity_bytes/infer",
        bytes_blob([b"x"]),
        {"Inference-Header-Content-Length": "0"},
    ),
    (
        "raw-error-model",
        "POST",
        "/v2/models/error_model/infer",
        np.array([7], "<i4").tobytes(),
        {"Inference-Header-Content-Length": "0"},
    ),
    (
        "raw-error-model-size",
        "POST",
        "/v2/models/error_model/infer",
        np.array([7, 8], "<i4").tobytes(),
        {"Inference-Header-Content-Length": "0"},
    ),
    # compression
    (
        "gzip-req",
        "POST",
        "/v2/models/add_sub/infer",
        gzip.compress(j(ADD).encode()),
        {"Content-Encoding": "gzip"},
    ),
    (
        "deflate-req",
        "POST",
        "/v2/models/add_sub/infer",
        zlib.compress(j(ADD).encode()),
        {"Content-Encoding": "deflate"},
    ),
    ("br-req", "POST", "/v2/models/add_sub/infer", j(ADD), {"Content-Encoding": "br"}),
    ("GZIP-req", "POST", "/v2/models/add_sub/infer", j(ADD), {"Content-Encoding": "GZIP"}),
    ("identity-req", "POST", "/v2/models/add_sub/infer", j(ADD), {"Content-Encoding": "identity"}),
    ("gzip-empty", "POST", "/v2/models/add_sub/infer", "", {"Content-Encoding": "gzip"}),
    ("gzip-resp", "POST", "/v2/models/add_sub/infer", j(ADD), {"Accept-Encoding": "gzip"}),
    ("deflate-resp", "POST", "/v2/models/add_sub/infer", j(ADD), {"Accept-Encoding": "deflate"}),
    (
        "q-resp",
        "POST",
        "/v2/models/add_sub/infer",
        j(ADD),
        {"Accept-Encoding": "gzip;q=0.5, deflate;q=0.9"},
    ),
    ("q0-resp", "POST", "/v2/models/add_sub/infer", j(ADD), {"Accept-Encoding": "gzip;q=0"}),
    (
        "space-q-resp",
        "POST",
        "/v2/models/add_sub/infer",
        j(ADD),
        {"Accept-Encoding": "gzip; q=0.5"},
    ),
    (
        "bin-gzip-resp",
        "POST",
        "/v2/models/add_sub/infer",
        _bin_add,
        {**_bin_add_h, "Accept-Encoding": "gzip"},
    ),
    # classification
    (
        "classify",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(outputs=[{"name": "OUTPUT0", "parameters": {"classification": 2}}]),
        {},
    ),
    (
        "classify-big-k",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(outputs=[{"name": "OUTPUT0", "parameters": {"classification": 9}}]),
        {},
    ),
    (
        "classify-zero",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(outputs=[{"name": "OUTPUT0", "parameters": {"classification": 0}}]),
        {},
    ),
    (
        "classify-bad",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(outputs=[{"name": "OUTPUT0", "parameters": {"classification": -1}}]),
        {},
    ),
    (
        "classify-batch",
        "POST",
        "/v2/models/simple/infer",
        j(
            {
                "inputs": [
                    {
                        "name": "INPUT0",
                        "datatype": "INT32",
                        "shape": [2, 16],
                        "data": list(range(32)),
                    },
                    {"name": "INPUT1", "datatype": "INT32", "shape": [2, 16], "data": [1] * 32},
                ],
                "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 1}}],
            }
        ),
        {},
    ),
    (
        "classify-binary",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(
            outputs=[{"name": "OUTPUT0", "parameters": {"classification": 2, "binary_data": True}}]
        ),
        {},
    ),
    # shm errors
    ("shm-status", "GET", "/v2/systemsharedmemory/status", "", {}),
    ("shm-status-unknown", "GET", "/v2/systemsharedmemory/region/nope/status", "", {}),
    (
        "shm-register-noregion",
        "POST",
        "/v2/systemsharedmemory/register",
        '{"key":"/x","byte_size":8}',
        {},
    ),
    (
        "shm-register-nokey",
        "POST",
        "/v2/systemsharedmemory/region/r/register",
        '{"byte_size":8}',
        {},
    ),
    ("shm-register-nosize", "POST", "/v2/systemsharedmemory/region/r/register", '{"key":"/x"}', {}),
    (
        "shm-register-badkey",
        "POST",
        "/v2/systemsharedmemory/region/r/register",
        '{"key":5,"byte_size":8}',
        {},
    ),
    (
        "shm-register-badsize",
        "POST",
        "/v2/systemsharedmemory/region/r/register",
        '{"key":"/x","byte_size":-8}',
        {},
    ),
    (
        "shm-register-missing",
        "POST",
        "/v2/systemsharedmemory/region/r/register",
        '{"key":"/tritonhttp-does-not-exist","byte_size":8}',
        {},
    ),
    ("shm-register-empty", "POST", "/v2/systemsharedmemory/region/r/register", "", {}),
    ("shm-unregister", "POST", "/v2/systemsharedmemory/region/nope/unregister", "", {}),
    ("shm-unregister-all", "POST", "/v2/systemsharedmemory/unregister", "", {}),
    ("shm-status-post", "POST", "/v2/systemsharedmemory/status", "", {}),
    (
        "shm-infer-unknown",
        "POST",
        "/v2/models/add_sub/infer",
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
        {},
    ),
    (
        "shm-infer-badregion",
        "POST",
        "/v2/models/add_sub/infer",
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
        {},
    ),
    (
        "shm-out-and-class",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(
            outputs=[
                {
                    "name": "OUTPUT0",
                    "parameters": {"shared_memory_region": "x", "classification": 1},
                }
            ]
        ),
        {},
    ),
    (
        "shm-out-and-binary",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(
            outputs=[
                {
                    "name": "OUTPUT0",
                    "parameters": {"shared_memory_region": "x", "binary_data": True},
                }
            ]
        ),
        {},
    ),
    ("cuda-status", "GET", "/v2/cudasharedmemory/status", "", {}),
    ("cuda-status-unknown", "GET", "/v2/cudasharedmemory/region/nope/status", "", {}),
    ("cuda-register-noregion", "POST", "/v2/cudasharedmemory/register", "{}", {}),
    (
        "cuda-register-nohandle",
        "POST",
        "/v2/cudasharedmemory/region/r/register",
        '{"device_id":0,"byte_size":8}',
        {},
    ),
    (
        "cuda-register-nob64",
        "POST",
        "/v2/cudasharedmemory/region/r/register",
        '{"raw_handle":{},"device_id":0,"byte_size":8}',
        {},
    ),
    (
        "cuda-register-short",
        "POST",
        "/v2/cudasharedmemory/region/r/register",
        '{"raw_handle":{"b64":"AAAA"},"device_id":0,"byte_size":8}',
        {},
    ),
    (
        "cuda-register",
        "POST",
        "/v2/cudasharedmemory/region/r/register",
        j({"raw_handle": {"b64": "A" * 88}, "device_id": 0, "byte_size": 8}),
        {},
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
    (
        "generate",
        "POST",
        "/v2/models/add_sub/generate",
        j({"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}),
        {},
    ),
    (
        "generate-stream",
        "POST",
        "/v2/models/add_sub/generate_stream",
        j({"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}),
        {},
    ),
    (
        "generate-id-params",
        "POST",
        "/v2/models/add_sub/generate",
        j({"id": "g1", "INPUT0": [1, 2, 3, 4], "parameters": {"INPUT1": [1, 1, 1, 1], "x": 1}}),
        {},
    ),
    (
        "generate-scalar",
        "POST",
        "/v2/models/identity_all/generate",
        j({"IN_BOOL": True, "IN_INT64": [1, 2]}),
        {},
    ),
    (
        "generate-bad-shape",
        "POST",
        "/v2/models/add_sub/generate",
        j({"INPUT0": [1, 2, 3], "INPUT1": [1, 1, 1, 1]}),
        {},
    ),
    (
        "generate-dup",
        "POST",
        "/v2/models/add_sub/generate",
        j({"INPUT0": [1, 2, 3, 4], "parameters": {"INPUT0": [1, 1, 1, 1]}}),
        {},
    ),
    (
        "generate-bad-param",
        "POST",
        "/v2/models/add_sub/generate",
        j({"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1], "x": {"a": 1}}),
        {},
    ),
    ("generate-params-notobj", "POST", "/v2/models/add_sub/generate", j({"parameters": 1}), {}),
    ("generate-unknown", "POST", "/v2/models/nope/generate", "{}", {}),
    (
        "generate-encoding",
        "POST",
        "/v2/models/add_sub/generate",
        j({"INPUT0": [1, 2, 3, 4]}),
        {"Content-Encoding": "gzip"},
    ),
    ("generate-model-error", "POST", "/v2/models/error_model/generate", j({"MODE": 0}), {}),
    ("generate-model-invalid", "POST", "/v2/models/error_model/generate", j({"MODE": 1}), {}),
    ("generate-bad-json", "POST", "/v2/models/add_sub/generate", "{", {}),
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
    (
        "nan-shape",
        "POST",
        "/v2/models/identity_all/infer",
        '{"inputs":[{"name":"IN_FP64","datatype":"FP64","shape":[NaN],"data":[1]}]}',
        {},
    ),
    (
        "nan-parameter",
        "POST",
        "/v2/models/add_sub/infer",
        add_with(parameters={"x": "P"}).replace('"P"', "NaN"),
        {},
    ),
    ("nan-id", "POST", "/v2/models/add_sub/infer", add_with(id="I").replace('"I"', "-Inf"), {}),
    (
        "nan-binary-size",
        "POST",
        "/v2/models/add_sub/infer",
        add_with().replace('"data":[1,1,1,1]', '"parameters":{"binary_data_size":NaN}'),
        {},
    ),
    (
        "nan-generate",
        "POST",
        "/v2/models/identity_all/generate",
        '{"IN_FP64":[NaN,-Inf],"IN_INT64":[1],"parameters":{"p":Infinity}}',
        {},
    ),
    ("nan-index", "POST", "/v2/repository/index", '{"ready":NaN}', {}),
    ("nan-log", "POST", "/v2/logging", '{"log_verbose_level":NaN}', {}),
    ("nan-trace", "POST", "/v2/trace/setting", '{"trace_rate":Infinity}', {}),
    (
        "nan-shm-register",
        "POST",
        "/v2/systemsharedmemory/region/r/register",
        '{"key":"/x","offset":0,"byte_size":NaN}',
        {},
    ),
]

_IDS = [c[0] for c in CASES]
assert len(set(_IDS)) == len(_IDS)


def _compare(ours: Reply, real: Reply) -> None:
    assert (ours.status, ours.content_type) == (real.status, real.content_type), (
        ours.body[:600],
        real.body[:600],
    )
    if real.headers.get("content-encoding") in ("gzip", "deflate"):
        assert ours.headers.get("content-encoding") == real.headers["content-encoding"]
        assert zlib.decompress(ours.body, 47) == zlib.decompress(real.body, 47)
    else:
        assert ours.body == real.body
    for h in ("inference-header-content-length", "accept-encoding", "transfer-encoding"):
        assert ours.headers.get(h) == real.headers.get(h), h


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_same_answer(
    case: tuple[str, str, str, Any, dict[str, str]], real_triton: Any, bundled_server: Any
) -> None:
    _, method, path, body, headers = case
    real = exchange(real_triton.url, method, path, body, headers)
    ours = exchange(bundled_server.url, method, path, body, headers)
    _compare(ours, real)
