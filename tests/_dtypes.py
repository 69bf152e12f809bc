"""numpy dtype lists that tests in several folders parametrize over."""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["NUMERIC", "NUMPY_NUMERIC"]

#: numpy's own dtypes that have a Triton datatype (BOOL, INT*, UINT*, FP16/32/64)
NUMPY_NUMERIC: list[object] = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
]
#: every dtype of a numeric Triton datatype, BF16 (ml_dtypes.bfloat16) included
NUMERIC: list[object] = [*NUMPY_NUMERIC, ml_dtypes.bfloat16]
