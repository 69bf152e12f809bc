"""Requests a user sends that the HTTP front and the core answer as real Triton 2.51 does:
the ``binary_data_output`` request parameter next to a list of requested outputs, string
request parameters holding a NUL, and classification labels read from a label file with
CRs, empty lines and bytes that are not UTF-8 (``tests/repos/hunt_front``), and class
counts past 32 bits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ._wire import compare, exchange

ARGS = ("--exit-on-error=false",)

pytestmark = pytest.mark.real_triton

ADD_SUB_INPUTS = [
    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [4, 3, 2, 1]},
]


@pytest.mark.parametrize(
    "output",
    [
        {"name": "OUTPUT0"},
        {"name": "OUTPUT0", "parameters": {}},
        {"name": "OUTPUT0", "parameters": {"classification": 2}},
        {"name": "OUTPUT0", "parameters": {"binary_data": True}},
    ],
    ids=["plain", "empty-parameters", "classification", "binary"],
)
def test_binary_data_output_with_listed_outputs(
    output: dict[str, Any], real_triton: Any, bundled_server: Any
) -> None:
    """``binary_data_output`` is the choice for outputs the request does not list: a
    listed output without ``binary_data`` goes as JSON."""
    body = json.dumps({
        "inputs": ADD_SUB_INPUTS,
        "parameters": {"binary_data_output": True},
        "outputs": [output],
    })  # fmt: skip
    real = exchange(real_triton.url, "POST", "/v2/models/add_sub/infer", body)
    ours = exchange(bundled_server.url, "POST", "/v2/models/add_sub/infer", body)
    compare(ours, real)
    binary = output.get("parameters", {}).get("binary_data", False)
    assert ours.content_type == ("application/octet-stream" if binary else "application/json")


@pytest.mark.parametrize(
    "parameters",
    ['{"s":"a\\u0000b","t":"x"}', '{"s":"\\u0000"}', '{"sequence_id":"ab\\u0000c"}'],
    ids=["custom", "custom-only-nul", "sequence-id"],
)
def test_string_parameter_with_a_nul(
    parameters: str, real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """Triton keeps a string parameter as a C string: the model sees it cut at the NUL
    (``param_echo`` shows the correlation id and the parameters it got)."""
    repo = model_repo("hunt_front")
    real, ours = real_triton_factory(repo, *ARGS), bundled_server_factory(repo, *ARGS)
    body = (
        '{"inputs":[{"name":"IN","datatype":"INT32","shape":[1],"data":[1]}],'
        f'"outputs":[{{"name":"INFO"}}],"parameters":{parameters}}}'
    )
    r = exchange(real.url, "POST", "/v2/models/param_echo/infer", body)
    o = exchange(ours.url, "POST", "/v2/models/param_echo/infer", body)
    compare(o, r)
    assert o.status == 200
    assert "\\u0000" not in o.json()["outputs"][0]["data"][0]


#: tests/repos/hunt_front/labelled/labels.txt, line by line (split at "\n" only)
LABELS = [b"zero\r", b"", b"\x0ctwo\x1c", b"thr\xffee", "\u00e9\u2028x".encode()]


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_classification_labels_as_read(
    binary: bool, real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """Label lines are split at newlines only and kept as bytes (a CR, a form feed, a
    U+2028 and a byte that is not UTF-8 stay in the label); an empty label is left out
    (``value:index``, no trailing colon)."""
    repo = model_repo("hunt_front")
    real, ours = real_triton_factory(repo, *ARGS), bundled_server_factory(repo, *ARGS)
    body = json.dumps({
        "inputs": [{"name": "IN", "datatype": "INT32", "shape": [2, 6],
                    "data": [6, 5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 6]}],
        "outputs": [{"name": "OUT", "parameters": {"classification": 6, "binary_data": binary}}],
    })  # fmt: skip
    r = exchange(real.url, "POST", "/v2/models/labelled/infer", body)
    o = exchange(ours.url, "POST", "/v2/models/labelled/infer", body)
    compare(o, r)
    assert o.status == 200
    if binary:
        for entry in (b"6:0:" + LABELS[0], b"5:1", b"4:2:" + LABELS[2], b"3:3:" + LABELS[3]):
            assert len(entry).to_bytes(4, "little") + entry in o.body
    else:
        assert b'"6:0:zero\\r","5:1","4:2:\\f' in o.body


def test_classification_of_an_empty_output(bundled_server: Any) -> None:
    """Real Triton 2.51 crashes on this request (docs/server.md, "Deliberate
    differences"); ours answers an empty classification."""
    body = json.dumps({
        "inputs": [{"name": "IN_INT32", "datatype": "INT32", "shape": [0], "data": []}],
        "outputs": [{"name": "OUT_INT32", "parameters": {"classification": 2}}],
    })  # fmt: skip
    reply = exchange(bundled_server.url, "POST", "/v2/models/identity_all/infer", body)
    assert reply.status == 200
    assert reply.json()["outputs"] == [
        {"name": "OUT_INT32", "datatype": "BYTES", "shape": [0], "data": []}
    ]


@pytest.mark.parametrize("k", [2**32, 2**32 + 1, 2**63, 2**64 - 1])
def test_class_count_past_32_bits(k: int, real_triton: Any, bundled_server: Any) -> None:
    """Triton keeps the class count as 32 bits: ``2**32`` asks no classification,
    ``2**32 + 1`` one class."""
    body = json.dumps({
        "inputs": [{"name": "IN_INT32", "datatype": "INT32", "shape": [3], "data": [1, 3, 2]}],
        "outputs": [{"name": "OUT_INT32", "parameters": {"classification": k}}],
    })  # fmt: skip
    real = exchange(real_triton.url, "POST", "/v2/models/identity_all/infer", body)
    ours = exchange(bundled_server.url, "POST", "/v2/models/identity_all/infer", body)
    compare(ours, real)
    assert len(ours.json()["outputs"][0]["data"]) == (1 if k == 2**32 + 1 else 3)
