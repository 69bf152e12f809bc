"""framed_extent (added to the shared BYTES codec for shared-memory reads): properties."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tritonhttp.utils._bytes import BytesFramingError, framed_extent, unpack_items


def frame(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(x)) + x for x in items)


@given(
    st.binary(max_size=16),
    st.lists(st.binary(max_size=12), max_size=30),
    st.binary(max_size=16),
    st.booleans(),
)
def test_extent_ends_exactly_after_the_elements(
    before: bytes, items: list[bytes], after: bytes, same_length: bool
) -> None:
    if same_length:
        items = [x[:1].ljust(1, b"x") for x in items]  # the numpy fast path
    buffer = before + frame(items) + after
    end = framed_extent(buffer, len(items), len(before))
    assert end == len(before) + len(frame(items))
    assert unpack_items(buffer[len(before) : end], len(items)) == items


@given(st.lists(st.binary(max_size=12), min_size=1, max_size=20), st.data())
def test_truncated_buffers_are_refused(items: list[bytes], data: st.DataObject) -> None:
    framed = frame(items)
    cut = data.draw(st.integers(0, len(framed) - 1))
    with pytest.raises(BytesFramingError):
        framed_extent(framed[:cut], len(items))


def test_zero_elements_end_where_they_start() -> None:
    assert framed_extent(b"", 0) == 0
    assert framed_extent(b"abc", 0, 2) == 2
