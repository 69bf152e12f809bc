"""Flag constants and the pure-Python helpers of pb_utils (type maps, BYTES framing)."""

from __future__ import annotations

import enum
import struct
from typing import TYPE_CHECKING, Any

import numpy as np

from ._tensor import bytes_items

if TYPE_CHECKING:
    from ._request import InferenceRequest, InferenceResponse
    from ._tensor import Tensor

__all__ = [
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "MemoryType",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "using_decoupled_model_transaction_policy",
]

#: request flag: first request of a sequence
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
#: request flag: last request of a sequence
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
#: response-sender flag: no more responses for this request
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
#: release flag (default): the request is done
TRITONSERVER_REQUEST_RELEASE_ALL = 1
#: release flag: queue the same request again (iterative sequences)
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2


class MemoryType(enum.Enum):
    """pb_utils' memory types (GPU=0, CPU=1: not the C API's numbering)."""

    TRITONSERVER_MEMORY_GPU = 0
    TRITONSERVER_MEMORY_CPU = 1


TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU

#: config type name -> numpy type (``TYPE_BOOL`` is the builtin ``bool``; no BF16 entry)
TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

_TRITON_TO_NUMPY_TYPE: dict[int, Any] = {
    1: np.bool_,
    2: np.uint8,
    3: np.uint16,
    4: np.uint32,
    5: np.uint64,
    6: np.int8,
    7: np.int16,
    8: np.int32,
    9: np.int64,
    10: np.float16,
    11: np.float32,
    12: np.float64,
    13: np.object_,
}


def triton_string_to_numpy(triton_type_string: str) -> Any:
    """The numpy type of a config type name (``TYPE_FP32``); ``KeyError`` if unknown."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def triton_to_numpy_type(data_type: int) -> Any:
    """The numpy type of a TRITONSERVER_DataType number (1..13), or None."""
    return _TRITON_TO_NUMPY_TYPE.get(data_type)


def numpy_to_triton_type(data_type: Any) -> int | None:
    """The TRITONSERVER_DataType number of a numpy type (compared with ``==``), or None."""
    if data_type == np.bytes_:
        return 13
    for number, np_type in _TRITON_TO_NUMPY_TYPE.items():
        if np_type == data_type:
            return number
    return None


def serialize_byte_tensor(input_tensor: np.ndarray[Any, Any]) -> Any:
    """Length-prefixed BYTES serialisation as ``bytes``.

    Elements in C order, each a 4-byte little-endian length then the bytes, as
    :func:`._tensor.bytes_items` gives them (exact ``bytes`` as they are, any other
    object element as ``str(x).encode()``). As in Triton, an empty array gives
    ``()`` and a non-bytes dtype gives None.
    """
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        return None
    parts: list[bytes] = []
    for s in bytes_items(input_tensor):
        parts.append(struct.pack("<I", len(s)))
        parts.append(s)
    return b"".join(parts)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray[Any, Any]:
    """Inverse of :func:`serialize_byte_tensor`: a 1-D object array of ``bytes``. An
    element running past the end raises ``struct.error``, as in Triton."""
    items: list[bytes] = []
    offset = 0
    buf = bytes(encoded_tensor)
    while offset < len(buf):
        (length,) = struct.unpack_from("<I", buf, offset)
        offset += 4
        (item,) = struct.unpack_from(f"<{length}s", buf, offset)
        items.append(item)
        offset += length
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    """The request's input called ``name`` (first match), or None."""
    for tensor in inference_request.inputs():
        if tensor.name() == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    """The response's output called ``name`` (first match), or None."""
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The ``input`` entry called ``name`` of a config dict, or None."""
    for item in model_config.get("input", []):
        if item["name"] == name:
            return item  # type: ignore[no-any-return]
    return None


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The ``output`` entry called ``name`` of a config dict, or None."""
    for item in model_config.get("output", []):
        if item["name"] == name:
            return item  # type: ignore[no-any-return]
    return None


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    """Whether a config dict declares ``model_transaction_policy { decoupled: true }``."""
    if "model_transaction_policy" in model_config:
        return bool(model_config["model_transaction_policy"]["decoupled"])
    return False
