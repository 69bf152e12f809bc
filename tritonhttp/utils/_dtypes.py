"""Triton datatype names <-> numpy dtypes, and element sizes."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

BF16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)

#: Triton datatype -> numpy dtype of its elements (BYTES -> object).
TRITON_TO_NUMPY: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BF16": BF16,
    "BYTES": np.dtype(np.object_),
}

#: Bytes per element; BYTES is variable-sized (absent).
ELEMENT_SIZE: dict[str, int] = {k: v.itemsize for k, v in TRITON_TO_NUMPY.items() if k != "BYTES"}

# numpy dtype -> Triton name, for the exact dtypes numpy hands out (native byte order).
_NUMPY_TO_TRITON: dict[np.dtype[Any], str] = {v: k for k, v in TRITON_TO_NUMPY.items()}

# What tritonclient.utils.triton_to_np_dtype returns (types, not dtypes; BOOL is builtin bool),
# in the order it compares the names.
_TRITON_TO_NP_TYPE: dict[str, Any] = {
    "BOOL": bool,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "FP16": np.float16,
    "FP32": np.float32,
    "BF16": ml_dtypes.bfloat16,  # before FP64: the order tritonclient compares in
    "FP64": np.float64,
    "BYTES": np.object_,
}


# The order in which tritonclient tries the candidates (it matters for objects whose
# ``==`` is loose): the table's; then an object whose ``.type`` is ``np.bytes_`` is BYTES.
_CANDIDATES: tuple[tuple[Any, str], ...] = tuple(
    (np_type, name) for name, np_type in _TRITON_TO_NP_TYPE.items()
)


def _compare_in_turn(np_dtype: Any) -> str | None:
    for candidate, name in _CANDIDATES:
        if np_dtype == candidate:
            return name
    # Like tritonclient, anything else must have a ``.type`` (AttributeError otherwise).
    if np_dtype.type == np.bytes_:
        return "BYTES"
    return None


def triton_dtype_of(dtype: np.dtype[Any]) -> str | None:
    """Triton name for a numpy dtype (``S<n>`` and object are BYTES), or None."""
    name = _NUMPY_TO_TRITON.get(dtype)
    if name is not None:
        return name
    if dtype.kind == "S":
        return "BYTES"
    return _compare_in_turn(dtype)


def np_to_triton_dtype(np_dtype: Any) -> str | None:
    """The Triton datatype name for a numpy dtype (or scalar type), or None if unsupported.

    Same results as tritonclient's function for every argument, including its errors:
    a ``numpy.dtype`` or one of the scalar types of the table (``np.float32``, builtin
    ``bool``, ...); other objects must compare equal to one of them or have a ``.type``
    attribute (so ``np.bool_`` or ``"float32"`` raise ``AttributeError``, as there).
    """
    if isinstance(np_dtype, np.dtype):
        return triton_dtype_of(np_dtype)
    return _compare_in_turn(np_dtype)


def triton_to_np_dtype(dtype: str) -> Any:
    """The numpy type for a Triton datatype name (case-sensitive), or None."""
    if type(dtype) is str:
        return _TRITON_TO_NP_TYPE.get(dtype)
    for name, np_type in _TRITON_TO_NP_TYPE.items():  # tritonclient compares in turn
        if dtype == name:
            return np_type
    return None


def read_dtype(datatype: object, error: type[Exception]) -> np.dtype[Any]:
    """The numpy dtype a shared-memory read names: a numpy dtype or type, or a Triton
    datatype name (``"FP32"``); anything else raises ``error`` (each module's own)."""
    if isinstance(datatype, str) and datatype in TRITON_TO_NUMPY:
        return TRITON_TO_NUMPY[datatype]
    try:
        return np.dtype(datatype)  # type: ignore[call-overload,no-any-return]
    except TypeError:
        raise error(
            f"datatype must be a numpy dtype (or a Triton datatype name), not {datatype!r}"
        ) from None
