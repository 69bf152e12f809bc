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

# What tritonclient.utils.triton_to_np_dtype returns (types, not dtypes; BOOL is builtin bool).
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
    "FP64": np.float64,
    "BF16": ml_dtypes.bfloat16,
    "BYTES": np.object_,
}


def triton_dtype_of(dtype: np.dtype[Any]) -> str | None:
    """Triton name for a numpy dtype (``S<n>`` and object are BYTES), or None."""
    name = _NUMPY_TO_TRITON.get(dtype)
    if name is not None:
        return name
    if dtype.kind == "S":
        return "BYTES"
    return None


def np_to_triton_dtype(np_dtype: Any) -> str | None:
    """The Triton datatype name for a numpy dtype (or type), or None if unsupported.

    Accepts what tritonclient's function accepts: ``np.dtype`` objects and the scalar
    types (``np.float32``, builtin ``bool``/``object``), plus ``S<n>`` dtypes as BYTES.
    """
    try:
        dtype = np.dtype(np_dtype)
    except TypeError:
        return None
    if np_dtype is str or dtype.kind == "U":
        return None
    return triton_dtype_of(dtype)


def triton_to_np_dtype(dtype: str) -> Any:
    """The numpy type for a Triton datatype name (case-sensitive), or None."""
    return _TRITON_TO_NP_TYPE.get(dtype)
