"""DLPack in and out of numpy for pb_utils.Tensor, including BF16.

numpy cannot export or import bfloat16 over DLPack, so BF16 travels as a uint16 tensor
whose DLPack dtype code is switched to kDLBfloat in the capsule (and back on import).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ....utils._dtypes import BF16

__all__ = ["array_from_dlpack", "capsule_of"]

_KDL_UINT = 1
_KDL_BFLOAT = 4


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _DType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _tensor_of(capsule: object) -> _DLTensor:
    # DLManagedTensor starts with its DLTensor
    return _DLTensor.from_address(_get_pointer(capsule, b"dltensor"))


def is_capsule(obj: object) -> bool:
    return type(obj).__name__ == "PyCapsule" and bool(_is_valid(obj, b"dltensor"))


def capsule_of(array: np.ndarray[Any, Any]) -> object:
    """A ``dltensor`` capsule sharing ``array``'s memory (BF16 marked as kDLBfloat)."""
    if array.dtype == BF16:
        capsule = array.view(np.uint16).__dlpack__()
        _tensor_of(capsule).dtype.code = _KDL_BFLOAT
        return capsule
    return array.__dlpack__()


class _Holder:
    def __init__(self, capsule: object) -> None:
        self._capsule = capsule

    def __dlpack__(self, stream: object = None, **_: object) -> object:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def array_from_dlpack(capsule: object) -> np.ndarray[Any, Any]:
    """A numpy array over a CPU ``dltensor`` capsule's memory (consumes the capsule)."""
    tensor = _tensor_of(capsule)
    bf16 = tensor.dtype.code == _KDL_BFLOAT and tensor.dtype.bits == 16
    if bf16:
        tensor.dtype.code = _KDL_UINT
    array = np.from_dlpack(_Holder(capsule))  # type: ignore[arg-type]
    return array.view(BF16) if bf16 else array
