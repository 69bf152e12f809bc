"""Triton's BYTES tensor framing, vectorized.

Wire format: for every element in row-major order, a 4-byte little-endian unsigned
length followed by that many raw bytes; no padding, no element count.

Both directions avoid per-element Python bytecode on the hot path: serialization is one
``bytes.join`` over interleaved length prefixes (made by numpy) and payloads;
deserialization takes a numpy fast path when every element has the same length and a
tight scan otherwise (the layout is inherently sequential).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

_U32 = struct.Struct("<I")
_MAX_ELEMENT = 0xFFFFFFFF


class BytesFramingError(ValueError):
    """A BYTES buffer is malformed (truncated element or length prefix)."""


def _as_bytes(x: object) -> bytes:
    return x if isinstance(x, bytes) else str(x).encode("utf-8")


def element_list(array: np.ndarray[Any, Any]) -> list[bytes]:
    """The elements of an object or ``S`` array, in C order, as ``bytes``.

    Object elements that are not bytes become ``str(x).encode("utf-8")`` (as Triton's
    clients do); ``S`` elements lose trailing NULs (numpy semantics).
    """
    items: list[Any] = array.ravel(order="C").tolist()
    if array.dtype.kind == "S":
        return items
    if all(map(bytes.__instancecheck__, items)):
        return items
    return [_as_bytes(x) for x in items]


def pack_items(items: Sequence[bytes]) -> bytes:
    """Frame already-encoded elements: ``<u32 len><bytes>`` each, concatenated."""
    n = len(items)
    if n == 0:
        return b""
    lengths = np.fromiter(map(len, items), dtype=np.uint64, count=n)
    if int(lengths.max()) > _MAX_ELEMENT:
        raise ValueError("a BYTES element is larger than 4 GiB")
    prefixes: list[bytes] = lengths.astype("<u4").view("V4").tolist()
    parts: list[bytes] = [b""] * (2 * n)
    parts[0::2] = prefixes
    parts[1::2] = items
    return b"".join(parts)


def serialize_bytes_array(array: np.ndarray[Any, Any]) -> bytes:
    """Serialize an object or ``S`` numpy array to Triton's BYTES wire format."""
    return pack_items(element_list(array))


def framed_size(array: np.ndarray[Any, Any]) -> int:
    """Byte size of ``serialize_bytes_array(array)`` without building it."""
    items = element_list(array)
    return 4 * len(items) + sum(map(len, items))


def _equal_length(buf: bytes, first_len: int, count: int | None) -> list[bytes] | None:
    stride = 4 + first_len
    total = len(buf)
    if total % stride:
        return None
    n = total // stride
    if count is not None and n != count:
        return None
    rows = np.frombuffer(buf, dtype=np.uint8).reshape(n, stride)
    prefixes = np.ascontiguousarray(rows[:, :4]).view("<u4").ravel()
    if not bool((prefixes == first_len).all()):
        return None
    if first_len == 0:
        return [b""] * n
    payload = np.ascontiguousarray(rows[:, 4:]).view(f"V{first_len}").ravel()
    result: list[bytes] = payload.tolist()
    return result


def unpack_items(buffer: bytes | bytearray | memoryview, count: int | None = None) -> list[bytes]:
    """Split a BYTES buffer into its elements.

    ``count`` (when given) is the expected number of elements; the whole buffer must be
    consumed either way. Raises :class:`BytesFramingError` on malformed input.
    """
    buf = buffer if isinstance(buffer, bytes) else bytes(buffer)
    end = len(buf)
    if end == 0:
        if count:
            raise BytesFramingError(f"expected {count} BYTES elements, got an empty buffer")
        return []
    if end < 4:
        raise BytesFramingError(
            f"incomplete BYTES length indicator: expecting 4 bytes but only {end} available"
        )
    fast = _equal_length(buf, _U32.unpack_from(buf, 0)[0], count)
    if fast is not None:
        return fast
    unpack = _U32.unpack_from
    items: list[bytes] = []
    append = items.append
    off = 0
    while off < end:
        if off + 4 > end:
            raise BytesFramingError(
                f"incomplete BYTES length indicator at offset {off}: expecting 4 bytes "
                f"but only {end - off} available"
            )
        (length,) = unpack(buf, off)
        start = off + 4
        off = start + length
        if off > end:
            raise BytesFramingError(
                f"BYTES element {len(items)} at offset {start} claims {length} bytes "
                f"but only {end - start} remain"
            )
        append(buf[start:off])
    if count is not None and len(items) != count:
        raise BytesFramingError(f"expected {count} BYTES elements, got {len(items)}")
    return items


def to_object_array(items: list[bytes], shape: Sequence[int] | None = None) -> np.ndarray[Any, Any]:
    """A 1-D (or ``shape``-d) object array holding ``items``."""
    arr = np.empty(len(items), dtype=np.object_)
    arr[:] = items
    return arr if shape is None else arr.reshape(shape)


def deserialize_bytes_array(
    buffer: bytes | bytearray | memoryview, shape: Sequence[int] | None = None
) -> np.ndarray[Any, Any]:
    """Parse a BYTES buffer into an object array of ``bytes`` (1-D unless ``shape``)."""
    count = None if shape is None else int(np.prod(shape, dtype=np.int64))
    return to_object_array(unpack_items(buffer, count), shape)


def framed_extent(
    buffer: bytes | bytearray | memoryview | mmap.mmap, count: int, offset: int = 0
) -> int:
    """End offset of ``count`` framed elements that start at ``offset`` in ``buffer``.

    Unlike :func:`unpack_items` the buffer may continue past the last element (a shared
    memory region holding a tensor followed by other data). Raises
    :class:`BytesFramingError` when the elements run past the end of the buffer.
    """
    view = memoryview(buffer).cast("B")
    end = len(view)
    if count <= 0:
        return offset
    if offset + 4 > end:
        raise BytesFramingError(
            f"incomplete BYTES length indicator at offset {offset}: expecting 4 bytes "
            f"but only {max(end - offset, 0)} available"
        )
    # Fast path: every element as long as the first (fixed-width strings, ids, ...).
    first: int = _U32.unpack_from(view, offset)[0]
    stride = 4 + first
    if offset + count * stride <= end:
        rows = np.frombuffer(view, dtype=np.uint8, count=count * stride, offset=offset)
        prefixes = np.ascontiguousarray(rows.reshape(count, stride)[:, :4]).view("<u4")
        if bool((prefixes == first).all()):
            return offset + count * stride
    unpack = _U32.unpack_from
    off = offset
    for index in range(count):
        if off + 4 > end:
            raise BytesFramingError(
                f"incomplete BYTES length indicator at offset {off}: expecting 4 bytes "
                f"but only {end - off} available"
            )
        length: int = unpack(view, off)[0]
        start = off + 4
        off = start + length
        if off > end:
            raise BytesFramingError(
                f"BYTES element {index} at offset {start} claims {length} bytes "
                f"but only {end - start} remain"
            )
    return off
