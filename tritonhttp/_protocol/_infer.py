"""Inference bodies: the JSON header plus tensor buffers out, and the response parsed back.

Request: the JSON header (key order and inclusion rules of tritonclient) followed by the
raw bytes of every input that carries binary data, kept as separate buffers (never
concatenated unless the caller asks for compression or for one ``bytes`` object).

Response: the JSON header is parsed; binary outputs stay where they are in the response
buffer and are located by offset, so outputs become numpy views without copies.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from .._errors import InferenceServerException, _InvalidType
from ..utils import TRITON_RESERVED_REQUEST_PARAMS, TRITON_RESERVED_REQUEST_PARAMS_PREFIX
from ._json import dumps, loads

__all__ = [
    "InferBody",
    "ParsedInferResponse",
    "build_infer_body",
    "compress_body",
    "parse_infer_response",
]

Buffer = bytes | bytearray | memoryview

_RESERVED = frozenset(TRITON_RESERVED_REQUEST_PARAMS)


class InputLike(Protocol):
    """What the core needs from an ``InferInput``."""

    def _get_tensor(self) -> dict[str, Any]: ...

    def _get_binary_data(self) -> Any: ...


class OutputLike(Protocol):
    """What the core needs from an ``InferRequestedOutput``."""

    def _get_tensor(self) -> dict[str, Any]: ...


class InferBody:
    """An inference request body: JSON header + binary buffers (in input order)."""

    __slots__ = ("buffers", "json", "json_size", "size")

    def __init__(self, json: bytes, buffers: list[Buffer], json_size: int | None) -> None:
        self.json = json
        self.buffers = buffers  # starts with ``json``
        self.json_size = json_size  # None when no input carries binary data
        self.size = sum(map(len, buffers)) if len(buffers) > 1 else len(json)

    def joined(self) -> bytes:
        """The whole body as one ``bytes`` object (copies the tensors)."""
        return self.json if len(self.buffers) == 1 else b"".join(self.buffers)


def build_infer_body(
    inputs: Iterable[InputLike],
    outputs: Sequence[OutputLike] | None = None,
    request_id: Any = "",
    sequence_id: Any = 0,
    sequence_start: Any = False,
    sequence_end: Any = False,
    priority: Any = 0,
    timeout: Any = None,
    parameters: Mapping[str, Any] | None = None,
) -> InferBody:
    """Build the request exactly as tritonclient's ``generate_request_body`` does.

    Raises ``InferenceServerException`` for a reserved custom parameter and for inputs
    or outputs that are not ``InferInput`` / ``InferRequestedOutput`` objects.
    """
    request: dict[str, Any] = {}
    params: dict[str, Any] = {}
    if request_id != "":
        request["id"] = request_id
    if sequence_id != 0 and sequence_id != "":
        params["sequence_id"] = sequence_id
        params["sequence_start"] = sequence_start
        params["sequence_end"] = sequence_end
    if priority != 0:
        params["priority"] = priority
    if timeout is not None:
        params["timeout"] = timeout
    try:
        inputs = list(inputs)
        request["inputs"] = [i._get_tensor() for i in inputs]
        if outputs:
            request["outputs"] = [o._get_tensor() for o in outputs]
        else:
            params["binary_data_output"] = True
    except (AttributeError, TypeError) as e:
        raise _InvalidType(
            f"inputs must be a list of InferInput and outputs a list of InferRequestedOutput ({e})"
        ) from None
    if parameters:
        for key, value in parameters.items():
            if key in _RESERVED or key.startswith(TRITON_RESERVED_REQUEST_PARAMS_PREFIX):
                raise InferenceServerException(
                    msg=f'Parameter "{key}" is a reserved parameter and cannot be specified.'
                )
            params[key] = value
    if params:
        request["parameters"] = params
    header = dumps(request).encode()  # ASCII: character count == byte count
    buffers: list[Buffer] = [header]
    for i in inputs:
        raw = i._get_binary_data()
        if raw is not None:
            buffers.append(raw)
    return InferBody(header, buffers, None if len(buffers) == 1 else len(header))


def compress_body(body: InferBody, algorithm: str | None) -> tuple[list[Buffer], int, str | None]:
    """(buffers, size, Content-Encoding) after optional ``gzip``/``deflate`` compression.

    Any other algorithm value leaves the body as is (as tritonclient does).
    """
    if algorithm == "gzip":
        data = gzip.compress(body.joined())
    elif algorithm == "deflate":
        data = zlib.compress(body.joined())
    else:
        return body.buffers, body.size, None
    return [data], len(data), algorithm


class ParsedInferResponse:
    """The JSON header of an inference response and where each binary output lies."""

    __slots__ = ("buffer", "offsets", "result")

    def __init__(
        self,
        result: dict[str, Any],
        buffer: memoryview | bytes | None,
        offsets: dict[str, int],
    ) -> None:
        self.result = result
        self.buffer = buffer
        self.offsets = offsets


def _decompress(body: Buffer | str, content_encoding: str | None) -> Buffer | str:
    if content_encoding == "gzip":
        return bytearray(gzip.decompress(body))  # type: ignore[arg-type]  # str: TypeError
    if content_encoding == "deflate":
        return bytearray(zlib.decompress(body))  # type: ignore[arg-type]
    return body


def parse_infer_response(
    body: Buffer | str,
    header_length: int | str | None,
    content_encoding: str | None,
    verbose: bool = False,
) -> ParsedInferResponse:
    """Parse an inference response body (tritonclient's rules; see ``InferResult``).

    ``header_length`` is the ``Inference-Header-Content-Length`` value (None for a
    JSON-only response); ``gzip``/``deflate`` bodies are decompressed first, other
    encodings are ignored. Binary outputs are not copied: ``buffer`` is a view of the
    body after the JSON header (writable when the body is). Unlike tritonclient, a
    ``memoryview`` body is accepted.
    """
    given = body
    body = _decompress(body, content_encoding)
    if header_length is None:
        content: Any = bytes(body) if isinstance(body, memoryview) else body
        if verbose:
            # what tritonclient printed: the body as given, bytes when decompressed
            print(bytes(content) if body is not given else content)
        try:
            result = loads(content)
        except UnicodeDecodeError as e:
            raise InferenceServerException(
                msg="Failed to encode using UTF-8. Please use binary_data=True, if you want "
                f"to pass a byte array. UnicodeError: {e}"
            ) from None
        return ParsedInferResponse(result, None, {})
    length = int(header_length)
    header: Any
    rest: Any
    if length == -1:  # tritonclient reads it as "all": the whole body is both
        header = rest = body if isinstance(body, str) else memoryview(body)
        if not isinstance(body, str):
            header = bytes(header)
    elif isinstance(body, str):
        header = body[:length]
        rest = body[length:]
    else:
        view = memoryview(body)
        header = bytes(view[:length])
        rest = view[length:]
    if verbose:
        # what tritonclient printed: a slice of the body as given, bytes when decompressed
        if body is given and type(given) is not memoryview:
            print(given if length == -1 else given[:length])
        else:
            print(header)
    result = loads(header)
    offsets: dict[str, int] = {}
    position = 0
    for output in result["outputs"]:
        params = output.get("parameters")
        if params is not None:
            size = params.get("binary_data_size")
            if size is not None:
                offsets[output["name"]] = position
                position = position + size  # (the TypeError text of tritonclient's)
    return ParsedInferResponse(result, rest, offsets)
