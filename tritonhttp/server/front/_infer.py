"""The body of ``/infer``: JSON header + binary blobs in, JSON (+ binary) out."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import utils as _utils_pkg  # noqa: F401  (keeps tritonhttp.utils importable first)
from ...utils._dtypes import TRITON_TO_NUMPY
from .. import _json
from .._answer import AnswerError, binary_data, encode_outputs
from .._extensions import DirectLink
from ..core._errors import Code, CoreError
from ..core._model import ModelVersion
from ..core._shm import RegionSlice, SharedMemoryRegistry
from ..core._types import (
    DirectOffer,
    InferRequest,
    InferResponse,
    InputTensor,
    OutputTensor,
    ParamValue,
)
from ._http import parse_json

__all__ = [
    "OutputSpec",
    "direct_offer",
    "encode_response",
    "inflate",
    "parse_infer_request",
    "pick_encoding",
    "plain_outputs",
]

_I64_MIN, _I64_MAX, _U64_MAX = -(2**63), 2**63 - 1, 2**64 - 1

_NOT_STR = "attempt to access JSON non-string as string"
_NOT_UINT = "attempt to access JSON non-unsigned-integer as unsigned-integer"
_NOT_BOOL = "attempt to access JSON non-boolean as boolean"
_NOT_ARRAY = "attempt to access JSON non-array as array"
_KNOWN_TYPES = frozenset(TRITON_TO_NUMPY)


def _is_uint(v: object) -> bool:
    return type(v) is int and 0 <= v <= _U64_MAX


def _err500(message: str) -> CoreError:
    return CoreError(message, Code.INTERNAL)


def _member(obj: Any, key: str, field: str | None = None) -> Any:
    label = field or key
    if not isinstance(obj, dict) or key not in obj:
        raise _err500(
            f"Unable to parse '{label}': attempt to access non-existing object member '{key}'"
        )
    return obj[key]


def _string(obj: Any, key: str) -> str:
    value = _member(obj, key)
    if not isinstance(value, str):
        raise _err500(f"Unable to parse '{key}': {_NOT_STR}")
    return value


def _uint(value: Any, label: str) -> int:
    if not _is_uint(value):
        raise _err500(f"Unable to parse '{label}': {_NOT_UINT}")
    return int(value)


@dataclass(slots=True)
class OutputSpec:
    """How the client wants one output back."""

    name: str
    binary: bool | None = None
    classification: int = 0
    #: --- shared memory: where the output goes (bounds checked at parse time)
    shm: RegionSlice | None = None


@dataclass(slots=True)
class ParsedInfer:
    request: InferRequest
    outputs: dict[str, OutputSpec]
    binary_default: bool


# ----------------------------------------------------------------------------- request


def inflate(body: bytes | bytearray | memoryview, limit: int) -> bytearray:
    """gzip or zlib data (auto-detected); corrupt data yields what inflated before it."""
    d = zlib.decompressobj(47)
    out = bytearray()
    try:
        data = bytes(body)
        while data:
            out += d.decompress(data, max(1, limit - len(out) + 1))
            if len(out) > limit:
                raise CoreError("decompressed request body too large", Code.INVALID_ARG)
            data = d.unconsumed_tail
            if d.eof:
                break
    except zlib.error:
        pass
    return out


def _flatten(data: list[Any]) -> list[Any]:
    out: list[Any] = []
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            out.append(item)
        else:
            stack.pop()
    return out


def _json_data(data: Any, wire: str, name: str, count: int) -> np.ndarray[Any, Any]:
    if not isinstance(data, list):
        raise _err500(f"Unable to parse 'data': {_NOT_ARRAY}")
    flat = data
    top = set(map(type, data))
    types: set[type] | None = top
    if list in top:
        flat = _flatten(data)
        types = None
    if wire == "BYTES":
        items = []
        for x in flat:
            if not isinstance(x, str):
                raise _err500(f"Unable to parse JSON bytes array: {_NOT_STR}")
            try:
                items.append(x.encode("utf-8"))
            except UnicodeEncodeError:
                items.append(x.encode("utf-8", "surrogateescape"))
        arr = np.empty(len(items), dtype=np.object_)
        arr[:] = items
        return arr
    n = len(flat)
    if types is None or n > count:
        checked = flat[:count] if n > count else flat
        types = set(map(type, checked))
    else:
        checked = flat
    dtype = TRITON_TO_NUMPY[wire]
    if wire == "BOOL":
        if types - {bool}:
            raise _err500(f"Unable to parse 'data': {_NOT_BOOL}")
    elif dtype.kind == "i":
        if types - {int} or (checked and (min(checked) < _I64_MIN or max(checked) > _I64_MAX)):
            raise _err500(
                "Unable to parse 'data': attempt to access JSON non-signed-integer as "
                "signed-integer"
            )
    elif dtype.kind == "u":
        if types - {int} or (checked and (min(checked) < 0 or max(checked) > _U64_MAX)):
            raise _err500(f"Unable to parse 'data': {_NOT_UINT}")
    elif types - {int, float}:
        raise _err500("Unable to parse 'data': attempt to access JSON non-number as double")
    if n != count:
        raise _err500("Unable to parse 'data': Shape does not match true shape of 'data' field")
    if wire == "BOOL":
        return np.array(flat, dtype=np.bool_)
    if dtype.kind == "f":
        return np.array(flat, dtype=dtype)  # double -> float32 rounds as RapidJSON's cast does
    arr = np.array(flat, dtype=np.int64 if dtype.kind == "i" else np.uint64)
    return arr if arr.dtype == dtype else arr.astype(dtype)  # wraps like a C cast


def _request_parameters(params: Any, req: InferRequest) -> bool:
    """Consume the reserved parameters; returns ``binary_data_output``."""
    if not isinstance(params, dict):
        raise _err500("failed to get request params.: attempt to get members for non-object")
    binary_default = False
    custom: dict[str, ParamValue] = {}
    for key, value in params.items():
        if key == "sequence_id":
            if _is_uint(value):
                req.correlation_id = int(value)
            elif isinstance(value, str):
                req.correlation_id = value
            else:
                raise _err500(f"Unable to parse 'sequence_id': {_NOT_STR}")
        elif key in ("sequence_start", "sequence_end"):
            if not isinstance(value, bool):
                raise _err500(f"Unable to parse '{key}': {_NOT_BOOL}")
            if value:
                req.flags |= 1 if key == "sequence_start" else 2
        elif key == "priority":
            req.priority = _uint(value, key)
        elif key == "timeout":
            req.timeout_us = _uint(value, key)
        elif key == "binary_data_output":
            if not isinstance(value, bool):
                raise _err500(f"Unable to parse 'binary_data_output': {_NOT_BOOL}")
            binary_default = value
        elif key.startswith("triton_"):
            raise CoreError(
                "parameter keys starting with 'triton_' are reserved for Triton usage and "
                "should not be specified."
            )
        elif isinstance(value, (str, bool, float)):
            custom[key] = value
        elif type(value) is int:
            custom[key] = value if _I64_MIN <= value <= _I64_MAX else float(value)
        else:
            raise CoreError(
                f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or "
                "'string'."
            )
    req.parameters = custom
    return binary_default


def parse_infer_request(
    body: bytearray | memoryview,
    header_len: int,
    model: ModelVersion,
    shm: SharedMemoryRegistry,
) -> ParsedInfer:
    """Parse a (decompressed) infer body; raises CoreError (answered as application/json)."""
    req = InferRequest(id="", inputs={})
    view = memoryview(body)
    if header_len == 0:
        req.raw = True
        req.inputs["raw_input"] = InputTensor("raw_input", "", [], raw=view)
        return ParsedInfer(req, {}, True)
    doc = parse_json(view[:header_len])
    binary_default = False
    if isinstance(doc, dict):
        if "id" in doc:
            if not isinstance(doc["id"], str):
                raise _err500(f"Unable to parse 'id': {_NOT_STR}")
            req.id = doc["id"]
        if "parameters" in doc:
            binary_default = _request_parameters(doc["parameters"], req)
    inputs = _member(doc, "inputs")
    if not isinstance(inputs, list):
        raise _err500(f"Unable to parse 'inputs': {_NOT_ARRAY}")
    offset = header_len
    end = len(body)
    for item in inputs:
        if type(item) is dict and len(item) == 4 and "data" in item and _fast_json_input(item, req):
            continue
        _parse_input(item, req, model, shm, view)
        t = req.inputs[_string(item, "name")]
        size = _binary_size(item)
        if size is not None:
            remaining = end - offset
            if size > remaining:
                raise CoreError(
                    f"unexpected size for input '{t.name}', expecting {size - remaining} "
                    f"additional bytes for model '{model.name}'"
                )
            t.raw = view[offset : offset + size]
            offset += size
    if offset < end:
        raise CoreError(f"unexpected additional input data for model '{model.name}'")
    outputs: dict[str, OutputSpec] = {}
    if isinstance(doc, dict) and "outputs" in doc:
        out_list = doc["outputs"]
        if not isinstance(out_list, list):
            raise _err500(f"Unable to parse 'outputs': {_NOT_ARRAY}")
        requested: list[str] = []
        for item in out_list:
            spec = _parse_output(item, shm, req)
            if spec.name not in outputs:
                outputs[spec.name] = spec
                requested.append(spec.name)
        req.requested_outputs = requested or None
    return ParsedInfer(req, outputs, binary_default)


_FAST_TYPES = frozenset(_KNOWN_TYPES - {"FP16", "BF16"})


def _fast_json_input(item: dict[str, Any], req: InferRequest) -> bool:
    """The common ``{"name","datatype","shape","data"}`` input; False: take the full path."""
    name = item.get("name")
    datatype = item.get("datatype")
    shape = item.get("shape")
    data = item["data"]
    if (
        type(name) is not str
        or type(datatype) is not str
        or datatype not in _FAST_TYPES
        or type(shape) is not list
        or type(data) is not list
        or name in req.inputs
    ):
        return False
    count = 1
    for d in shape:
        if type(d) is not int or d < 0 or d > _U64_MAX:
            return False
        count *= d
    if count == 0:
        return False
    req.inputs[name] = InputTensor(name, datatype, shape, _json_data(data, datatype, name, count))
    return True


def _params_of(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        p = item.get("parameters")
        if isinstance(p, dict):
            return p
    return {}


def _binary_size(item: Any) -> int | None:
    params = _params_of(item)
    if "binary_data_size" not in params:
        return None
    return _uint(params["binary_data_size"], "binary_data_size")


def _parse_input(
    item: Any,
    req: InferRequest,
    model: ModelVersion,
    shm: SharedMemoryRegistry,
    view: memoryview,
) -> None:
    params = _params_of(item)
    present = []
    if isinstance(item, dict) and "data" in item:
        present.append("data")
    if "binary_data_size" in params:
        present.append("binary_data_size")
    if "shared_memory_region" in params:
        present.append("shared_memory_region")
    if len(present) != 1:
        listed = "no field is set" if not present else "set" + "".join(f" '{p}'" for p in present)
        raise CoreError(
            "Input must set only one of the following fields: 'data', 'binary_data_size' in "
            "'parameters', 'shared_memory_region' in 'parameters'. But " + listed
        )
    name = _string(item, "name")
    datatype = _string(item, "datatype")
    shape_json = _member(item, "shape")
    if not isinstance(shape_json, list):
        raise _err500(f"Unable to parse 'shape': {_NOT_ARRAY}")
    shape = [_uint(d, "shape") for d in shape_json]
    if name in req.inputs:
        raise CoreError(f"{req.log_prefix()}input '{name}' already exists in request")
    tensor = InputTensor(name, datatype, shape)
    source = present[0]
    if source == "shared_memory_region":
        region_name = params["shared_memory_region"]
        if not isinstance(region_name, str):
            raise _err500(f"Unable to parse 'shared_memory_region': {_NOT_STR}")
        offset = _uint(params.get("shared_memory_offset", 0), "shared_memory_offset")
        size = _uint(params.get("shared_memory_byte_size", 0), "shared_memory_byte_size")
        region_name = region_name.partition("\0")[0]  # --- shm: Triton reads a C string
        # --- shared memory: the model reads a system region in place (zero-copy view of
        # the mapping; it stays registered until the response is sent), a CUDA region
        # through a host copy
        part = shm.lookup(region_name, offset, size)
        tensor.raw = part.read()
        req.regions.append(part.region)
    elif source == "binary_data_size":
        _uint(params["binary_data_size"], "binary_data_size")
    else:
        count = 1
        for d in shape:
            count *= d
        if count == 0:
            dtype = TRITON_TO_NUMPY.get(datatype, np.dtype(np.uint8))
            tensor.array = np.empty(shape, dtype=dtype)
        elif datatype in ("FP16", "BF16"):
            raise CoreError(
                f"receiving {datatype} data via JSON is not supported. Please use the binary "
                f"data format for input {name}"
            )
        elif datatype not in _KNOWN_TYPES:
            raise CoreError(f"invalid datatype for input {name}")
        else:
            tensor.array = _json_data(item["data"], datatype, name, count)
    req.inputs[name] = tensor


def _parse_output(item: Any, shm: SharedMemoryRegistry, req: InferRequest) -> OutputSpec:
    name = _string(item, "name")
    spec = OutputSpec(name)
    params = _params_of(item)
    if "binary_data" in params:
        value = params["binary_data"]
        if not isinstance(value, bool):
            raise _err500(f"Unable to parse 'binary_data': {_NOT_BOOL}")
        spec.binary = value
    if "classification" in params:
        value = params["classification"]
        if not _is_uint(value):
            raise _err500(f"Unable to set 'classification': {_NOT_UINT}")
        spec.classification = int(value)
    if "shared_memory_region" in params:
        region_name = params["shared_memory_region"]
        if not isinstance(region_name, str):
            raise _err500(f"Unable to parse 'shared_memory_region': {_NOT_STR}")
        if spec.classification:
            raise CoreError("Output can't set both 'shared_memory_region' and 'classification'")
        if spec.binary:
            raise CoreError("Output can't set both 'shared_memory_region' and 'binary_data'")
        offset = _uint(params.get("shared_memory_offset", 0), "shared_memory_offset")
        size = _uint(params.get("shared_memory_byte_size", 0), "shared_memory_byte_size")
        region_name = region_name.partition("\0")[0]  # --- shm: Triton reads a C string
        spec.shm = shm.lookup(region_name, offset, size)
        req.regions.append(spec.shm.region)
    return spec


# ----------------------------------------------------------------------------- response


def _to_std_string(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)


def _classify(out: OutputTensor, k: int, labels: list[str] | None, batching: bool) -> OutputTensor:
    if out.datatype not in (
        "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP32", "FP64"
    ):  # fmt: skip
        raise CoreError(
            f"class result not available for output due to unsupported type '{out.datatype}'"
        )
    arr = out.array
    rows = arr.reshape(arr.shape[0], -1) if batching and arr.ndim >= 1 else arr.reshape(1, -1)
    kk = min(k, rows.shape[1])
    results: list[bytes] = []
    for row in rows:
        order = np.argsort(-row.astype(np.float64), kind="stable")[:kk]
        for idx in order.tolist():
            text = f"{_to_std_string(row[idx].item())}:{idx}"
            if labels is not None and idx < len(labels):
                text += f":{labels[idx]}"
            results.append(text.encode())
    shape = [rows.shape[0], kk] if batching and arr.ndim >= 1 else [kk]
    items = np.empty(len(results), dtype=np.object_)
    items[:] = results
    return OutputTensor(out.name, "BYTES", shape, items)


_NO_CHOICES: dict[str, bool | None] = {}


def _outputs_prefix(req: InferRequest, model: ModelVersion) -> bytes:
    """The answer's JSON header up to the model version (cached per model version)."""
    prefix = model.wire_prefix
    if not prefix:
        prefix = model.wire_prefix = (
            b'"model_name":'
            + _json.escape_str(model.name).encode()
            + b',"model_version":"'
            + str(model.version).encode()
            + b'"'
        )
    if req.id:
        return b'{"id":' + _json.escape_str(req.id).encode() + b"," + prefix
    return b"{" + prefix


def _shm_writer(specs: dict[str, OutputSpec]) -> Callable[[str, str, Any], bool]:
    """``place`` for :func:`encode_outputs`: outputs asked into shared memory go there."""

    def place(name: str, datatype: str, data: Any) -> bool:
        spec = specs.get(name)
        if spec is None or spec.shm is None:
            return False
        # --- shared memory: written straight into the region (one copy, none when the
        # output already is that memory)
        blob = binary_data(datatype, data)
        size = len(blob) if isinstance(blob, bytes) else blob.nbytes
        if size > spec.shm.byte_size:
            raise CoreError(
                f"shared memory size specified with the request for output '{name}' "
                f"({spec.shm.byte_size} bytes) should be at least {size} bytes to hold "
                "the results",
                Code.INTERNAL,
            )
        spec.shm.write(blob)
        return True

    return place


def encode_response(
    parsed: ParsedInfer,
    response: InferResponse,
    model: ModelVersion,
) -> tuple[bytes, list[bytes | memoryview]]:
    """(JSON header, binary blobs) of a successful response; CoreError (text/plain) else."""
    specs = parsed.outputs
    outputs = response.outputs
    binary: dict[str, bool | None] = _NO_CHOICES
    place: Callable[[str, str, Any], bool] | None = None
    if specs:  # (the request lists outputs)
        binary = {name: spec.binary for name, spec in specs.items()}
        if any(spec.classification for spec in specs.values()):
            batching = model.config is not None and model.config.max_batch_size > 0
            outputs = [
                _classify(o, s.classification, model.labels.get(o.name), batching)
                if (s := specs.get(o.name)) is not None and s.classification
                else o
                for o in outputs
            ]
        if any(spec.shm is not None for spec in specs.values()):
            place = _shm_writer(specs)

    try:
        return encode_outputs(
            _outputs_prefix(parsed.request, model),
            response.parameters,
            outputs,
            binary,
            parsed.binary_default,
            model.wire_heads,
            place,
        )
    except AnswerError as e:
        raise CoreError(str(e)) from None


def plain_outputs(parsed: ParsedInfer) -> bool:
    """No output is asked with classification or into shared memory (which only the
    server does): another process may encode and send the answer."""
    return not any(spec.classification or spec.shm is not None for spec in parsed.outputs.values())


def direct_offer(parsed: ParsedInfer, model: ModelVersion, link: DirectLink) -> DirectOffer:
    """The offer to answer ``parsed`` (:func:`plain_outputs`) on ``link`` for the backend."""
    specs = parsed.outputs
    binary = {name: spec.binary for name, spec in specs.items()} if specs else {}
    answer = (link.key, _outputs_prefix(parsed.request, model), binary, parsed.binary_default)
    return DirectOffer(link.key, link.fd, link.on_close, (link.json_head, link.binary_head), answer)


def pick_encoding(header: bytes | None) -> str | None:
    """The response Content-Encoding Triton would pick from Accept-Encoding (None = identity)."""
    if not header:
        return None
    best, best_weight = None, 0.0
    for item in header.decode("latin-1").split(","):
        item = item.lstrip(" ")
        coding, sep, weight_text = item.partition(";q=")
        if coding not in ("identity", "gzip", "deflate"):
            continue
        try:
            weight = float(weight_text) if sep else 1.0
        except ValueError:
            continue
        if weight > best_weight:
            best, best_weight = coding, weight
    return None if best in (None, "identity") else best


def compress(data: bytes, coding: str) -> bytes:
    c = zlib.compressobj(wbits=31) if coding == "gzip" else zlib.compressobj()
    return c.compress(data) + c.flush()
