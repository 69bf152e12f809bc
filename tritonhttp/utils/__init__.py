"""Mirror of ``tritonclient.utils``: datatype mapping, BYTES codecs and the exception.

Same names, arguments and results as tritonclient 2.73.0; the BYTES codecs are
vectorized (no per-element Python loop on the hot path).
"""

from __future__ import annotations

import struct  # (tritonclient.utils exposes it too)
from typing import Any as _Any

import ml_dtypes  # noqa: F401  (BF16 arrays are ml_dtypes.bfloat16, as in tritonclient 2.73.0)
import numpy as np

from .._errors import InferenceServerException, raise_error
from ._bytes import BytesFramingError as _BytesFramingError
from ._bytes import element_list as _element_list
from ._bytes import flat_items as _flat_items
from ._bytes import pack_items as _pack_items
from ._bytes import to_object_array as _to_object_array
from ._bytes import unpack_array as _unpack_array
from ._dtypes import np_to_triton_dtype, triton_to_np_dtype

_U32 = struct.Struct("<I")

__all__ = [
    "TRITON_RESERVED_REQUEST_PARAMS",
    "TRITON_RESERVED_REQUEST_PARAMS_PREFIX",
    "InferenceServerException",
    "deserialize_bytes_tensor",
    "np_to_triton_dtype",
    "raise_error",
    "serialize_byte_tensor",
    "serialized_byte_size",
    "triton_to_np_dtype",
]

#: Request parameters the client sets itself; users may not pass them in ``parameters``.
TRITON_RESERVED_REQUEST_PARAMS = [
    "sequence_id",
    "sequence_start",
    "sequence_end",
    "priority",
    "timeout",
    "headers",
    "binary_data_output",
]
#: Prefix reserved for Triton's own parameters.
TRITON_RESERVED_REQUEST_PARAMS_PREFIX = "triton_"


def serialize_byte_tensor(input_tensor: np.ndarray[_Any, _Any]) -> np.ndarray[_Any, _Any]:
    """Serialize a BYTES tensor (object or ``S`` array) into Triton's wire format.

    Returns a 0-d object array whose single item is the framed ``bytes`` (each element
    as a 4-byte little-endian length followed by its bytes, in C order); an empty
    tensor gives ``np.empty([0], dtype=object)``. Object elements that are not bytes
    are encoded as ``str(x).encode("utf-8")``.
    """
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.object_)
    if input_tensor.dtype != np.object_ and input_tensor.dtype.kind != "S":
        raise_error("cannot serialize bytes tensor: invalid datatype")
    out = np.empty((), dtype=np.object_)
    out[()] = _pack_items(_element_list(input_tensor))
    return out


class _MalformedBytesTensor(InferenceServerException, struct.error):
    """A truncated BYTES buffer: the ``struct.error`` tritonclient raised (same text),
    and an ``InferenceServerException``."""


def deserialize_bytes_tensor(
    encoded_tensor: bytes | bytearray | memoryview,
) -> np.ndarray[_Any, _Any]:
    """Parse Triton's BYTES wire format into a 1-D object array of ``bytes``.

    Accepts what tritonclient accepts (anything with ``len()`` that ``struct`` can read,
    ``len()`` counting the items) with the same results and errors: a truncated buffer
    raises an exception that is both a ``struct.error`` with tritonclient's message and
    an ``InferenceServerException``.
    """
    kind = type(encoded_tensor)
    if (
        kind is bytes
        or kind is bytearray
        or (
            kind is memoryview
            and encoded_tensor.ndim == 1  # type: ignore[union-attr]
            and encoded_tensor.itemsize == 1  # type: ignore[union-attr]
            and encoded_tensor.c_contiguous  # type: ignore[union-attr]
        )
    ):
        try:
            return _unpack_array(encoded_tensor)
        except _BytesFramingError:
            pass  # the walk below raises the error tritonclient raises
    return _walk_bytes_tensor(encoded_tensor)


def _walk_bytes_tensor(encoded_tensor: _Any) -> np.ndarray[_Any, _Any]:
    """Element by element with ``struct``, for the buffers the fast path does not take."""
    end = len(encoded_tensor)
    items: list[bytes] = []
    offset = 0
    try:
        while offset < end:
            (length,) = _U32.unpack_from(encoded_tensor, offset)
            offset += 4
            (item,) = struct.unpack_from(f"<{length}s", encoded_tensor, offset)
            offset += length
            items.append(item)
    except struct.error as e:
        raise _MalformedBytesTensor(msg=str(e)) from None
    return _to_object_array(items)


def serialized_byte_size(tensor_value: np.ndarray[_Any, _Any]) -> int:
    """Sum of ``len(element)`` over an object array (tritonclient's definition).

    Like tritonclient, the 4-byte length prefixes are not counted and ``str`` elements
    count characters.
    """
    if tensor_value.dtype != np.object_:
        raise_error("The tensor_value dtype must be np.object_")
    if tensor_value.size == 0:
        return 0
    return sum(map(len, _flat_items(tensor_value)))  # (a masked array or matrix: its data)
