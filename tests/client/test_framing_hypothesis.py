"""Property tests of the codecs: BYTES framing, request bodies and response parsing.

Every property compares against an independent reference: the format written out with
``struct`` in the test, and tritonclient's own functions on the same data.
"""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import rapidjson
import tritonclient.http as ref_http
import tritonclient.utils as ref_utils
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tritonhttp
from tritonhttp import utils
from tritonhttp.utils._bytes import (
    BytesFramingError,
    _unpack_vectorized,
    pack_items,
    unpack_array,
    unpack_items,
)


def frame(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(x)) + x for x in items)


# -- BYTES framing, including the vectorized paths ---------------------------------------

short_text = st.binary(min_size=0, max_size=12).map(lambda b: b.replace(b"\x00", b"z"))
# Non-empty and NUL-free (the vectorized parse applies), some long ones.
text_items = st.one_of(
    st.binary(min_size=1, max_size=12).map(lambda b: b.replace(b"\x00", b"z")),
    st.sampled_from([b"s" * 300, b"t" * 1000]),
)
# Lengths that are multiples of 256 put a zero in the prefix's low byte.
awkward_items = st.one_of(text_items, st.sampled_from([b"q" * 256, b"r" * 512]))
many_items = st.one_of(
    st.lists(st.binary(max_size=12), max_size=1500),  # arbitrary bytes, NULs included
    st.lists(short_text, min_size=300, max_size=1500),  # text-like with empty items
    st.lists(text_items, min_size=500, max_size=1500),  # the vectorized parse applies
    st.lists(awkward_items, min_size=500, max_size=1500),
    st.lists(st.binary(min_size=250, max_size=600), min_size=20, max_size=40),  # long items
    st.lists(st.sampled_from([b"", b"\x00", b"a\x00", b"\x00" * 5, b"ab"]), max_size=2000),
)


@settings(max_examples=60, deadline=None)
@given(many_items)
def test_pack_matches_the_wire_format(items: list[bytes]) -> None:
    assert pack_items(items) == frame(items)


@settings(max_examples=60, deadline=None)
@given(many_items)
def test_unpack_round_trips(items: list[bytes]) -> None:
    framed = frame(items)
    assert unpack_items(framed) == items
    assert unpack_items(framed, len(items)) == items
    array = unpack_array(bytearray(framed))
    assert array.dtype == object and array.shape == (len(items),)
    assert array.tolist() == ref_utils.deserialize_bytes_tensor(framed).tolist()
    if items:
        with pytest.raises(BytesFramingError):
            unpack_items(framed, len(items) + 1)


@settings(max_examples=40, deadline=None)
@given(
    st.one_of(
        st.lists(text_items, min_size=700, max_size=1200),
        st.lists(awkward_items, min_size=700, max_size=1200),
    )
)
def test_vectorized_parse_applies_to_text(items: list[bytes]) -> None:
    framed = frame(items)
    array = _unpack_vectorized(framed, len(items))
    if any(len(x) % 256 == 0 for x in items):
        assert array is None or array.tolist() == items  # may decline, never be wrong
    else:
        assert array is not None and array.tolist() == items
        assert array.dtype == object and all(type(x) is bytes for x in array)


# Short NUL-free elements (words, ids): rows gathered and trimmed column by column.
narrow_items = st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\x00", b"n"))


@settings(max_examples=40, deadline=None)
@given(st.lists(narrow_items, min_size=400, max_size=1500))
def test_vectorized_parse_of_short_elements(items: list[bytes]) -> None:
    array = _unpack_vectorized(frame(items), len(items))
    assert array is not None and array.tolist() == items


@settings(max_examples=50, deadline=None)
@given(st.lists(text_items, min_size=400, max_size=1200), st.data())
def test_corrupted_buffers_never_parse_wrongly(items: list[bytes], data: st.DataObject) -> None:
    """Flip one byte: the parse either fails or is exactly the struct-level parse."""
    framed = bytearray(frame(items))
    position = data.draw(st.integers(0, len(framed) - 1))
    framed[position] = data.draw(st.integers(0, 255))
    expected: list[bytes] | None = []
    offset = 0
    while offset < len(framed):
        if offset + 4 > len(framed):
            expected = None
            break
        (n,) = struct.unpack_from("<I", framed, offset)
        if offset + 4 + n > len(framed):
            expected = None
            break
        assert expected is not None
        expected.append(bytes(framed[offset + 4 : offset + 4 + n]))
        offset += 4 + n
    if expected is None:
        with pytest.raises(BytesFramingError):
            unpack_items(framed)
    else:
        assert unpack_items(framed) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=6), st.text(max_size=6), st.integers()), max_size=80))
def test_serialize_byte_tensor_matches_tritonclient(items: list[Any]) -> None:
    array = np.empty(len(items), dtype=object)
    array[:] = items
    ours, ref = utils.serialize_byte_tensor(array), ref_utils.serialize_byte_tensor(array)
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    if ours.size:
        assert ours.item() == ref.item()


# -- request bodies ----------------------------------------------------------------------

NUMERIC = ["BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"]
FLOATS = ["FP16", "FP32", "FP64", "BF16"]


@st.composite
def tensors(draw: st.DrawFn) -> tuple[str, np.ndarray[Any, Any], bool]:
    datatype = draw(st.sampled_from([*NUMERIC, *FLOATS, "BYTES"]))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    binary = draw(st.booleans()) if datatype != "BF16" else True
    if datatype == "BYTES":
        elements = st.one_of(st.binary(max_size=5), st.text(max_size=5))
        if not binary:
            elements = st.text(max_size=5)
        array = draw(hnp.arrays(object, shape, elements=elements))
    elif datatype == "BF16":
        array = draw(hnp.arrays(np.float32, shape, elements=st.floats(-1e3, 1e3, width=32)))
        array = array.astype(ml_dtypes.bfloat16)
    else:
        dtype = utils.triton_to_np_dtype(datatype)
        array = draw(hnp.arrays(np.dtype(dtype), shape))
    if draw(st.booleans()) and array.ndim >= 2:
        array = np.asfortranarray(array)  # non-contiguous in C order
    return datatype, array, binary


@settings(max_examples=200, deadline=None)
@given(
    st.lists(tensors(), max_size=4),
    st.booleans(),
    st.sampled_from(["", "id-1", "\u00e9"]),
    st.sampled_from([0, 5, "s"]),
    st.sampled_from([None, 0, 100]),
    st.sampled_from([None, {}, {"a": 1, "b": [1.5, "x"], "c": None}]),
)
def test_request_body_is_byte_identical(
    specs: list[tuple[str, np.ndarray[Any, Any], bool]],
    request_outputs: bool,
    request_id: str,
    sequence_id: Any,
    timeout: Any,
    parameters: Any,
) -> None:
    bodies = []
    for m in (tritonhttp, ref_http):
        inputs = [
            m.InferInput(f"I{i}", list(a.shape), t).set_data_from_numpy(a, binary_data=b)
            for i, (t, a, b) in enumerate(specs)
        ]
        outputs = [m.InferRequestedOutput("O", binary_data=False)] if request_outputs else None
        bodies.append(
            m.InferenceServerClient.generate_request_body(
                inputs,
                outputs,
                request_id=request_id,
                sequence_id=sequence_id,
                timeout=timeout,
                parameters=parameters,
            )
        )
    assert bodies[0] == bodies[1]


# -- response parsing --------------------------------------------------------------------


@st.composite
def responses(draw: st.DrawFn) -> tuple[bytes, int | None, list[str]]:
    specs = draw(st.lists(tensors(), min_size=1, max_size=4))
    outputs = []
    binary_parts = []
    for i, (datatype, array, binary) in enumerate(specs):
        output: dict[str, Any] = {"name": f"O{i}", "datatype": datatype, "shape": list(array.shape)}
        if binary:
            if datatype == "BYTES":
                raw = frame([x if isinstance(x, bytes) else x.encode() for x in array.ravel()])
            else:
                raw = np.ascontiguousarray(array).tobytes()
            output["parameters"] = {"binary_data_size": len(raw)}
            binary_parts.append(raw)
        else:
            output["data"] = array.ravel().tolist()
        outputs.append(output)
    header = json.dumps({"model_name": "m", "model_version": "1", "outputs": outputs}).encode()
    if not binary_parts:
        return header, None, [o["name"] for o in outputs]
    return header + b"".join(binary_parts), len(header), [o["name"] for o in outputs]


@settings(max_examples=200, deadline=None)
@given(responses(), st.sampled_from([None, "gzip", "deflate"]), st.booleans())
def test_response_parsing_matches_tritonclient(
    response: tuple[bytes, int | None, list[str]], encoding: str | None, as_str_length: bool
) -> None:
    body, header_length, names = response
    if encoding == "gzip":
        body = gzip.compress(body)
    elif encoding == "deflate":
        body = zlib.compress(body)
    length: Any = str(header_length) if (as_str_length and header_length) else header_length
    ours = tritonhttp.InferResult.from_response_body(bytearray(body), False, length, encoding)
    ref = ref_http.InferResult.from_response_body(body, False, length, encoding)
    # (compared as JSON text: NaN != NaN)
    assert rapidjson.dumps(ours.get_response()) == rapidjson.dumps(ref.get_response())
    for name in [*names, "missing"]:
        a, b = ours.as_numpy(name), ref.as_numpy(name)
        if b is None:
            assert a is None
            continue
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype == object:
            assert a.tolist() == b.tolist()
        else:
            assert a.tobytes() == b.tobytes()
            if a.size and ours.get_output(name).get("parameters"):
                assert a.flags.writeable  # a view of the (writable) received buffer


def test_binary_outputs_are_views_of_the_body() -> None:
    header = json.dumps(
        {
            "outputs": [
                {
                    "name": "A",
                    "datatype": "FP32",
                    "shape": [2],
                    "parameters": {"binary_data_size": 8},
                },
                {
                    "name": "B",
                    "datatype": "INT16",
                    "shape": [1, 2],
                    "parameters": {"binary_data_size": 4},
                },
            ]
        }
    ).encode()
    body = bytearray(
        header + np.array([1, 2], np.float32).tobytes() + np.array([3, 4], np.int16).tobytes()
    )
    result = tritonhttp.InferResult.from_response_body(body, header_length=len(header))
    a, b = result.as_numpy("A"), result.as_numpy("B")
    assert np.shares_memory(a, np.frombuffer(body, np.uint8))
    a[0] = 42  # writable view: writes through to the buffer
    assert np.frombuffer(body, np.float32, 1, len(header))[0] == 42
    assert b.tolist() == [[3, 4]]
