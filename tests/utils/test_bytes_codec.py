"""BYTES codec: property tests and equivalence with tritonclient.utils."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import tritonclient.http as ref
import tritonclient.utils as tcu
from _dtypes import NUMPY_NUMERIC
from hypothesis import given
from hypothesis import strategies as st

import tritonhttp
from tritonhttp import utils
from tritonhttp.utils._bytes import BytesFramingError, unpack_items

elements = st.lists(st.binary(max_size=40), max_size=60)


def reference_frame(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(x)) + x for x in items)


@given(elements)
def test_serialize_matches_the_wire_format(items: list[bytes]) -> None:
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    out = utils.serialize_byte_tensor(arr)
    if not items:
        assert out.shape == (0,) and out.dtype == object
        return
    assert out.shape == () and out.dtype == object
    assert out.item() == reference_frame(items)
    assert out.item() == tcu.serialize_byte_tensor(arr).item()


# Elements without NULs, more than the small-tensor loop handles: the framing joins them
# with NULs and writes the lengths into the NULs' places.
texts = st.lists(
    st.binary(max_size=300).map(lambda b: b.replace(b"\0", b"a")), min_size=17, max_size=80
)


@given(texts, st.lists(st.binary(min_size=1, max_size=8), max_size=3))
def test_elements_without_nuls_frame_like_the_reference(
    items: list[bytes], extras: list[bytes]
) -> None:
    items = items + extras  # some with NULs after the first element: the masked path
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    framed = utils.serialize_byte_tensor(arr).item() if items else b""
    assert framed == reference_frame(items)
    assert utils.deserialize_bytes_tensor(framed).tolist() == items


@given(elements)
def test_round_trip(items: list[bytes]) -> None:
    framed = reference_frame(items)
    got = utils.deserialize_bytes_tensor(framed)
    assert got.dtype == object and got.ndim == 1
    assert got.tolist() == items
    assert got.tolist() == tcu.deserialize_bytes_tensor(framed).tolist()


@given(st.integers(0, 12), st.integers(0, 50))
def test_equal_length_fast_path(length: int, n: int) -> None:
    items = [bytes([i % 251]) * length for i in range(n)]
    assert unpack_items(reference_frame(items)) == items


@given(st.lists(st.binary(max_size=10), min_size=1, max_size=20), st.data())
def test_truncated_buffers_raise_a_clear_error(items: list[bytes], data: st.DataObject) -> None:
    framed = reference_frame(items)
    cut = data.draw(st.integers(1, len(framed)))
    truncated = framed[: len(framed) - cut]
    try:
        parsed = unpack_items(truncated)
    except BytesFramingError as e:
        assert "BYTES" in str(e)
    else:  # cutting exactly at an element boundary leaves a valid, shorter buffer
        assert parsed == items[: len(parsed)]
        assert reference_frame(parsed) == truncated
    with pytest.raises(utils.InferenceServerException):
        utils.deserialize_bytes_tensor(framed + b"\x05\x00")


def test_object_elements_are_stringified_like_tritonclient() -> None:
    arr = np.array([1, 2.5, "str", b"bytes", None, "h\u00e9"], dtype=object).reshape(2, 3)
    assert utils.serialize_byte_tensor(arr).item() == tcu.serialize_byte_tensor(arr).item()


def test_fixed_width_bytes_lose_trailing_nuls_like_numpy() -> None:
    arr = np.array([b"a\x00\x00", b"\x00b", b""], dtype="S3")
    assert utils.serialize_byte_tensor(arr).item() == tcu.serialize_byte_tensor(arr).item()


def test_invalid_dtype_and_sizes() -> None:
    with pytest.raises(utils.InferenceServerException, match="invalid datatype"):
        utils.serialize_byte_tensor(np.arange(3))
    arr = np.array(["\u00e9", b"ab"], dtype=object)
    assert utils.serialized_byte_size(arr) == tcu.serialized_byte_size(arr) == 3
    with pytest.raises(utils.InferenceServerException, match=r"np\.object_"):
        utils.serialized_byte_size(np.arange(3))


@pytest.mark.parametrize(
    "dtype",
    [
        *NUMPY_NUMERIC,
        np.object_,
        "S5",
        "U3",
        np.complex64,
        ">i4",
    ],
)
def test_dtype_mapping_matches_tritonclient(dtype: object) -> None:
    assert utils.np_to_triton_dtype(np.dtype(dtype)) == tcu.np_to_triton_dtype(np.dtype(dtype))


@pytest.mark.parametrize(
    "name",
    [
        "BOOL",
        "INT8",
        "INT16",
        "INT32",
        "INT64",
        "UINT8",
        "UINT16",
        "UINT32",
        "UINT64",
        "FP16",
        "FP32",
        "FP64",
        "BF16",
        "BYTES",
        "int32",
        "FP8",
        "",
    ],
)
def test_triton_to_np_matches_tritonclient(name: str) -> None:
    assert utils.triton_to_np_dtype(name) == tcu.triton_to_np_dtype(name)


@pytest.mark.parametrize("count", [3, 40], ids=["few", "many"])
@pytest.mark.parametrize(
    "odd", [np.bytes_(b"npb"), bytearray(b"ba"), "text", np.str_("nps"), 7, 2.5, None]
)
def test_elements_that_are_not_exactly_bytes_go_as_their_str(count: int, odd: object) -> None:
    """Only exact ``bytes`` go as they are; anything else, a subclass of bytes such as
    ``np.bytes_`` included, as ``str(x)`` in UTF-8, as tritonclient (and Triton's stub)
    write it: in the serializer, in a binary input and in a JSON input alike."""
    arr = np.empty(count, dtype=object)
    arr[:] = [b"w%d" % i for i in range(count)]
    arr[count // 2] = odd
    expected = tcu.serialize_byte_tensor(arr).item()
    assert str(odd).encode() in expected
    assert utils.serialize_byte_tensor(arr).item() == expected
    for binary in (True, False):
        ours = tritonhttp.InferInput("X", [count], "BYTES").set_data_from_numpy(arr, binary)
        theirs = ref.InferInput("X", [count], "BYTES")
        theirs.set_data_from_numpy(arr, binary_data=binary)
        assert ours._get_binary_data() == theirs._get_binary_data()
        assert ours._get_tensor() == theirs._get_tensor()
