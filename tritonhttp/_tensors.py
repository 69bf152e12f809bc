"""Tensors of a request and the result of an inference.

``InferInput`` keeps a view of the numpy array it is given (no copy for C-contiguous
arrays); ``InferResult.as_numpy`` returns numpy views into the response buffer, which
are writable when the response was received by the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._errors import InferenceServerException, raise_error
from ._protocol import ParsedInferResponse, parse_infer_response
from .utils import _walk_bytes_tensor
from .utils._bytes import BytesFramingError, flat_items, serialize_bytes_array, unpack_array
from .utils._dtypes import TRITON_TO_NUMPY, triton_dtype_of, triton_to_np_dtype

__all__ = ["InferInput", "InferRequestedOutput", "InferResult"]

_BF16_HINT = (
    " Since r26.06, BF16 inputs must use ml_dtypes.bfloat16 instead of np.float32 "
    "truncation; create a numpy array with `np.array(data, dtype=ml_dtypes.bfloat16)`."
)
_SHM_KEYS = ("shared_memory_region", "shared_memory_byte_size", "shared_memory_offset")


def _raw_view(array: np.ndarray[Any, Any]) -> memoryview:
    """A flat byte view of ``array`` in C order (copies only non-contiguous arrays)."""
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    elif array.size and array.dtype.char != "E":  # "E": bfloat16 has no buffer format
        return array.data.cast("B")
    return array.reshape(-1).view(np.uint8).data


def _json_strings(array: np.ndarray[Any, Any], out: list[str]) -> None:
    """Append the elements of a BYTES array as str to ``out``; on a failure, ``out``
    keeps the elements before it (as tritonclient's list does). A subclass gives the
    elements of its data (see :func:`~tritonhttp.utils._bytes.flat_items`)."""
    items = flat_items(array)
    if array.dtype == np.object_:
        for x in items:
            if type(x) is bytes:
                try:
                    out.append(x.decode("utf-8"))
                except UnicodeDecodeError:
                    raise_error(
                        f'Failed to encode "{x!r}" using UTF-8. Please use binary_data=True, '
                        "if you want to pass a byte array."
                    )
            else:
                out.append(str(x))
        return
    try:
        out.extend([x.decode("utf-8") for x in items])
    except UnicodeDecodeError:
        for x in items:
            if not _decodes(x):
                raise_error(
                    f'Failed to encode "{x!r}" using UTF-8. Please use binary_data=True, '
                    "if you want to pass a byte array."
                )
            out.append(x.decode("utf-8"))


def _shape_differs(shape: Any, got: tuple[int, ...]) -> bool:
    """Whether ``shape`` does not match the array's shape, compared as tritonclient
    does (length first, then every dimension with ``!=``), errors included."""
    if len(shape) != len(got):
        return True
    differs = False
    for i in range(len(shape)):
        if shape[i] != got[i]:
            differs = True
    return differs


def _decodes(x: bytes) -> bool:
    try:
        x.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class InferInput:
    """An input tensor of an inference request.

    Args:
        name: the input's name in the model.
        shape: the tensor shape (kept as the given object).
        datatype: the Triton datatype string (``"FP32"``, ``"BYTES"``, ...).
    """

    def __init__(self, name: str, shape: Sequence[int], datatype: str) -> None:
        self._name = name
        self._shape = shape
        self._datatype = datatype
        self._parameters: dict[str, Any] = {}
        self._data: list[Any] | None = None
        self._raw_data: bytes | memoryview | None = None

    def name(self) -> str:
        """The input's name."""
        return self._name

    def datatype(self) -> str:
        """The input's Triton datatype."""
        return self._datatype

    def shape(self) -> Sequence[int]:
        """The input's shape (the object that was given)."""
        return self._shape

    def set_shape(self, shape: Sequence[int]) -> InferInput:
        """Replace the shape; returns ``self``."""
        self._shape = shape
        return self

    def set_data_from_numpy(
        self, input_tensor: np.ndarray[Any, Any], binary_data: bool = True
    ) -> InferInput:
        """Use ``input_tensor`` as the input's data; returns ``self``.

        The array's datatype and shape must match the input's (no ``-1`` wildcards).
        With ``binary_data`` (default) the bytes travel after the JSON header; the input
        keeps a view of a C-contiguous array (so later changes to it are sent), and a
        contiguous copy of any other. With ``binary_data=False`` the values are written
        into the JSON (not allowed for BF16).

        Raises:
            InferenceServerException: wrong type, datatype or shape.
        """
        if not isinstance(input_tensor, np.ndarray):
            raise_error("input_tensor must be a numpy array")
        dtype = triton_dtype_of(input_tensor.dtype)
        if self._datatype != dtype:
            message = (
                f"got unexpected datatype {dtype} from numpy array, expected {self._datatype}."
            )
            if self._datatype == "BF16":
                message += _BF16_HINT
            raise_error(message)
        shape = self._shape
        got = input_tensor.shape
        kind = type(shape)
        if not (
            (kind is list and tuple(shape) == got) or (kind is tuple and shape == got)
        ) and _shape_differs(shape, got):
            raise_error(
                f"got unexpected numpy array shape [{str(got)[1:-1]}], "
                f"expected [{str(shape)[1:-1]}]"
            )
        params = self._parameters
        for key in _SHM_KEYS:
            params.pop(key, None)
        if not binary_data:
            params.pop("binary_data_size", None)
            self._raw_data = None
            if dtype == "BF16":
                raise_error(
                    "BF16 inputs must be sent as binary data over HTTP. Please set binary_data=True"
                )
            if dtype == "BYTES":
                self._data = []  # a failed conversion leaves what came before, as there
                if input_tensor.size:
                    _json_strings(input_tensor, self._data)
            elif type(input_tensor) is np.ndarray:
                self._data = input_tensor.ravel().tolist()
            else:  # a subclass (e.g. masked): its own element access, as tritonclient
                self._data = [x.item() for x in input_tensor.flatten()]
        else:
            self._data = None
            if dtype == "BYTES":
                raw: bytes | memoryview = (
                    serialize_bytes_array(input_tensor) if input_tensor.size else b""
                )
            elif type(input_tensor) is np.ndarray and dtype is not None:
                raw = _raw_view(input_tensor)
            elif dtype is not None and not isinstance(input_tensor, np.ma.MaskedArray):
                raw = _raw_view(np.asarray(input_tensor))  # a subclass: still no copy
            else:  # masked values filled (as tritonclient sent them), or an unknown dtype
                raw = input_tensor.tobytes()
            self._raw_data = raw
            params["binary_data_size"] = raw.nbytes if isinstance(raw, memoryview) else len(raw)
        return self

    def set_shared_memory(self, region_name: str, byte_size: int, offset: int = 0) -> InferInput:
        """Take the data from a registered shared-memory region; returns ``self``.

        ``offset`` is only sent when non-zero (an earlier non-zero offset stays, as in
        tritonclient).
        """
        self._data = None
        self._raw_data = None
        self._parameters.pop("binary_data_size", None)
        self._parameters["shared_memory_region"] = region_name
        self._parameters["shared_memory_byte_size"] = byte_size
        if offset != 0:
            self._parameters["shared_memory_offset"] = offset
        return self

    def _get_binary_data(self) -> bytes | memoryview | None:
        """The raw bytes sent after the JSON header, or None."""
        return self._raw_data

    def _get_tensor(self) -> dict[str, Any]:
        """The input's JSON description."""
        tensor: dict[str, Any] = {
            "name": self._name,
            "shape": self._shape,
            "datatype": self._datatype,
        }
        params = self._parameters
        if params:
            tensor["parameters"] = params
        if (
            self._data is not None
            and self._raw_data is None
            and "shared_memory_region" not in params
        ):
            tensor["data"] = self._data
        return tensor

    def __repr__(self) -> str:
        return f"InferInput({self._name!r}, {self._shape!r}, {self._datatype!r})"


class InferRequestedOutput:
    """An output to return, optionally as classification or into shared memory.

    Args:
        name: the output's name in the model.
        binary_data: return the data after the JSON header (default) instead of in it.
        class_count: return the top ``class_count`` classifications instead of the tensor.
    """

    def __init__(self, name: str, binary_data: bool = True, class_count: int = 0) -> None:
        self._name = name
        self._parameters: dict[str, Any] = {}
        if class_count != 0:
            self._parameters["classification"] = class_count
        self._binary = binary_data
        self._parameters["binary_data"] = binary_data

    def name(self) -> str:
        """The output's name."""
        return self._name

    def set_shared_memory(self, region_name: str, byte_size: int, offset: int = 0) -> None:
        """Have the server write this output into a registered shared-memory region.

        Raises:
            InferenceServerException: the output requests a classification.
        """
        if "classification" in self._parameters:
            raise_error("shared memory can't be set on classification output")
        if self._binary:
            self._parameters["binary_data"] = False
        self._parameters["shared_memory_region"] = region_name
        self._parameters["shared_memory_byte_size"] = byte_size
        if offset != 0:
            self._parameters["shared_memory_offset"] = offset

    def unset_shared_memory(self) -> None:
        """Undo :meth:`set_shared_memory`."""
        self._parameters["binary_data"] = self._binary
        for key in _SHM_KEYS:
            self._parameters.pop(key, None)

    def _get_tensor(self) -> dict[str, Any]:
        """The output's JSON description."""
        tensor: dict[str, Any] = {"name": self._name}
        if self._parameters:
            tensor["parameters"] = self._parameters
        return tensor

    def __repr__(self) -> str:
        return f"InferRequestedOutput({self._name!r})"


class InferResult:
    """The result of an inference: the response JSON and the output tensors.

    ``InferResult(response, verbose)`` accepts any response object with
    ``get(header_name)`` and ``read()`` (as tritonclient's does); the client builds it
    directly from the received buffer.
    """

    _result: dict[str, Any]
    _buffer: memoryview | bytes | None
    _output_name_to_buffer_map: dict[str, int]

    def __init__(self, response: Any, verbose: bool) -> None:
        header_length = response.get("Inference-Header-Content-Length")
        content_encoding = response.get("Content-Encoding")
        self._set(parse_infer_response(response.read(), header_length, content_encoding, verbose))

    def _set(self, parsed: ParsedInferResponse) -> None:
        self._result = parsed.result
        self._buffer = parsed.buffer
        self._output_name_to_buffer_map = parsed.offsets

    @classmethod
    def _from_parsed(cls, parsed: ParsedInferResponse) -> InferResult:
        result = cls.__new__(cls)
        result._set(parsed)
        return result

    @classmethod
    def from_response_body(
        cls,
        response_body: bytes | bytearray | memoryview | str,
        verbose: bool = False,
        header_length: int | str | None = None,
        content_encoding: str | None = None,
    ) -> InferResult:
        """Build a result from a raw response body (e.g. received by another HTTP stack).

        ``header_length`` is the ``Inference-Header-Content-Length`` header (int or str;
        None for a JSON-only body); ``content_encoding`` ``gzip``/``deflate`` bodies are
        decompressed. Outputs are views of ``response_body`` (writable if it is).
        """
        return cls._from_parsed(
            parse_infer_response(response_body, header_length, content_encoding, verbose)
        )

    def as_numpy(self, name: str) -> np.ndarray[Any, Any] | None:
        """The named output as a numpy array, or None if the response has no such output.

        Binary outputs are views of the response buffer (no copy); BYTES outputs are
        object arrays of ``bytes`` (``str`` when the server sent them inside the JSON).
        """
        outputs = self._result.get("outputs")
        if outputs is None:
            return None
        for output in outputs:
            if output["name"] != name:
                continue
            datatype = output["datatype"]
            params = output.get("parameters")
            size = None if params is None else params.get("binary_data_size")
            if size is None:
                array = np.array(output["data"], dtype=triton_to_np_dtype(datatype))
            elif size == 0:
                array = np.empty(0, dtype=triton_to_np_dtype(datatype))
            else:
                if self._buffer is None:
                    raise InferenceServerException(
                        msg=f"output '{name}' claims {size} bytes of binary data but the "
                        "response has no binary part (no Inference-Header-Content-Length)"
                    )
                start = self._output_name_to_buffer_map[name]
                data = self._buffer[start : start + size]
                if datatype == "BYTES":
                    try:
                        array = unpack_array(data)
                    except BytesFramingError:
                        # an InferenceServerException that is also the struct.error
                        # tritonclient raised, with its text
                        array = _walk_bytes_tensor(data)
                else:
                    dtype = TRITON_TO_NUMPY.get(datatype)
                    array = np.frombuffer(data, dtype=dtype if dtype is not None else None)
            shaped: np.ndarray[Any, Any] = array.reshape(output["shape"])
            return shaped
        return None

    def get_output(self, name: str) -> dict[str, Any] | None:
        """The named output's JSON description, or None (KeyError without outputs)."""
        for output in self._result["outputs"]:
            if output["name"] == name:
                return output  # type: ignore[no-any-return]
        return None

    def get_response(self) -> dict[str, Any]:
        """The whole response JSON (model name and version, id, parameters, outputs)."""
        return self._result
