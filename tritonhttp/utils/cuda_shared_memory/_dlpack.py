"""DLPack in both directions, without a Python callback on any C path.

Exporting (``as_shared_memory_tensor``): numpy builds the capsule -- we wrap the region
memory in a numpy array through ``__array_interface__`` (numpy never touches the data),
ask numpy for its DLPack capsule and then set the capsule's device and data type to the
region's. The capsule destructor and the ``DLManagedTensor`` deleter are numpy's C
functions, so an unconsumed capsule, a consumed one and every consumer's deleter free
everything with no ctypes callback involved (tritonclient's ctypes deleter leaks and can
run Python code while an exception is in flight). The numpy array's base object holds a
reference on the region's memory, so the memory is not freed while any consumer still
uses it.

Importing (``set_shared_memory_region_from_dlpack``): read the producer's
``DLManagedTensor`` through ctypes while holding its capsule, copy, and let the capsule
go unconsumed (its own destructor frees it).
"""

from __future__ import annotations

import ctypes
import enum
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._errors import CudaSharedMemoryException

__all__ = [
    "DLPACK_LEGACY_STREAM",
    "DLDataTypeCode",
    "DLDeviceType",
    "DLPackTensorInfo",
    "SharedMemoryTensor",
    "dlpack_dtype",
    "read_dlpack",
]

#: The DLPack ``stream`` value meaning CUDA's legacy default stream (what we copy on).
DLPACK_LEGACY_STREAM = 1


class DLDeviceType(enum.IntEnum):
    """DLPack device types (the ones that matter here)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLCUDAManaged = 13


class DLDataTypeCode(enum.IntEnum):
    """DLPack element type codes."""

    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLOpaqueHandle = 3
    kDLBfloat = 4
    kDLComplex = 5
    kDLBool = 6


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Private prototypes (never the shared ctypes.pythonapi attributes, whose argtypes other
# libraries -- tritonclient among them -- set to their own liking). PYFUNCTYPE keeps the
# GIL and turns a set Python error into an exception.
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)

_LEGACY = b"dltensor"
_VERSIONED = b"dltensor_versioned"

#: Triton datatype -> (DLPack type code, bits). BOOL is one byte per element.
TRITON_TO_DLPACK: dict[str, tuple[DLDataTypeCode, int]] = {
    "BOOL": (DLDataTypeCode.kDLBool, 8),
    "INT8": (DLDataTypeCode.kDLInt, 8),
    "INT16": (DLDataTypeCode.kDLInt, 16),
    "INT32": (DLDataTypeCode.kDLInt, 32),
    "INT64": (DLDataTypeCode.kDLInt, 64),
    "UINT8": (DLDataTypeCode.kDLUInt, 8),
    "UINT16": (DLDataTypeCode.kDLUInt, 16),
    "UINT32": (DLDataTypeCode.kDLUInt, 32),
    "UINT64": (DLDataTypeCode.kDLUInt, 64),
    "FP16": (DLDataTypeCode.kDLFloat, 16),
    "FP32": (DLDataTypeCode.kDLFloat, 32),
    "FP64": (DLDataTypeCode.kDLFloat, 64),
    "BF16": (DLDataTypeCode.kDLBfloat, 16),
}


def dlpack_dtype(datatype: str) -> tuple[DLDataTypeCode, int]:
    """(type code, bits) of a Triton datatype; BYTES and unknown names are refused."""
    if datatype == "BYTES":
        raise CudaSharedMemoryException("DLPack cannot describe BYTES tensors")
    try:
        return TRITON_TO_DLPACK[datatype]
    except (KeyError, TypeError):
        raise CudaSharedMemoryException(
            f"cannot convert unknown datatype {datatype!r} to a DLPack data type"
        ) from None


class _MemoryWindow:
    """``__array_interface__`` over raw memory; holds ``owner`` alive as the array base."""

    def __init__(self, address: int, shape: tuple[int, ...], itemsize: int, owner: object):
        self.__array_interface__ = {
            "data": (address, False),
            "shape": shape,
            "typestr": f"<u{itemsize}",
            "version": 3,
        }
        self.owner = owner


class SharedMemoryTensor:
    """A DLPack view of (part of) a shared-memory region: ``torch.from_dlpack(t)`` etc.

    Zero-copy: consumers alias the region. ``export_owner`` (optional) is called once per
    capsule; what it returns is kept alive until the consumer releases that capsule -- the
    CUDA module uses it to keep the region's memory allocated while any consumer uses it.
    """

    def __init__(
        self,
        dtype: str,
        shape: Sequence[int],
        shm_addr: int,
        offset: int,
        byte_size: int,
        device_id: int,
        export_owner: Callable[[], object] | None = None,
    ) -> None:
        self._dtype = dtype
        self._code, self._bits = dlpack_dtype(dtype)
        self._shape = tuple(int(d) for d in shape)
        self._shm_addr = int(shm_addr)
        self._offset = int(offset)
        self._byte_size = int(byte_size)
        self._device_id = int(device_id)
        self._export_owner = export_owner
        count = 1
        for d in self._shape:
            if d < 0:
                raise CudaSharedMemoryException(f"shape {list(self._shape)} has a negative dim")
            count *= d
        needed = count * self._bits // 8
        if self._offset < 0 or self._offset + needed > self._byte_size:
            raise CudaSharedMemoryException(
                f"a {dtype} tensor of shape {list(self._shape)} ({needed} bytes) at offset "
                f"{self._offset} does not fit in the {self._byte_size}-byte region"
            )

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(kDLCUDA, device_id)``, or ``(kDLCPU, 0)`` for host memory (device -1)."""
        if self._device_id == -1:
            return (int(DLDeviceType.kDLCPU), 0)
        return (int(DLDeviceType.kDLCUDA), self._device_id)

    def __dlpack__(
        self,
        stream: int | None = None,
        *,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule aliasing the region, read-write.

        A DLPack 1.x (``dltensor_versioned``) capsule when the consumer passes
        ``max_version`` >= (1, 0) and numpy can make one, else a ``dltensor`` capsule.

        Writes through this module are synchronous, so there is no pending work to order
        against the consumer's ``stream``.
        """
        device = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError(f"the tensor lives on DLPack device {device}, not {dl_device}")
        if copy:
            raise BufferError("SharedMemoryTensor only exports views of the region (copy=True)")
        # Each capsule holds its own owner object (e.g. a reference on the region's memory),
        # released by numpy's deleter when the consumer is done.
        owner = self._export_owner() if self._export_owner is not None else None
        window = _MemoryWindow(self._shm_addr + self._offset, self._shape, self._bits // 8, owner)
        array = np.asarray(window)
        capsule = None
        if max_version is not None and (int(max_version[0]), int(max_version[1])) >= (1, 0):
            try:  # numpy >= 2.1 makes DLPack 1.x (versioned, writable) capsules
                capsule = array.__dlpack__(max_version=(int(max_version[0]), int(max_version[1])))
            except TypeError:
                capsule = None
        if capsule is None:
            capsule = array.__dlpack__()
        tensor = _tensor_of(capsule)
        if tensor is None:  # pragma: no cover - numpy always names its capsules
            raise BufferError("numpy returned an unexpected DLPack capsule")
        tensor.device = DLDevice(*device)
        tensor.dtype = DLDataType(int(self._code), self._bits, 1)
        return capsule


def _tensor_of(capsule: object) -> DLTensor | None:
    """The DLTensor inside a live, unconsumed capsule of either layout, or None."""
    tensor: DLTensor
    if _capsule_is_valid(capsule, _LEGACY):
        tensor = DLManagedTensor.from_address(_capsule_get_pointer(capsule, _LEGACY)).dl_tensor
    elif _capsule_is_valid(capsule, _VERSIONED):
        versioned = DLManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, _VERSIONED))
        tensor = versioned.dl_tensor
    else:
        return None
    return tensor


class DLPackTensorInfo:
    """What a producer's capsule describes; holds the capsule alive (do not keep long)."""

    def __init__(self, capsule: object, tensor: DLTensor) -> None:
        self.capsule = capsule
        self.device_type = int(tensor.device.device_type)
        self.device_id = int(tensor.device.device_id)
        self.address = int(tensor.data or 0) + int(tensor.byte_offset)
        shape = [int(tensor.shape[i]) for i in range(tensor.ndim)]
        bits, lanes, code = int(tensor.dtype.bits), int(tensor.dtype.lanes), int(tensor.dtype.code)
        if code == DLDataTypeCode.kDLBool and bits == 1:
            bits = 8  # 1-bit bools (tritonclient's exporter) are one byte per element
        if (bits * lanes) % 8:
            raise CudaSharedMemoryException(
                f"DLPack data type with {bits} bits x {lanes} lanes is not byte-sized"
            )
        itemsize = bits * lanes // 8
        count = 1
        for d in shape:
            count *= d
        self.shape = shape
        self.nbytes = count * itemsize
        if tensor.strides and count > 1:
            expected = 1
            for i in reversed(range(tensor.ndim)):
                if shape[i] != 1 and int(tensor.strides[i]) != expected:
                    raise CudaSharedMemoryException(
                        "DLPack tensor is not contiguous. Only contiguous DLPack tensors "
                        "that are stored in C-Order are supported."
                    )
                expected *= shape[i]


def read_dlpack(value: object, cuda_stream: int = DLPACK_LEGACY_STREAM) -> DLPackTensorInfo:
    """Describe a DLPack-capable object (or a ``dltensor`` capsule) without consuming it."""
    if hasattr(value, "__dlpack__"):
        device = None
        if hasattr(value, "__dlpack_device__"):
            device = tuple(value.__dlpack_device__())
        if device is not None and device[0] in (
            DLDeviceType.kDLCUDA,
            DLDeviceType.kDLCUDAManaged,
        ):
            capsule = value.__dlpack__(stream=cuda_stream)
        else:
            capsule = value.__dlpack__()
    else:
        capsule = value
    tensor = _tensor_of(capsule)
    if tensor is not None:
        return DLPackTensorInfo(capsule, tensor)
    raise CudaSharedMemoryException(
        f"{type(value).__name__} is neither a DLPack-capable object nor a DLPack capsule"
    )
