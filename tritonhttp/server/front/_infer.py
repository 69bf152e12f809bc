"""The body of ``/infer``: JSON header + binary blobs in, JSON (+ binary) out."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import utils as _utils_pkg  # noqa: F401  (keeps tritonhttp.utils importable first)
from ...utils._dtypes import TRITON_TO_NUMPY
from ..core._errors import Code, CoreError
from ..core._types import (
    InferRequest,
    InferResponse,
    InputTensor,
    OutputTensor,
    ParamValue,
)
from ..support import _json
from ._answer import AnswerError, binary_data, encode_outputs
from ._http import parse_json

if TYPE_CHECKING:
    from ..core._admission import Admission
    from ..core._model import ModelVersion
    from ..core._shm import RegionSlice, SharedMemoryRegistry

__all__ = [
    "OutputSpec",
    "ParsedInfer",
    "answer_spec",
    "answerable_elsewhere",
    "encode_response",
    "inflate",
    "parse_infer_request",
    "pick_encoding",
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
    """A string member as Triton reads it: a C string, cut at its first NUL."""
    value = _member(obj, key)
    if not isinstance(value, str):
        raise _err500(f"Unable to parse '{key}': {_NOT_STR}")
    return value.partition("\0")[0] if "\0" in value else value


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
        arr: np.ndarray[Any, Any] = np.empty(len(items), dtype=np.object_)
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


_RESERVED_PARAMS = frozenset(
    ["sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "binary_data_output"]
)


def _request_parameters(params: Any, req: InferRequest) -> bool:
    """Consume the reserved parameters; returns ``binary_data_output``."""
    if not isinstance(params, dict):
        raise _err500("failed to get request params.: attempt to get members for non-object")
    binary_default = False
    custom: dict[str, ParamValue] = {}
    for key, value in params.items():
        if "\0" in key:
            # Triton lists the keys as C strings (cut at the NUL), then looks each up
            key = key.partition("\0")[0]
            if key not in _RESERVED_PARAMS and key.startswith("triton_"):
                raise CoreError(
                    "parameter keys starting with 'triton_' are reserved for Triton usage and "
                    "should not be specified."
                )
            if key not in params:
                if key in _RESERVED_PARAMS:
                    raise _err500(
                        f"Unable to parse '{key}': attempt to access non-existing object "
                        f"member '{key}'"
                    )
                raise _err500(f"parameter key '{key}' was not found in the JSON")
            value = params[key]
        if key == "sequence_id":
            if _is_uint(value):
                req.correlation_id = int(value)
            elif isinstance(value, str):
                req.correlation_id = value.partition("\0")[0]  # (a C string in Triton)
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
        elif isinstance(value, str):
            custom[key] = value.partition("\0")[0]  # (a C string in Triton)
        elif isinstance(value, (bool, float)):
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
    model: ModelVersion | Admission,
    shm: SharedMemoryRegistry | None,
) -> ParsedInfer:
    """Parse a (decompressed) infer body; raises CoreError (answered as application/json).

    Two things RapidJSON and Triton do that a Python dict does not: an object may repeat a
    member (lookups find the first), and names are read as C strings (cut at a NUL, which
    JSON text can only carry as ``\\u0000``). A document with a NUL escape is parsed
    keeping first members and read without the fast path. A repeated member shows as more
    ':' in the text than members and ':' inside strings in the parsed document: the
    document is then parsed again keeping first members.
    """
    view = memoryview(body)
    if header_len == 0:
        req = InferRequest(id="", inputs={})
        req.raw = True
        req.inputs["raw_input"] = InputTensor("raw_input", "", [], raw=_raw_body(view, model))
        return ParsedInfer(req, {}, True)
    header = bytes(view[:header_len])
    if b"\\" in header and _NUL_ESCAPE in header:
        doc = parse_json(header, first_wins=True)
        return _parse_doc(doc, view, header_len, model, shm, fast=False)[0]
    doc = parse_json(header)
    colons = header.count(b":")
    try:
        parsed, members = _parse_doc(doc, view, header_len, model, shm)
    except CoreError:
        if _no_repeats(doc, header, colons):
            raise
        members = -1
    if members != colons and not (members >= 0 and _no_repeats(doc, header, colons)):
        # a member repeats: read what RapidJSON's lookups find
        doc = parse_json(header, first_wins=True)
        return _parse_doc(doc, view, header_len, model, shm)[0]
    return parsed


def _raw_body(view: memoryview, model: ModelVersion | Admission) -> memoryview:
    """The body of a request without a JSON header, as the one input's data. A model whose
    one input is BYTES gets the whole body as a single element (as Triton hands it over):
    framed here with its length, as a BYTES input's data is."""
    rules: Any = getattr(model, "admission", model)  # (a ModelVersion holds its rules)
    specs = rules.inputs
    if len(specs) == 1 and next(iter(specs.values())).wire == "BYTES":
        return memoryview(len(view).to_bytes(4, "little") + view)
    return view


def _no_repeats(doc: Any, header: bytes, colons: int) -> bool:
    """Whether no object of ``doc`` (parsed from ``header``, holding ``colons`` ':')
    repeated a member. Each member has a ':' and so may a string: when the document
    parsed accounts for them all, none was dropped. (A ':' escaped as ``\\u003a`` would
    count in a string and not in the text: such documents are taken to repeat.)"""
    if type(doc) is not dict:
        return True  # (nothing read by name)
    if b"\\" in header and (b"\\u003a" in header or b"\\u003A" in header):
        return False
    return colons == _colons_in(doc)


def _colons_in(value: Any) -> int:
    """The ':' of ``value``'s JSON text: one per member, and those inside its strings. A
    list that starts with a number is not looked into (the count is then too small, and
    taken for a repeated member: safe, only slower). Any depth the parser takes: no
    recursion."""
    n = 0
    stack = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            n += value.count(":")
        elif isinstance(value, dict):
            n += len(value)
            for k, v in value.items():
                n += k.count(":")
                stack.append(v)
        elif isinstance(value, list) and value:
            first = value[0]
            if isinstance(first, str):
                try:
                    n += "".join(value).count(":")  # (a list of strings: BYTES data)
                    continue
                except TypeError:
                    pass
            elif not isinstance(first, (list, dict)):
                continue
            stack.extend(value)
    return n


def _parse_doc(
    doc: Any,
    view: memoryview,
    header_len: int,
    model: ModelVersion | Admission,
    shm: SharedMemoryRegistry | None,
    fast: bool = True,
) -> tuple[ParsedInfer, int]:
    """The request ``doc`` describes, and how many members its request, inputs, outputs
    and their parameters have. ``fast=False``: names may hold NULs (no fast path)."""
    req = InferRequest(id="", inputs={})
    binary_default = False
    members = 0
    if isinstance(doc, dict):
        members = len(doc)
        if "id" in doc:
            if not isinstance(doc["id"], str):
                raise _err500(f"Unable to parse 'id': {_NOT_STR}")
            req.id = doc["id"] if fast else doc["id"].partition("\0")[0]
        if "parameters" in doc:
            params = doc["parameters"]
            binary_default = _request_parameters(params, req)
            members += len(params)
    inputs = _member(doc, "inputs")
    if not isinstance(inputs, list):
        raise _err500(f"Unable to parse 'inputs': {_NOT_ARRAY}")
    offset = header_len
    end = len(view)
    for item in inputs:
        if (
            type(item) is dict
            and len(item) == 4
            and "data" in item
            and fast
            and _fast_json_input(item, req)
        ):
            members += 4
            continue
        t, size, n = _parse_input(item, req, model, shm, view)
        members += n
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
            members += len(item) + len(_params_of(item))
            if spec.name not in outputs:
                outputs[spec.name] = spec
                requested.append(spec.name)
        req.requested_outputs = requested or None
        into = {name: spec.shm for name, spec in outputs.items() if spec.shm is not None}
        if into and not any(spec.classification for spec in outputs.values()):
            req.output_regions = into  # (a backend may write them into their regions)
        if requested:  # (Triton applies binary_data_output to unlisted outputs only)
            binary_default = False
    return ParsedInfer(req, outputs, binary_default), members


_NUL_ESCAPE = b"\\u0000"


def _member_count(doc: dict[str, Any]) -> int:
    """How many members the objects Triton reads by name have: the request, its
    parameters, inputs, outputs and theirs."""
    n = len(doc)
    params = doc.get("parameters")
    if type(params) is dict:
        n += len(params)
    for key in ("inputs", "outputs"):
        items = doc.get(key)
        if type(items) is list:
            for item in items:
                if type(item) is dict:
                    n += len(item)
                    params = item.get("parameters")
                    if type(params) is dict:
                        n += len(params)
    return n


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
        if type(d) is not int or d < 0 or d > _I64_MAX:
            return False
        count *= d
    if count == 0 or count > _I64_MAX or not shape:
        return False
    req.inputs[name] = InputTensor(name, datatype, shape, _json_data(data, datatype, name, count))
    return True


def _params_of(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        p = item.get("parameters")
        if isinstance(p, dict):
            return p
    return {}


def _parse_input(
    item: Any,
    req: InferRequest,
    model: ModelVersion | Admission,
    shm: SharedMemoryRegistry | None,
    view: memoryview,
) -> tuple[InputTensor, int | None, int]:
    """Add the input ``item`` describes to ``req``: (its tensor, its binary data size if
    it has binary data, how many members it and its parameters have)."""
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
    # Triton keeps dims as int64: one over 2**63 - 1 wraps to a negative dim
    shape = [_uint(d, "shape") for d in shape_json]
    if shape and max(shape) > _I64_MAX:
        shape = [d - 2**64 if d > _I64_MAX else d for d in shape]
    if name in req.inputs:
        raise CoreError(f"{req.log_prefix()}input '{name}' already exists in request")
    # (an unknown datatype passes when no JSON data is read; admission names it '<invalid>')
    tensor = InputTensor(name, datatype if datatype in _KNOWN_TYPES else "<invalid>", shape)
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
        part = _lookup(shm, region_name, offset, size)
        tensor.raw = part.read()
        req.regions.append(part.region)
    elif source == "binary_data_size":
        size = _uint(params["binary_data_size"], "binary_data_size")
        req.inputs[name] = tensor
        return tensor, size, len(item) + len(params)
    else:
        # Triton reads shared-memory offset and size here too (and then ignores them)
        for key in ("shared_memory_offset", "shared_memory_byte_size"):
            if key in params:
                _uint(params[key], key)
        count = _element_count(shape)
        if count == 0:  # Triton reads no data at all
            dtype = TRITON_TO_NUMPY.get(datatype, np.dtype(np.uint8))
            # (the int64 count may wrap to 0 with huge dims: no such array; the shape is
            # refused at admission)
            empty = 0 in shape and max(shape) <= _I64_MAX and min(shape) >= 0
            tensor.array = np.empty(shape if empty else 0, dtype=dtype)
        elif not isinstance(item["data"], list):
            raise _err500(f"Unable to parse 'data': {_NOT_ARRAY}")
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
    return tensor, None, len(item) + len(params)


def _element_count(shape: list[int]) -> int:
    """Triton's element count of a shape: int64 arithmetic (wrapping), 0 for ``[]``, -1
    with a -1 dim."""
    if not shape:
        return 0
    if -1 in shape:
        return -1
    count = 1
    for d in shape:
        count *= d
    if count > _I64_MAX or count < _I64_MIN:
        count = (count + 2**63) % 2**64 - 2**63
    return count


def _lookup(shm: SharedMemoryRegistry | None, name: str, offset: int, size: int) -> RegionSlice:
    if shm is None:  # (a worker process parsing a request: the registry is the server's)
        raise LookupError("shared memory regions are looked up by the server")
    return shm.lookup(name, offset, size)


def _parse_output(item: Any, shm: SharedMemoryRegistry | None, req: InferRequest) -> OutputSpec:
    params = _params_of(item)
    into_shm = "shared_memory_region" in params
    binary: bool | None = None
    if into_shm:
        # into shared memory: neither classification (whatever its value) nor binary data;
        # Triton checks these before the output's name
        if "classification" in params:
            raise CoreError("Output can't set both 'shared_memory_region' and 'classification'")
        if "binary_data" in params:
            binary = params["binary_data"]
            if not isinstance(binary, bool):
                raise _err500(f"Unable to set 'binary_data': {_NOT_BOOL}")
            if binary:
                raise CoreError("Output can't set both 'shared_memory_region' and 'binary_data'")
    spec = OutputSpec(_string(item, "name"), binary)
    if not into_shm:
        if "classification" in params:
            value = params["classification"]
            if not _is_uint(value):
                raise _err500(f"Unable to set 'classification': {_NOT_UINT}")
            spec.classification = int(value) % 2**32  # (Triton keeps it as a uint32)
        if "binary_data" in params:
            value = params["binary_data"]
            if not isinstance(value, bool):
                raise _err500(f"Unable to parse 'binary_data': {_NOT_BOOL}")
            spec.binary = value
    else:
        region_name = params["shared_memory_region"]
        if not isinstance(region_name, str):
            raise _err500(f"Unable to parse 'shared_memory_region': {_NOT_STR}")
        offset = _uint(params.get("shared_memory_offset", 0), "shared_memory_offset")
        size = _uint(params.get("shared_memory_byte_size", 0), "shared_memory_byte_size")
        region_name = region_name.partition("\0")[0]  # --- shm: Triton reads a C string
        spec.shm = _lookup(shm, region_name, offset, size)
        req.regions.append(spec.shm.region)
    return spec


# ----------------------------------------------------------------------------- response


def _to_std_string(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)


def _classify(
    out: OutputTensor, k: int, labels: list[bytes] | None, batching: bool
) -> OutputTensor:
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
            text = f"{_to_std_string(row[idx].item())}:{idx}".encode()
            if labels is not None and idx < len(labels) and labels[idx]:
                text += b":" + labels[idx]  # (an empty label is left out, as in Triton)
            results.append(text)
    shape = [rows.shape[0], kk] if batching and arr.ndim >= 1 else [kk]
    items = np.empty(len(results), dtype=np.object_)
    items[:] = results
    return OutputTensor(out.name, "BYTES", shape, items)


_NO_CHOICES: dict[str, bool | None] = {}


def _outputs_prefix(req: InferRequest, model: ModelVersion | Admission) -> bytes:
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


def _write_shm_outputs(
    specs: dict[str, OutputSpec], outputs: Sequence[OutputTensor]
) -> Callable[[str, str, Any], bool]:
    """Write the outputs asked into shared memory into their regions, in the response's
    order, before the answer is encoded (as Triton's backend fills them before its front
    end encodes the JSON: an output JSON cannot carry then fails an answer whose regions
    hold their outputs); ``place`` for :func:`encode_outputs`: whether an output went
    into a region."""
    for name, datatype, _, data in outputs:
        spec = specs.get(name)
        if spec is not None and spec.shm is not None:
            _write_shm_output(name, spec.shm, datatype, data)

    def place(name: str, datatype: str, data: Any) -> bool:
        spec = specs.get(name)
        return spec is not None and spec.shm is not None

    return place


def _write_shm_output(name: str, part: RegionSlice, datatype: str, data: Any) -> None:
    """One output written straight into its part of a region (one copy, none when the
    output already is that memory); Triton's error when it does not fit."""
    blob = binary_data(datatype, data)
    size = len(blob) if isinstance(blob, bytes) else blob.nbytes
    if size > part.byte_size:
        raise CoreError(
            f"shared memory size specified with the request for output '{name}' "
            f"({part.byte_size} bytes) should be at least {size} bytes to hold "
            "the results",
            Code.INTERNAL,
        )
    part.write(blob)


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
            place = _write_shm_outputs(specs, outputs)

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


def answerable_elsewhere(parsed: ParsedInfer) -> bool:
    """Another process may encode and send the answer: no output is asked with
    classification or into shared memory (which only the server does), and no input is
    read from shared memory (the server must count the request out of its region before
    the client has the answer, or an unregister sent at once finds the region in use)."""
    if parsed.request.regions:  # (an output into shared memory has a region too)
        return False
    return not any(spec.classification for spec in parsed.outputs.values())


def answer_spec(
    parsed: ParsedInfer, model: ModelVersion | Admission
) -> tuple[bytes, dict[str, bool | None], bool]:
    """How another process writes ``parsed``'s successful answer (``_reply.AnswerSpec``):
    the JSON header up to the model version, binary_data per output name, the default."""
    specs = parsed.outputs
    binary = {name: spec.binary for name, spec in specs.items()} if specs else {}
    return (_outputs_prefix(parsed.request, model), binary, parsed.binary_default)


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
