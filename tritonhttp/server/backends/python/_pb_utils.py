"""``triton_python_backend_utils`` as models see it (Triton 2.51 / python_backend r24.10).

Models import it as ``triton_python_backend_utils`` (conventionally ``pb_utils``); the
server registers this module under that name in ``sys.modules``. Names, signatures,
error texts and quirks follow the real module; deliberate differences are listed in
docs/python-models.md.
"""

from __future__ import annotations

import enum
import inspect
import json
import logging
import os
import struct
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ....utils._dtypes import BF16
from . import _dlpack

__all__ = [
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "Logger",
    "MetricFamily",
    "ModelConfig",
    "PreferredMemory",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_model_dir",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "load_model",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
]

# ----------------------------------------------------------------------------- constants

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2


class MemoryType(enum.Enum):
    """pb_utils' memory types (GPU=0, CPU=1: not the C API's numbering)."""

    TRITONSERVER_MEMORY_GPU = 0
    TRITONSERVER_MEMORY_CPU = 1


TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU

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
    """The numpy type of a config type name (``TYPE_FP32``); KeyError if unknown."""
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
    """Length-prefixed BYTES serialisation as ``bytes`` (``()`` for an empty array)."""
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        return None
    parts: list[bytes] = []
    for item in input_tensor.reshape(-1).tolist():
        s = item if isinstance(item, bytes) else str(item).encode("utf-8")
        parts.append(struct.pack("<I", len(s)))
        parts.append(s)
    return b"".join(parts)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray[Any, Any]:
    """Inverse of :func:`serialize_byte_tensor`: a 1-D object array of ``bytes``."""
    items: list[bytes] = []
    offset = 0
    buf = bytes(encoded_tensor)
    while offset < len(buf):
        (length,) = struct.unpack_from("<I", buf, offset)
        offset += 4
        items.append(buf[offset : offset + length])
        offset += length
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    """The request's input called ``name``, or None."""
    for tensor in inference_request.inputs():
        if tensor.name() == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    """The response's output called ``name``, or None."""
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The ``input`` entry of a config dict called ``name``, or None."""
    for item in model_config.get("input", []):
        if item["name"] == name:
            return dict(item)
    return None


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The ``output`` entry of a config dict called ``name``, or None."""
    for item in model_config.get("output", []):
        if item["name"] == name:
            return dict(item)
    return None


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    """Whether a config dict declares the decoupled transaction policy."""
    if "model_transaction_policy" in model_config:
        return bool(model_config["model_transaction_policy"]["decoupled"])
    return False


# ----------------------------------------------------------------------------- errors


class TritonModelException(Exception):
    """Raised by the pb_utils API when a call is invalid."""


_ErrorCode = enum.Enum(  # type: ignore[misc]
    "__ErrorCode",
    [
        ("UNKNOWN", 0),
        ("INTERNAL", 1),
        ("NOT_FOUND", 2),
        ("INVALID_ARG", 3),
        ("UNAVAILABLE", 4),
        ("UNSUPPORTED", 5),
        ("ALREADY_EXISTS", 6),
        ("CANCELLED", 7),
    ],
)


class TritonError:
    """An error a model returns in a response (not an exception)."""

    UNKNOWN = _ErrorCode.UNKNOWN
    INTERNAL = _ErrorCode.INTERNAL
    NOT_FOUND = _ErrorCode.NOT_FOUND
    INVALID_ARG = _ErrorCode.INVALID_ARG
    UNAVAILABLE = _ErrorCode.UNAVAILABLE
    UNSUPPORTED = _ErrorCode.UNSUPPORTED
    ALREADY_EXISTS = _ErrorCode.ALREADY_EXISTS
    CANCELLED = _ErrorCode.CANCELLED

    __slots__ = ("_code", "_message")

    def __init__(self, message: str, code: Any = _ErrorCode.INTERNAL) -> None:
        if not isinstance(message, str):
            raise TypeError("__init__(): incompatible constructor arguments: message must be str")
        if not isinstance(code, _ErrorCode):
            raise TypeError(
                "__init__(): incompatible constructor arguments: code must be an ErrorCode"
            )
        self._message = message
        self._code = code

    def code(self) -> Any:
        return self._code

    def message(self) -> str:
        return self._message


# ----------------------------------------------------------------------------- tensors

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
    BF16: "BF16",
}
_WIRE_NUMBER = {
    "BOOL": 1, "UINT8": 2, "UINT16": 3, "UINT32": 4, "UINT64": 5, "INT8": 6, "INT16": 7,
    "INT32": 8, "INT64": 9, "FP16": 10, "FP32": 11, "FP64": 12, "BYTES": 13, "BF16": 14,
}  # fmt: skip


def _wire_of(dtype: np.dtype[Any]) -> str | None:
    wire = _DTYPE_TO_WIRE.get(dtype)
    if wire is None and dtype.kind == "S":
        return "BYTES"
    if wire is None and dtype.byteorder == ">":
        return _DTYPE_TO_WIRE.get(dtype.newbyteorder("="))
    return wire


def _as_bytes_items(array: np.ndarray[Any, Any]) -> list[bytes]:
    items: list[Any] = array.ravel(order="C").tolist()
    if array.dtype.kind == "S":
        return items
    return [x if isinstance(x, bytes) else str(x).encode("utf-8") for x in items]


class Tensor:
    """A named tensor: request inputs, response outputs, BLS tensors."""

    __slots__ = ("_array", "_items", "_name", "_wire")

    def __init__(self, name: str, array: np.ndarray[Any, Any], /) -> None:
        if not isinstance(name, str):
            raise TypeError(
                "__init__(): incompatible constructor arguments. The following argument "
                "types are supported:\n    1. Tensor(arg0: str, arg1: numpy.ndarray)"
            )
        if not isinstance(array, np.ndarray):
            raise TypeError(
                "__init__(): incompatible constructor arguments. The following argument "
                "types are supported:\n    1. Tensor(arg0: str, arg1: numpy.ndarray)"
            )
        if name == "":
            raise TritonModelException("Tensor name cannot be an empty string.")
        wire = _wire_of(array.dtype)
        if wire is None or wire == "BF16":
            raise TritonModelException("NumPy dtype is not supported.")
        if wire != "BYTES" and not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        self._name = name
        self._array = array
        self._wire = wire
        # BYTES are serialised when the tensor is built (later edits to the array are
        # not sent), numeric data is read when the response is sent.
        self._items = _as_bytes_items(array) if wire == "BYTES" else None

    @classmethod
    def _from_server(cls, name: str, wire: str, array: np.ndarray[Any, Any]) -> Tensor:
        self = cls.__new__(cls)
        self._name = name
        self._array = array
        self._wire = wire
        self._items = None
        return self

    def name(self) -> str:
        return self._name

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def as_numpy(self) -> np.ndarray[Any, Any]:
        if self._wire == "BF16":
            raise TritonModelException(
                "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and "
                "from_dlpack() instead."
            )
        return self._array

    def triton_dtype(self) -> int:
        """The TRITONSERVER_DataType number (Triton 2.51 raised TypeError here)."""
        return _WIRE_NUMBER[self._wire]

    def is_cpu(self) -> bool:
        return True

    def to_dlpack(self) -> object:
        if self._wire == "BYTES":
            raise TritonModelException("DLPack does not have support for string tensors.")
        return _dlpack.capsule_of(self._array)

    def __dlpack__(self, stream: object = None, **_: object) -> object:
        return self.to_dlpack()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    @staticmethod
    def from_dlpack(name: str, dlpack_tensor: object) -> Tensor:
        """A tensor sharing memory with a DLPack capsule or ``__dlpack__`` object."""
        if not isinstance(name, str) or name == "":
            raise TritonModelException("Tensor name cannot be an empty string.")
        if isinstance(dlpack_tensor, Tensor):
            array = dlpack_tensor._array
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
                    "Provided tensor is not supported. Tensor must be a DLPack capsule \\    "
                    "or have `__dlpack__` and `__dlpack_device__` attributes"
                )
            array = _dlpack.array_from_dlpack(capsule)
        if not array.flags.c_contiguous:
            raise TritonModelException(
                "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are "
                "stored in C-Order are supported."
            )
        wire = _wire_of(array.dtype)
        if wire is None or wire == "BYTES":
            raise TritonModelException("NumPy dtype is not supported.")
        return Tensor._from_server(name, wire, array)

    def __repr__(self) -> str:
        return f"Tensor(name={self._name!r}, datatype={self._wire}, shape={self.shape()})"


# ----------------------------------------------------------------------------- responses


class InferenceResponse:
    """A model's answer to one request: output tensors, or an error."""

    __slots__ = ("_error", "_outputs")

    def __init__(self, output_tensors: Any = [], error: TritonError | None = None) -> None:  # noqa: B006
        if output_tensors is None or not isinstance(output_tensors, (list, tuple)):
            raise TypeError(
                "__init__(): incompatible constructor arguments. The following argument "
                "types are supported:\n    1. InferenceResponse(output_tensors: "
                "List[Tensor] = [], error: TritonError = None)"
            )
        if error is not None and not isinstance(error, TritonError):
            raise TypeError(
                "__init__(): incompatible constructor arguments: error must be a TritonError"
            )
        for t in output_tensors:
            if not isinstance(t, Tensor):
                raise TritonModelException("Output tensor should not be empty.")
        self._outputs = list(output_tensors)
        self._error = error

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error


class InferenceResponseSender:
    """Sends responses for one request (``request.get_response_sender()``)."""

    __slots__ = ("_closed", "_decoupled", "_lock", "_on_final", "_response", "_sent")

    def __init__(self, decoupled: bool | None, on_final: Callable[[Any], None] | None) -> None:
        self._decoupled = decoupled
        self._on_final = on_final
        self._closed = False
        self._sent = 0
        self._response: InferenceResponse | None = None
        self._lock = threading.Lock()

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if flags == 0 and response is None:
            raise TritonModelException(
                "Inference Response object must be provided when the response flags is set to zero."
            )
        if self._decoupled is None:
            raise TritonModelException(
                "Unable to send response. Response sender has no reference to the decoupled "
                "state of the model."
            )
        with self._lock:
            if self._closed:
                raise TritonModelException(
                    "Unable to send response. Response sender has been closed."
                )
            if not self._decoupled:
                if response is not None and self._sent:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send more than "
                        "one response."
                    )
                if response is None and not self._sent:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send complete "
                        "final before sending a response."
                    )
            if response is not None:
                self._sent += 1
                self._response = response
            if flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL:
                self._closed = True
                callback = self._on_final
        if flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL and callback is not None:
            callback(self._response)

    def is_cancelled(self) -> bool:
        return False

    # used by the backend
    def _was_used(self) -> bool:
        return self._sent > 0 or self._closed


class InferenceTrace:
    """Trace context of a request (tracing is not exposed to models here)."""

    def get_context(self) -> None:
        return None


class PreferredMemory:
    """Where BLS outputs should live; CPU-only here, accepted and ignored."""

    def __init__(self, preferred_memory_type: MemoryType, preferred_device_id: int = 0) -> None:
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


# ----------------------------------------------------------------------------- requests


class InferenceRequest:
    """A request handed to ``execute``, or built by a model for BLS."""

    __slots__ = (
        "_correlation_id",
        "_flags",
        "_inputs",
        "_model_name",
        "_model_version",
        "_parameters",
        "_release_flags",
        "_request_id",
        "_requested",
        "_sender",
        "_timeout",
    )

    def __init__(
        self,
        request_id: str = "",
        correlation_id: int | str = 0,
        inputs: list[Tensor] | None = None,
        requested_output_names: list[str] | None = None,
        model_name: str | bytes | None = None,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: PreferredMemory | None = None,
        trace: InferenceTrace | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> None:
        if inputs is None or requested_output_names is None or model_name is None:
            raise TypeError(
                "__init__(): incompatible constructor arguments: 'inputs', "
                "'requested_output_names' and 'model_name' are required"
            )
        if isinstance(model_name, bytes):
            model_name = model_name.decode("utf-8")
        if isinstance(correlation_id, bool) or not isinstance(correlation_id, (int, str)):
            if correlation_id is None:
                raise TypeError("__init__(): incompatible constructor arguments: correlation_id")
            raise TritonModelException("Correlation ID must be integer or string")
        for t in inputs:
            if t is None:
                raise TritonModelException(
                    f"Input tensor for request with id '{request_id}' and model name "
                    f"'{model_name}' should not be empty."
                )
        for n in requested_output_names:
            if n is None:
                raise TypeError("__init__(): incompatible constructor arguments")
            if n == "":
                raise TritonModelException(
                    f"Requested output name for request with id '{request_id}' and model "
                    f"name '{model_name}' should not be empty."
                )
        if parameters is None:
            params_text = "{}"
        elif isinstance(parameters, dict):
            for k, v in parameters.items():
                if not isinstance(k, str):
                    raise TritonModelException(
                        f"Expect parameters keys to have type str, found type {type(k)}"
                    )
                if not isinstance(v, (bool, int, str)):
                    raise TritonModelException(
                        f"Expect parameters values to have type bool/int/str, found type {type(v)}"
                    )
            params_text = json.dumps(parameters)
        else:
            raise TritonModelException("Parameters must be a dictionary")
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._inputs = list(inputs)
        self._requested = set(requested_output_names)
        self._model_name = model_name
        self._model_version = model_version
        self._flags = flags
        self._timeout = timeout
        self._parameters = params_text
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._sender = InferenceResponseSender(None, None)

    @classmethod
    def _from_server(
        cls,
        request_id: str,
        correlation_id: int | str,
        inputs: list[Tensor],
        requested: set[str],
        flags: int,
        timeout: int,
        parameters: str,
        sender: InferenceResponseSender,
    ) -> InferenceRequest:
        self = cls.__new__(cls)
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._inputs = inputs
        self._requested = requested
        self._model_name = ""
        self._model_version = -1
        self._flags = flags
        self._timeout = timeout
        self._parameters = parameters
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._sender = sender
        return self

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def set_flags(self, flags: int) -> None:
        self._flags = flags

    def parameters(self) -> str:
        return self._parameters

    def requested_output_names(self) -> set[str]:
        return self._requested

    def timeout(self) -> int:
        return self._timeout

    def is_cancelled(self) -> bool:
        return False

    def get_response_sender(self) -> InferenceResponseSender:
        return self._sender

    def set_release_flags(self, flags: int) -> None:
        self._release_flags = flags

    def trace(self) -> InferenceTrace:
        return InferenceTrace()

    def exec(self, decoupled: bool = False) -> Any:
        raise TritonModelException(
            "BLS requests are not supported by this server yet (tritonhttp in-process backend)."
        )

    async def async_exec(self, decoupled: bool = False) -> Any:
        raise TritonModelException(
            "BLS requests are not supported by this server yet (tritonhttp in-process backend)."
        )


# ----------------------------------------------------------------------------- logging

_server_logger = logging.getLogger("tritonhttp.server.model")


class _LogLevel(enum.Enum):
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


class Logger:
    """Writes into the server log (``Logger.log_info("msg")``)."""

    INFO = _LogLevel.INFO
    WARNING = _LogLevel.WARNING
    ERROR = _LogLevel.ERROR
    VERBOSE = _LogLevel.VERBOSE

    @staticmethod
    def log(message: str, level: _LogLevel = _LogLevel.INFO) -> None:
        if not isinstance(level, _LogLevel):
            raise TypeError("log(): incompatible function arguments: level must be a Logger level")
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        while caller is not None and caller.f_code.co_filename == __file__:
            caller = caller.f_back
        where = (
            (os.path.basename(caller.f_code.co_filename), caller.f_lineno)
            if caller is not None
            else ("model.py", 0)
        )
        py_level = {
            _LogLevel.INFO: logging.INFO,
            _LogLevel.WARNING: logging.WARNING,
            _LogLevel.ERROR: logging.ERROR,
            _LogLevel.VERBOSE: 5,
        }[level]
        _server_logger.log(py_level, '"%s"', message, extra={"triton_where": where})

    @staticmethod
    def log_info(message: str) -> None:
        Logger.log(message, _LogLevel.INFO)

    @staticmethod
    def log_warn(message: str) -> None:
        Logger.log(message, _LogLevel.WARNING)

    @staticmethod
    def log_error(message: str) -> None:
        Logger.log(message, _LogLevel.ERROR)

    @staticmethod
    def log_verbose(message: str) -> None:
        Logger.log(message, _LogLevel.VERBOSE)


# ----------------------------------------------------------------------------- auto-complete


class ModelConfig:
    """The config handed to ``auto_complete_config`` (a mutable JSON dict)."""

    def __init__(self, model_config: str) -> None:
        self._model_config: dict[str, Any] = json.loads(model_config)

    def as_dict(self) -> dict[str, Any]:
        return self._model_config

    def set_max_batch_size(self, max_batch_size: int) -> None:
        current = self._model_config.get("max_batch_size", 0)
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but in auto-complete-config "
                f"function for model '{self._model_config['name']}' specified max_batch_size "
                f"{max_batch_size}"
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._model_config:
                raise ValueError(
                    f"Configuration specified scheduling_choice as '{other}', but "
                    f"auto-complete-config function for model '{self._model_config['name']}' "
                    "tries to set scheduling_choice as 'dynamic_batching'"
                )
        self._model_config.setdefault("dynamic_batching", {})

    def _add_tensor(self, kind: str, tensor: dict[str, Any], allowed: tuple[str, ...]) -> None:
        name = tensor.get("name", "")
        model = self._model_config["name"]
        for key in tensor:
            if key not in allowed:
                listed = ", ".join(f"'{a}'" for a in allowed[:-1]) + f" and '{allowed[-1]}'"
                raise ValueError(
                    f"{kind} '{name}' in auto-complete-config function for model '{model}' "
                    f"contains property other than {listed}."
                )
        for key in ("name", "data_type", "dims"):
            if key not in tensor:
                raise ValueError(
                    f"{kind} '{name}' in auto-complete-config function for model '{model}' is "
                    f"missing '{key}' property."
                )
        entries = self._model_config.setdefault(kind, [])
        for existing in entries:
            if existing.get("name") != tensor["name"]:
                continue
            old_type = existing.get("data_type", "TYPE_INVALID")
            if old_type != "TYPE_INVALID" and old_type != tensor["data_type"]:
                raise ValueError(
                    f"unable to load model '{model}', configuration expects datatype "
                    f"{old_type} for {kind} '{name}', model provides {tensor['data_type']}"
                )
            old_dims = existing.get("dims", [])
            if old_dims and list(old_dims) != list(tensor["dims"]):
                raise ValueError(
                    f"model '{model}', tensor '{name}': the model expects dims "
                    f"{list(tensor['dims'])} but the model configuration specifies dims "
                    f"{list(old_dims)}"
                )
            if "optional" in tensor and existing.get("optional", False) != tensor["optional"]:
                raise ValueError(
                    f"model '{model}', tensor '{name}': the model expects optional "
                    f"{tensor['optional']} but the model configuration specifies optional "
                    f"{existing.get('optional', False)}"
                )
            existing.update(tensor)
            return
        entries.append(tensor)

    def add_input(self, input: dict[str, Any]) -> None:
        self._add_tensor("input", input, ("name", "data_type", "dims", "optional"))

    def add_output(self, output: dict[str, Any]) -> None:
        self._add_tensor("output", output, ("name", "data_type", "dims"))

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        model = self._model_config["name"]
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError(
                    "model transaction property in auto-complete-config function for model "
                    f"'{model}' contains property other than 'decoupled'."
                )
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            new = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != new:
                raise ValueError(
                    "trying to change decoupled property in auto-complete-config for model "
                    f"'{model}', which is already set to '{policy['decoupled']}'."
                )
            policy["decoupled"] = new


# ----------------------------------------------------------------------------- server hooks


class _Hooks:
    """What the hosting server provides (model control, the current model directory)."""

    load_model: Callable[..., None] | None = None
    unload_model: Callable[..., None] | None = None
    is_model_ready: Callable[..., bool] | None = None


hooks = _Hooks()
_model_dir = threading.local()


def get_model_dir() -> str:
    """The version directory of the calling model (undocumented Triton helper)."""
    return str(getattr(_model_dir, "path", ""))


def load_model(model_name: str, config: str = "", files: dict[str, bytes] | None = None) -> None:
    """Load a model (explicit model-control mode only)."""
    if files is not None and not isinstance(files, dict):
        raise TritonModelException(
            f"failed to load model '{model_name}', files should be a dictionary of file paths "
            "and file contents"
        )
    if hooks.load_model is None:
        raise TritonModelException("Failed to load model: model control is not available")
    hooks.load_model(model_name, config, files)


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Unload a model (explicit model-control mode only)."""
    if hooks.unload_model is None:
        raise TritonModelException("Failed to unload model: model control is not available")
    hooks.unload_model(model_name, unload_dependents)


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether a model (version) is ready."""
    if hooks.is_model_ready is None:
        return False
    return hooks.is_model_ready(model_name, model_version)


class MetricFamily:
    """Custom metrics (not available yet in this server: constructing one raises)."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2

    def __init__(self, name: str, description: str, kind: int) -> None:
        raise TritonModelException("Custom metrics are not supported by this server yet.")
