"""``Tensor``: request inputs, response outputs and BLS tensors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import _dlpack
from ._errors import TritonModelException, invoked_with, pybind_repr

__all__ = ["Tensor", "bytes_items", "wire_of"]

_DTYPE_TO_WIRE: dict[np.dtype[Any], str] = {
    np.dtype(np.bool_): "BOOL",
    np.dtype(np.uint8): "UINT8",
    np.dtype(np.uint16): "UINT16",
    np.dtype(np.uint32): "UINT32",
    np.dtype(np.uint64): "UINT64",
    np.dtype(np.int8): "INT8",
    np.dtype(np.int16): "INT16",
    np.dtype(np.int32): "INT32",
    np.dtype(np.int64): "INT64",
    np.dtype(np.float16): "FP16",
    np.dtype(np.float32): "FP32",
    np.dtype(np.float64): "FP64",
    np.dtype(np.object_): "BYTES",
}
_WIRE_NUMBER = {
    "BOOL": 1, "UINT8": 2, "UINT16": 3, "UINT32": 4, "UINT64": 5, "INT8": 6, "INT16": 7,
    "INT32": 8, "INT64": 9, "FP16": 10, "FP32": 11, "FP64": 12, "BYTES": 13, "BF16": 14,
}  # fmt: skip

_CTOR_ERROR = (
    "__init__(): incompatible constructor arguments. The following argument types are "
    "supported:\n    1. c_python_backend_utils.Tensor(arg0: str, arg1: numpy.ndarray)\n"
)
_FROM_DLPACK_ERROR = (
    "from_dlpack(): incompatible function arguments. The following argument types are "
    "supported:\n    1. (self: str, arg0: object) -> c_python_backend_utils.Tensor\n"
)


def _ctor_name(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The name a ``Tensor(name, array)`` call gives, checked as pybind11 checks the call
    (two positional arguments, a ``str`` name, or UTF-8 ``bytes``/``bytearray``, and a
    numpy array), or its ``TypeError``."""
    name = args[0] if len(args) == 2 and not kwargs else None
    if isinstance(name, (bytes, bytearray)):
        try:
            name = bytes(name).decode("utf-8")
        except UnicodeDecodeError:
            name = None
    if not isinstance(name, str) or not isinstance(args[1], np.ndarray):
        raise TypeError(_CTOR_ERROR + invoked_with(args, kwargs))
    return name


def wire_of(dtype: np.dtype[Any]) -> str | None:
    """The Triton datatype of a numpy dtype (``S`` arrays are BYTES), or None (a
    non-native byte order included, as Triton refuses it)."""
    wire = _DTYPE_TO_WIRE.get(dtype)
    if wire is not None:
        return wire
    if dtype.kind == "S":
        return "BYTES"
    return None


def bytes_items(array: np.ndarray[Any, Any]) -> list[bytes]:
    """The elements of an object or ``S`` array as ``bytes``: an object element that is
    exactly ``bytes`` as it is, any other (``np.bytes_`` too) as ``str(x).encode()``."""
    items: list[Any] = array.ravel(order="C").tolist()
    if array.dtype.kind == "S":
        return items
    return [x if type(x) is bytes else str(x).encode("utf-8") for x in items]


class Tensor:
    """A named tensor: ``Tensor(name, numpy_array)`` (positional arguments only).

    BYTES tensors (``object`` or ``S`` arrays) are serialised when the tensor is built;
    numeric tensors keep a reference to the array, read when the response is sent.
    """

    __slots__ = ("_array", "_items", "_name", "_wire")

    _array: np.ndarray[Any, Any]
    _items: list[bytes] | None
    _name: str
    _wire: str

    if TYPE_CHECKING:

        def __init__(self, name: str | bytes, array: np.ndarray[Any, Any], /) -> None: ...

    else:

        def __init__(self, *args, **kwargs):
            name = _ctor_name(args, kwargs)
            self._build(name, args[1])

    def _build(self, name: str, array: np.ndarray[Any, Any]) -> None:
        if name == "":
            raise TritonModelException("Tensor name cannot be an empty string.")
        wire = wire_of(array.dtype)
        if wire is None:
            raise TritonModelException("NumPy dtype is not supported.")
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        self._name = name
        self._array = array
        self._wire = wire
        self._items = bytes_items(array) if wire == "BYTES" else None

    @classmethod
    def _wrap(cls, name: str, wire: str, array: np.ndarray[Any, Any]) -> Tensor:
        """A tensor over data the server (or a DLPack producer) already laid out.

        ``array``: the numpy data; BYTES as an object array of ``bytes``; BF16 as
        ``uint16`` (or any 2-byte dtype, viewed as ``uint16``).
        """
        self = cls.__new__(cls)
        if wire == "BF16" and array.dtype != np.uint16:
            array = array.view(np.uint16)
        self._name = name
        self._array = array
        self._wire = wire
        self._items = None
        return self

    def name(self) -> str:
        """The tensor's name."""
        return self._name

    def shape(self) -> list[int]:
        """The shape, as a list."""
        return list(self._array.shape)

    def as_numpy(self) -> np.ndarray[Any, Any]:
        """The data as numpy (BYTES: an object array of ``bytes``; BF16: not possible)."""
        if self._wire == "BF16":
            raise TritonModelException(
                "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and "
                "from_dlpack() instead."
            )
        return self._array

    def triton_dtype(self) -> int:
        """The TRITONSERVER_DataType number (BOOL=1 ... BYTES=13, BF16=14).

        Triton 2.51 raised ``TypeError`` here; this returns the number instead.
        """
        return _WIRE_NUMBER[self._wire]

    def is_cpu(self) -> bool:
        """Always True (tensors live in CPU memory here)."""
        return True

    def to_dlpack(self) -> object:
        """A ``dltensor`` capsule sharing this tensor's memory (not for BYTES)."""
        if self._wire == "BYTES":
            raise TritonModelException("DLPack does not have support for string tensors.")
        return _dlpack.capsule_of(self._array, bf16=self._wire == "BF16")

    def __dlpack__(self, stream: object = None, **_: object) -> object:
        return self.to_dlpack()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    @staticmethod
    def from_dlpack(name: str, dlpack_tensor: object) -> Tensor:
        """A tensor with a copy of the data of a DLPack capsule or of an object with
        ``__dlpack__`` (CPU memory: the copy is writeable and independent of the source)."""
        if isinstance(name, bytes):  # pybind11 takes bytes for a str
            name = name.decode("utf-8", "replace")
        if not isinstance(name, str):
            raise TypeError(_FROM_DLPACK_ERROR + invoked_with((name, dlpack_tensor), {}))
        if name == "":
            raise TritonModelException("Tensor name cannot be an empty string.")
        bf16 = False
        if isinstance(dlpack_tensor, Tensor):
            array, bf16 = dlpack_tensor._array, dlpack_tensor._wire == "BF16"
            if dlpack_tensor._wire == "BYTES":
                raise TritonModelException("DLPack does not have support for string tensors.")
        elif isinstance(dlpack_tensor, np.ndarray):
            array = dlpack_tensor
        else:
            if _dlpack.is_capsule(dlpack_tensor):
                capsule = dlpack_tensor
            elif hasattr(dlpack_tensor, "__dlpack__") and hasattr(
                dlpack_tensor, "__dlpack_device__"
            ):
                device = dlpack_tensor.__dlpack_device__()
                if int(device[0]) not in (1, 3):
                    raise TritonModelException(
                        f"DLDevice type {int(device[0])} is not support by Python backend."
                    )
                capsule = dlpack_tensor.__dlpack__()
            else:
                raise TritonModelException(
                    "Provided tensor is not supported. Tensor must be a DLPack capsule         "
                    "or have `__dlpack__` and `__dlpack_device__` attributes"
                )
            array, bf16 = _dlpack.array_from_dlpack(capsule)
        if not array.flags.c_contiguous:
            raise TritonModelException(
                "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are "
                "stored in C-Order are supported."
            )
        wire = "BF16" if bf16 else wire_of(array.dtype)
        if wire is None or wire == "BYTES":
            raise TritonModelException("NumPy dtype is not supported.")
        # CPU data is copied, as Triton's stub copies it: the tensor is writeable and
        # independent of the producer's memory
        return Tensor._wrap(name, wire, np.array(array, copy=True))

    def __repr__(self) -> str:
        return pybind_repr(self, "Tensor")
