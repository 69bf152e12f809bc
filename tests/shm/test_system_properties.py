"""Property tests: offsets and bounds of system shared-memory reads and writes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from shm_helpers import new_key, region

from tritonhttp.utils import serialize_byte_tensor
from tritonhttp.utils import shared_memory as shm

DTYPES = st.sampled_from(
    [np.dtype(t) for t in ("bool", "i1", "i2", "<i4", "<i8", "u1", "<u2", "<u4", "<f4", "<f8")]
)
arrays = DTYPES.flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
)


@settings(max_examples=150, deadline=None)
@given(
    size=st.integers(1, 256),
    values=st.lists(arrays, min_size=1, max_size=3),
    offset=st.integers(0, 300),
)
def test_set_succeeds_exactly_when_it_fits_and_never_writes_outside(
    size: int, values: list[np.ndarray], offset: int
) -> None:
    total = sum(v.nbytes for v in values)
    with region("p", new_key(), size) as h:
        raw = shm.get_contents_as_numpy(h, np.uint8, [size])
        raw[:] = 0xAB
        if offset + total <= size:
            shm.set_shared_memory_region(h, values, offset=offset)
            at = offset
            for v in values:
                got = shm.get_contents_as_numpy(h, v.dtype, v.shape, offset=at)
                assert got.tobytes() == v.tobytes()
                at += v.nbytes
            assert (raw[:offset] == 0xAB).all() and (raw[offset + total :] == 0xAB).all()
        else:
            try:
                shm.set_shared_memory_region(h, values, offset=offset)
            except shm.SharedMemoryException:
                pass
            else:
                raise AssertionError("an overflowing write was accepted")
            assert (raw == 0xAB).all(), "a refused write must not write anything"
        del raw


@settings(max_examples=150, deadline=None)
@given(
    size=st.integers(1, 256),
    dtype=DTYPES,
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
    offset=st.integers(0, 300),
)
def test_get_succeeds_exactly_when_it_fits(
    size: int, dtype: np.dtype, shape: tuple[int, ...], offset: int
) -> None:
    needed = int(np.prod(shape)) * dtype.itemsize
    with region("p", new_key(), size) as h:
        fits = offset + needed <= size
        try:
            got = shm.get_contents_as_numpy(h, dtype, list(shape), offset=offset)
        except shm.SharedMemoryException:
            assert not fits
        else:
            assert fits and got.shape == shape and got.dtype == dtype
            del got


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(st.binary(max_size=20), min_size=1, max_size=12),
    offset=st.integers(0, 40),
    slack=st.integers(-8, 8),
)
def test_bytes_round_trip_at_any_offset_and_truncation_is_refused(
    items: list[bytes], offset: int, slack: int
) -> None:
    value = np.empty(len(items), dtype=object)
    value[:] = items
    framed = serialize_byte_tensor(value)
    framed_size = len(framed.item())
    size = max(1, offset + framed_size + slack)
    with region("p", new_key(), size) as h:
        if offset + framed_size <= size:
            shm.set_shared_memory_region(h, [framed], offset=offset)
            got = shm.get_contents_as_numpy(h, np.object_, [len(items)], offset=offset)
            assert got.tolist() == items
        else:
            try:
                shm.set_shared_memory_region(h, [framed], offset=offset)
            except shm.SharedMemoryException:
                pass
            else:
                raise AssertionError("an overflowing BYTES write was accepted")
            # Whatever the region holds, a read is either a valid parse or a clean error.
            try:
                got = shm.get_contents_as_numpy(h, np.object_, [len(items)], offset=offset)
            except shm.SharedMemoryException:
                pass
            else:
                assert len(got) == len(items)
