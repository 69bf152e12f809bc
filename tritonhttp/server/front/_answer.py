"""The body of a successful ``/infer`` answer: its JSON header and binary blobs.

Numpy and the standard library only: the server's front end encodes answers with it,
and so does a worker process that answers the client itself (see :mod:`._extensions`,
``DIRECT``), so both write the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...utils._bytes import pack_items
from ..support import _json

__all__ = ["AnswerError", "binary_data", "encode_outputs", "json_values"]

#: one output: (name, datatype, shape, data); BYTES data an object array or list of bytes
Output = tuple[str, str, Sequence[int], Any]


class AnswerError(ValueError):
    """An output cannot be sent the way it was asked for (the message is Triton's)."""


def _items(data: Any) -> list[bytes]:
    values = data if isinstance(data, list) else data.reshape(-1).tolist()
    return [x if isinstance(x, bytes) else bytes(x) for x in values]


def json_values(datatype: str, data: Any) -> bytes:
    """The comma-separated JSON values of one output (inside its ``"data":[...]``)."""
    if datatype == "BYTES":
        return b",".join(map(_json.escape_bytes, _items(data)))
    if datatype in ("FP32", "FP64"):
        return _json.format_doubles(data).encode()
    if datatype == "BOOL":
        return ",".join("true" if x else "false" for x in data.reshape(-1).tolist()).encode()
    return ",".join(map(str, data.reshape(-1).tolist())).encode()


def binary_data(datatype: str, data: Any) -> bytes | memoryview:
    """One output's binary blob (little-endian, C order; BYTES length-prefixed)."""
    if datatype == "BYTES":
        return pack_items(_items(data))
    arr = data
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return memoryview(arr.reshape(-1).view(np.uint8)) if arr.size else b""


def _new_head(name: str, datatype: str, shape: Sequence[int], heads: dict[Any, bytes]) -> bytes:
    """``{"name":...,"datatype":...,"shape":[...]``, kept in ``heads`` (bounded)."""
    head = b'{"name":' + _json.escape_str(name).encode() + b',"datatype":"'
    head += datatype.encode() + b'","shape":[' + ",".join(map(str, shape)).encode() + b"]"
    if len(heads) < 1024:  # (names come from the model, shapes vary: bounded)
        key = (name, datatype, *shape)
        heads[key] = head
    return head


def encode_outputs(
    prefix: bytes,
    parameters: Mapping[str, Any] | None,
    outputs: Sequence[Output],
    binary: Mapping[str, bool | None],
    binary_default: bool,
    heads: dict[Any, bytes],
    place: Callable[[str, str, Any], bool] | None = None,
) -> tuple[bytes, list[bytes | memoryview]]:
    """(JSON header, binary blobs) of an answer.

    ``prefix`` is the header up to the model version (``{"id":..,"model_name":..``);
    ``binary`` says per output name whether it goes as a binary blob (None or missing:
    ``binary_default``). ``place(name, datatype, data)`` may put an output's data
    elsewhere (shared memory) and return True; the header then names the output without
    data. Raises :class:`AnswerError` for an output JSON cannot carry.
    """
    parts = [prefix]
    if parameters:
        parts.append(b',"parameters":' + _json.dumps(parameters))
    parts.append(b',"outputs":[')
    blobs: list[bytes | memoryview] = []
    for i, (name, datatype, shape, data) in enumerate(outputs):
        head = heads.get((name, datatype, *shape))
        if head is None:
            head = _new_head(name, datatype, shape, heads)
        if i:
            parts.append(b",")
        if place is not None and place(name, datatype, data):
            parts.append(head + b"}")
            continue
        chosen = binary.get(name)
        if chosen if chosen is not None else binary_default:
            blob = binary_data(datatype, data)
            size = len(blob) if isinstance(blob, bytes) else blob.nbytes
            parts.append(head + b',"parameters":{"binary_data_size":' + str(size).encode() + b"}}")
            if size:
                blobs.append(blob)
        else:
            if datatype in ("FP16", "BF16"):
                raise AnswerError(
                    f"sending {datatype} data via JSON is not supported. Please use the "
                    "binary data format for output"
                )
            parts.append(head + b',"data":[' + json_values(datatype, data) + b"]}")
    parts.append(b"]}")
    return b"".join(parts), blobs
