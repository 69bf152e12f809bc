"""Triton's BYTES tensor framing, vectorized.

Wire format: for every element in row-major order, a 4-byte little-endian unsigned
length followed by that many raw bytes; no padding, no element count.

Both directions avoid per-element Python bytecode on the hot path:

* serialization joins the elements with four NULs between them, which puts every
  element where the framing wants it, and writes the lengths into the NULs' places
  (elements without NULs); otherwise it writes the length prefixes and the joined
  payload into one numpy buffer through a mask of the prefix bytes (short elements) or
  joins prefixes interleaved with the elements (long ones);
* deserialization takes a numpy fast path when every element has the same length, then a
  vectorized guess-and-verify parse (element starts guessed from the zero bytes of the
  length prefixes, then checked to form exactly the chain of lengths from offset 0 to
  the end, so a wrong guess can never be accepted; the prefixes and the elements are
  then gathered through views with a record at every byte offset), and a tight scan
  otherwise (the layout is inherently sequential).

Neither builds an index array with an entry per byte: on 100k-element tensors the
temporaries, not the arithmetic, dominate the cost. Serialization places bytes through
masks; deserialization gathers whole records, one index per element
(:func:`_at_every_offset`).
"""

from __future__ import annotations

import array
import mmap
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

_U32 = struct.Struct("<I")
_SEPARATOR = b"\0\0\0\0"
_MAX_ELEMENT = 0xFFFFFFFF
_SMALL = 16  # up to this many elements a plain loop beats numpy's fixed costs
_LONG = 64  # average element length from which interleaving beats scattering
_VECTORIZE_FROM = 4096  # buffer size from which the vectorized parse pays off


class BytesFramingError(ValueError):
    """A BYTES buffer is malformed (truncated element or length prefix)."""


def flat_items(array: np.ndarray[Any, Any]) -> list[Any]:
    """The elements of ``array``'s data in C order, as Python objects. A subclass
    (masked array, ``np.matrix``) gives the elements of its data, as tritonclient's
    ``np.nditer`` walk does: masked elements as stored, a matrix element by element."""
    if type(array) is not np.ndarray:
        array = np.asarray(array)
    items: list[Any] = array.ravel().tolist()
    return items


def element_list(array: np.ndarray[Any, Any]) -> list[bytes]:
    """The elements of an object or ``S`` array (see :func:`flat_items`) as ``bytes``.

    An object element that is exactly ``bytes`` goes as it is; any other, a subclass such
    as ``np.bytes_`` included, becomes ``str(x).encode("utf-8")`` (as Triton's clients
    do); ``S`` elements lose trailing NULs (numpy semantics).
    """
    items = flat_items(array)
    if array.dtype.kind == "S" or [*map(type, items)].count(bytes) == len(items):
        return items
    return [x if type(x) is bytes else str(x).encode("utf-8") for x in items]


def _lengths(items: Sequence[bytes]) -> np.ndarray[Any, Any]:
    """The elements' lengths as little-endian ``u4`` (the prefixes), counted in C."""
    try:
        counted = array.array("I", map(len, items))  # C unsigned int: 4 bytes
    except OverflowError:
        raise ValueError("a BYTES element is larger than 4 GiB") from None
    return np.frombuffer(counted, dtype=np.uint32).astype("<u4", copy=False)


def pack_items(items: Sequence[bytes]) -> bytes:
    """Frame already-encoded elements: ``<u32 len><bytes>`` each, concatenated."""
    n = len(items)
    if n == 0:
        return b""
    if n <= _SMALL:
        parts: list[bytes] = []
        for item in items:
            if len(item) > _MAX_ELEMENT:
                raise ValueError("a BYTES element is larger than 4 GiB")
            parts += (_U32.pack(len(item)), item)
        return b"".join(parts)
    if b"\0" not in items[0]:
        framed = _framed_by_separators(items)
        if framed is not None:
            return framed
    prefixes = _lengths(items)
    payload = b"".join(items)
    if len(payload) >= _LONG * n:
        # Long elements: interleave the prefixes with the elements, one join.
        interleaved: list[bytes] = [b""] * (2 * n)
        interleaved[0::2] = prefixes.view("V4").tolist()
        interleaved[1::2] = items
        return b"".join(interleaved)
    # Short elements: prefixes and payload bytes placed into one buffer by a mask.
    total = 4 * n + len(payload)
    starts = np.zeros(n, dtype=np.int64)
    steps = prefixes[:-1].astype(np.int64)
    steps += 4
    np.cumsum(steps, out=starts[1:])
    is_prefix = _prefix_mask(starts, total)
    out = np.empty(total, dtype=np.uint8)
    out[is_prefix] = prefixes.view(np.uint8)
    out[~is_prefix] = np.frombuffer(payload, dtype=np.uint8)
    return out.tobytes()


def _framed_by_separators(items: Sequence[bytes]) -> bytes | None:
    """The framing built from ``items`` joined by four NULs, or None if an element holds
    a NUL.

    Joined that way (with four more NULs in front), every element already sits where
    the framing puts it, and the NULs are exactly the prefixes' places: their positions
    give the lengths, written in with one masked assignment.
    """
    n = len(items)
    joined = _SEPARATOR.join(items)
    total = len(joined) + 4
    out = np.empty(total, dtype=np.uint8)
    out[:4] = 0
    out[4:] = np.frombuffer(joined, dtype=np.uint8)
    is_prefix = out == 0
    places = np.flatnonzero(is_prefix)
    if places.size != 4 * n:  # NULs inside the elements
        return None
    starts = places[::4]
    lengths = np.empty(n, dtype=np.int64)
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1] = total - starts[-1]
    lengths -= 4
    if total > _MAX_ELEMENT and int(lengths.max()) > _MAX_ELEMENT:
        raise ValueError("a BYTES element is larger than 4 GiB")
    out[is_prefix] = lengths.astype("<u4").view(np.uint8)
    return out.tobytes()


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
    # two sampled prefixes rule out most variable-length buffers before the full check
    if _U32.unpack_from(buf, total - stride)[0] != first_len:
        return None
    if _U32.unpack_from(buf, (n // 2) * stride)[0] != first_len:
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


def _prefix_mask(starts: np.ndarray[Any, Any], total: int) -> np.ndarray[Any, Any]:
    """Boolean mask of ``total`` bytes marking the 4 prefix bytes after every start."""
    marks = np.zeros(total, dtype=np.bool_)
    marks[starts] = True
    mask: np.ndarray[Any, Any] = marks.copy()
    for k in (1, 2, 3):
        mask[k:] |= marks[:-k]
    return mask


def _at_every_offset(buffer: np.ndarray[Any, Any], dtype: str, size: int) -> np.ndarray[Any, Any]:
    """A view of ``buffer`` with a ``dtype`` record at each of its first ``size`` byte
    offsets (unaligned, overlapping): indexed with element starts, it gathers each
    element's record in one operation."""
    view: np.ndarray[Any, Any] = np.ndarray((size,), dtype=dtype, buffer=buffer, strides=(1,))
    return view


def _verified_layout(
    u8: np.ndarray[Any, Any], count: int | None
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """Element starts, lengths and ends guessed from the prefixes' zero bytes, if verified.

    Guess: for elements shorter than 16 MiB the last prefix byte is zero and, in text
    without NULs, is the end of a run of zero bytes. Verification: the guessed starts
    must be exactly the chain 0 -> 4 + len -> ... -> end, which is the unique parse.
    """
    total = u8.size
    zero = u8 == 0
    starts = np.flatnonzero(zero[:-1] & ~zero[1:]) - 3
    n = starts.size
    if n == 0 or starts[0] != 0 or (count is not None and n != count):
        return None
    lengths = _at_every_offset(u8, "<u4", total - 3)[starts].astype(np.int64)  # the prefixes
    ends = starts + 4 + lengths
    if ends[-1] != total or not np.array_equal(ends[:-1], starts[1:]):
        return None
    return starts, lengths, ends


def _unpack_vectorized(buf: bytes, count: int | None) -> np.ndarray[Any, Any] | None:
    """Object array of the elements via the verified guess, or None when it does not apply."""
    u8 = np.frombuffer(buf, dtype=np.uint8)
    found = _verified_layout(u8, count)
    if found is None:
        return None
    starts, lengths, ends = found
    n = starts.size
    width = int(lengths.max())
    # Elements are recovered through a NUL-padded S<width> array, which strips trailing
    # NULs: only when no element ends with one and the padding stays small; otherwise
    # the verified positions are sliced one by one.
    if width == 0 or n * width > 8 * u8.size or bool((u8[ends[lengths > 0] - 1] == 0).any()):
        return to_object_array(
            [buf[s:e] for s, e in zip((starts + 4).tolist(), ends.tolist(), strict=True)]
        )
    # ``width`` bytes from every payload start (the buffer padded with NULs so the last
    # ones exist); what lies past each element becomes NUL
    tail = np.zeros(u8.size + width, dtype=np.uint8)
    tail[: u8.size] = u8
    records = _at_every_offset(tail, f"V{width}", u8.size)[starts + 4]
    records.view(np.uint8).reshape(n, width)[np.arange(width) >= lengths[:, None]] = 0
    result: np.ndarray[Any, Any] = records.view(f"S{width}").astype(np.object_)
    return result


def unpack_items(buffer: bytes | bytearray | memoryview, count: int | None = None) -> list[bytes]:
    """Split a BYTES buffer into its elements.

    ``count`` (when given) is the expected number of elements; the whole buffer must be
    consumed either way. Raises :class:`BytesFramingError` on malformed input.
    """
    result: list[bytes] = unpack_array(buffer, count).tolist()
    return result


def unpack_array(
    buffer: bytes | bytearray | memoryview, count: int | None = None
) -> np.ndarray[Any, Any]:
    """Like :func:`unpack_items` but returns a 1-D object array of ``bytes``."""
    buf = buffer if isinstance(buffer, bytes) else bytes(buffer)
    end = len(buf)
    if end == 0:
        if count:
            raise BytesFramingError(f"expected {count} BYTES elements, got an empty buffer")
        return to_object_array([])
    if end < 4:
        raise BytesFramingError(
            f"incomplete BYTES length indicator: expecting 4 bytes but only {end} available"
        )
    fast = _equal_length(buf, _U32.unpack_from(buf, 0)[0], count)
    if fast is not None:
        return to_object_array(fast)
    if end >= _VECTORIZE_FROM:
        vectorized = _unpack_vectorized(buf, count)
        if vectorized is not None:
            return vectorized
    return to_object_array(_scan(buf, count))


def _scan(buf: bytes, count: int | None) -> list[bytes]:
    end = len(buf)
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
    array = unpack_array(buffer, count)
    return array if shape is None else array.reshape(shape)


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
