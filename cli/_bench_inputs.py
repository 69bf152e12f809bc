"""``bench`` inputs: perf_analyzer's input data, turned into the steps requests send.

``--input-data`` is ``zero``, ``random`` (the default), a directory of raw files (one per
input, named as the input, holding a batch-1 tensor in row-major order; BYTES files hold
one element per line; files named as outputs are expected values) or a JSON file in
perf_analyzer's format: ``{"data": [...], "validation_data": [...]}`` where ``data`` is a
list of steps (objects mapping input names to values) or a list of streams (lists of
steps, one stream per sequence). A value is a flat row-major list, ``{"b64": ...}``
(little-endian bytes; BYTES elements each prefixed by a 4-byte length), or
``{"content": <list or b64>, "shape": [...]}``. Shapes exclude the batch dimension.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._errors import InputError

if TYPE_CHECKING:
    from ._values import ModelIO, TensorSpec

__all__ = ["DataSet", "InputOptions", "Step", "load_data", "parse_shape_option"]


@dataclass(frozen=True)
class Step:
    """The tensors of one request (batch dimension included when the model batches) and
    the outputs expected back (empty: not checked)."""

    arrays: dict[str, Any]
    expected: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DataSet:
    """Steps grouped in streams: one stream (requests take its steps round-robin) or, from
    a JSON list of streams, one stream per sequence."""

    streams: list[list[Step]]
    from_streams: bool = False

    @property
    def steps(self) -> list[Step]:
        """Every step of every stream, in order."""
        return [step for stream in self.streams for step in stream]


@dataclass(frozen=True)
class InputOptions:
    """The input options of ``bench``, parsed."""

    sources: tuple[str, ...] = ()
    shapes: dict[str, list[int]] = field(default_factory=dict)
    string_length: int = 128
    string_data: str | None = None
    batch_size: int = 1
    given: dict[str, Any] = field(default_factory=dict)  # --input NAME=VALUE arrays
    optional: frozenset[str] = frozenset()  # inputs the configuration marks optional


def parse_shape_option(values: tuple[str, ...]) -> dict[str, list[int]]:
    """``--shape NAME:D1,D2`` (perf_analyzer's form; ``NAME=D1,D2`` too) -> dims."""
    shapes: dict[str, list[int]] = {}
    for text in values:
        sep = "=" if "=" in text else ":"
        name, _, dims = text.rpartition(sep)
        try:
            parsed = [int(d) for d in dims.split(",")] if dims.strip() else []
        except ValueError:
            parsed = [-1]
        if not name or any(d < 0 for d in parsed):
            raise click.BadParameter(
                f"expected NAME:D1,D2,... with whole dims, got {text!r}", param_hint="--shape"
            )
        if 0 in parsed:
            # perf_analyzer: "The dimensions of input tensor must be > 0."
            raise click.BadParameter(f"{text!r}: dims must be > 0", param_hint="--shape")
        shapes[name] = parsed
    return shapes


# -- shapes and synthetic data -----------------------------------------------------------


def _inner_dims(io: ModelIO, spec: TensorSpec) -> list[int]:
    return list(spec.shape[1:] if io.batches else spec.shape)


def _fixed_dims(io: ModelIO, spec: TensorSpec, options: InputOptions) -> list[int]:
    """The input's dims without batch: the model's, with --shape for the variable ones."""
    dims = _inner_dims(io, spec)
    given = options.shapes.get(spec.name)
    if given is not None:
        if len(given) != len(dims) or any(
            d >= 0 and d != g for d, g in zip(dims, given, strict=True)
        ):
            raise InputError(
                f"--shape {spec.name}:{','.join(map(str, given))} does not fit the model's "
                f"dims {dims}"
            )
        return given
    if any(d < 0 for d in dims):
        raise InputError(
            f"input '{spec.name}' has variable dims {dims}: give them with "
            f"--shape {spec.name}:D1,D2,... (without the batch dimension)"
        )
    return dims


def _synthetic(spec: TensorSpec, dims: list[int], kind: str, options: InputOptions) -> Any:
    import numpy as np

    from tritonhttp.utils import triton_to_np_dtype

    rng = np.random.default_rng(0)
    count = math.prod(dims)
    if spec.datatype == "BYTES":
        out = np.empty(count, dtype=np.object_)
        if options.string_data is not None:
            # Command-line bytes that are not UTF-8 are sent as given (surrogateescape).
            out[:] = [options.string_data.encode("utf-8", "surrogateescape")] * count
        else:
            letters = rng.integers(97, 123, size=(count, options.string_length), dtype=np.uint8)
            out[:] = [row.tobytes() for row in letters]
        return out.reshape(dims)
    dtype = np.dtype(triton_to_np_dtype(spec.datatype))
    if kind == "zero":
        return np.zeros(dims, dtype=dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=dims).astype(np.bool_)
    if dtype.kind in "iu":
        return rng.integers(0, min(100, int(np.iinfo(dtype).max)), size=dims).astype(dtype)
    return rng.random(size=dims, dtype=np.float32).astype(dtype)


# -- JSON values -------------------------------------------------------------------------


def _bytes_elements(raw: bytes, where: str) -> list[bytes]:
    """Length-prefixed BYTES elements (4-byte little-endian length, then the bytes)."""
    out: list[bytes] = []
    at = 0
    while at < len(raw):
        if at + 4 > len(raw):
            raise InputError(f"{where}: b64 BYTES data ends inside a 4-byte length prefix")
        (size,) = struct.unpack_from("<I", raw, at)
        at += 4
        if at + size > len(raw):
            raise InputError(f"{where}: b64 BYTES element of {size} bytes runs past the end")
        out.append(raw[at : at + size])
        at += size
    return out


def _decode_b64(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise InputError(f'{where}: "b64" must be a string')
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as e:
        raise InputError(f"{where}: invalid base64: {e}") from None


def _json_tensor(
    value: Any,
    spec: TensorSpec,
    default_dims: list[int] | None,
    model_dims: list[int],
    where: str,
) -> Any:
    """One tensor of a step (no batch dimension) from its JSON value: a list,
    ``{"b64": ...}`` or ``{"content": ..., }``, the objects with an optional ``"shape"``
    that must fit the model's dims ``model_dims``."""
    import numpy as np

    from tritonhttp.utils import triton_to_np_dtype

    dims = default_dims
    content = value
    if isinstance(value, dict):
        if "b64" in value:
            content = {"b64": value["b64"]}
        elif "content" in value:
            content = value["content"]
        else:
            raise InputError(f'{where}: an object value needs "content" (and optional "shape")')
        if "shape" in value:
            dims = _json_shape(value["shape"], model_dims, where)
    if dims is None:
        raise InputError(f'{where}: the input has variable dims: give "shape" or --shape')
    count = math.prod(dims)
    if isinstance(content, dict):
        if set(content) != {"b64"}:
            raise InputError(f'{where}: expected {{"b64": ...}}, got keys {sorted(content)}')
        raw = _decode_b64(content["b64"], where)
        if spec.datatype == "BYTES":
            elements: list[Any] = _bytes_elements(raw, where)
        else:
            dtype = np.dtype(triton_to_np_dtype(spec.datatype)).newbyteorder("<")
            if len(raw) != count * dtype.itemsize:
                raise InputError(
                    f"{where}: b64 data has {len(raw)} bytes, shape {dims} of {spec.datatype} "
                    f"needs {count * dtype.itemsize}"
                )
            return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("=")).reshape(dims)
    elif isinstance(content, list):
        if any(isinstance(x, (list, dict)) for x in content):
            raise InputError(
                f"{where}: values must be a flat row-major list (give the shape with "
                '{"content": [...], "shape": [...]})'
            )
        elements = content
    else:
        raise InputError(f'{where}: expected a list, {{"b64": ...}} or {{"content": ...}}')
    if len(elements) != count:
        raise InputError(f"{where}: {len(elements)} values, shape {dims} needs {count}")
    return _elements_array(elements, spec.datatype, dims, where)


def _json_shape(shape: Any, model_dims: list[int], where: str) -> list[int]:
    """A ``"shape"`` of the file, checked against the model's dims (without batch)."""
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise InputError(f'{where}: "shape" must be a list of whole numbers')
    if len(shape) != len(model_dims) or any(
        m >= 0 and m != d for m, d in zip(model_dims, shape, strict=True)
    ):
        raise InputError(f'{where}: "shape" {shape} does not fit the model\'s dims {model_dims}')
    return shape


def _elements_array(elements: list[Any], datatype: str, dims: list[int], where: str) -> Any:
    import numpy as np

    from tritonhttp.utils import triton_to_np_dtype

    if datatype == "BYTES":
        out = np.empty(len(elements), dtype=np.object_)
        for i, x in enumerate(elements):
            if isinstance(x, bytes):
                out[i] = x
            elif isinstance(x, str):
                try:
                    out[i] = x.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise InputError(
                        f"{where}: {x[e.start : e.end]!r} is a lone UTF-16 surrogate, which has "
                        'no UTF-8 form (give the bytes as {"b64": ...})'
                    ) from None
            else:
                raise InputError(f"{where}: BYTES values must be strings, got {x!r}")
        return out.reshape(dims)
    dtype = np.dtype(triton_to_np_dtype(datatype))
    for x in elements:
        ok = isinstance(x, (int, float)) and (dtype.kind == "b" or not isinstance(x, bool))
        if dtype.kind in "iub" and isinstance(x, float) and not x.is_integer():
            ok = False
        if not ok:
            raise InputError(f"{where}: {x!r} is not a {datatype} value")
    try:
        return np.asarray(elements).astype(dtype).reshape(dims)
    except (OverflowError, ValueError) as e:
        raise InputError(f"{where}: {e}") from None


#: Keys of a step that name no tensor (perf_analyzer accepts them too).
_NOT_TENSORS = frozenset({"model"})


def _json_step(
    entry: Any,
    specs: dict[str, TensorSpec],
    ctx: _Context,
    where: str,
    required: frozenset[str] | None,
) -> dict[str, Any]:
    """The tensors of one step; a name missing from it is an error unless ``required``
    is None (validation data) or the name is not in it (optional inputs). A name the
    model does not have is an error (a misspelt optional input would be left out)."""
    if not isinstance(entry, dict):
        raise InputError(f"{where}: a step must be an object mapping tensor names to values")
    unknown = [k for k in entry if k not in specs and k not in _NOT_TENSORS]
    if unknown:
        kind = "inputs" if required is not None else "outputs"
        raise InputError(
            f"{where}: model '{ctx.io.name}' has no {kind[:-1]} '{unknown[0]}' "
            f"({kind}: {', '.join(specs)})"
        )
    tensors: dict[str, Any] = {}
    for name, spec in specs.items():
        if name not in entry:
            if required is not None and name in required:
                raise InputError(f"{where}: no value for input '{name}'")
            continue
        tensors[name] = _json_tensor(
            entry[name], spec, ctx.dims[name], _inner_dims(ctx.io, spec), f"{where} '{name}'"
        )
    return tensors


# -- loading -----------------------------------------------------------------------------


@dataclass
class _Context:
    io: ModelIO
    options: InputOptions
    dims: dict[str, list[int] | None]  # input and output dims (None: variable, not given)


def _read_json_file(path: Path, ctx: _Context) -> tuple[list[list[Step]], bool]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"--input-data {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise InputError(f"--input-data {path}: not valid JSON: {e}") from None
    if not isinstance(document, dict) or "data" not in document:
        raise InputError(f'--input-data {path}: expected an object with a "data" list')
    data, checks = document["data"], document.get("validation_data")
    if not isinstance(data, list) or not data:
        raise InputError(f'--input-data {path}: "data" must be a non-empty list')
    as_streams = isinstance(data[0], list)
    if any(isinstance(x, list) != as_streams for x in data):
        raise InputError(f'--input-data {path}: "data" mixes steps and lists of steps (streams)')
    streams = data if as_streams else [data]
    expected: list[Any] = [[{}] * len(s) for s in streams]
    if checks is not None:
        if not isinstance(checks, list) or len(checks) != len(data):
            raise InputError(
                f'--input-data {path}: "validation_data" must be a list as long as "data" '
                f"({len(data)} entries)"
            )
        expected = checks if as_streams else [checks]
    out: list[list[Step]] = []
    for i, stream in enumerate(streams):
        if not stream:
            raise InputError(f"--input-data {path}: stream {i} is empty")
        if len(expected[i]) != len(stream):
            raise InputError(f"--input-data {path}: validation stream {i} has another length")
        steps = []
        for j, entry in enumerate(stream):
            where = f"{path.name} " + (f"stream {i} step {j}" if as_streams else f"step {j}")
            needed = frozenset(ctx.io.inputs) - ctx.options.optional
            arrays = _json_step(entry, ctx.io.inputs, ctx, where, needed)
            check = (
                _json_step(expected[i][j], ctx.io.outputs, ctx, where + " validation", None)
                if expected[i][j]
                else {}
            )
            steps.append(Step(arrays, check))
        out.append(steps)
    return out, as_streams


def _raw_tensor(path: Path, spec: TensorSpec, dims: list[int] | None, what: str) -> Any:
    import numpy as np

    from tritonhttp.utils import triton_to_np_dtype

    raw = path.read_bytes()
    if spec.datatype == "BYTES":
        # one element per line, as perf_analyzer reads it: split at "\n" only, the bytes
        # kept as they are ("\r", form feeds and bytes that are not UTF-8 included)
        elements: list[Any] = raw.split(b"\n")
        if elements[-1] == b"":
            elements.pop()  # the newline that ends the last line
        if dims is None:
            dims = [len(elements)]
        if len(elements) != math.prod(dims):
            raise InputError(
                f"{what} {path}: {len(elements)} lines, shape {dims} needs {math.prod(dims)}"
            )
        return _elements_array(elements, "BYTES", dims, str(path))
    dtype = np.dtype(triton_to_np_dtype(spec.datatype))
    if dims is None:
        raise InputError(f"{what} '{spec.name}' has variable dims: give --shape")
    if len(raw) != math.prod(dims) * dtype.itemsize:
        raise InputError(
            f"{what} {path}: {len(raw)} bytes, shape {dims} of {spec.datatype} needs "
            f"{math.prod(dims) * dtype.itemsize}"
        )
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(dims)


def _read_directory(path: Path, ctx: _Context) -> list[Step]:
    arrays = {}
    for name, spec in ctx.io.inputs.items():
        file = path / name
        if not file.is_file() and name in ctx.options.optional:
            continue
        if not file.is_file():
            raise InputError(f"--input-data {path}: no file for input '{name}' ({file})")
        arrays[name] = _raw_tensor(file, spec, ctx.dims[name], "input")
    expected = {
        name: _raw_tensor(path / name, spec, ctx.dims.get(name), "output")
        for name, spec in ctx.io.outputs.items()
        if (path / name).is_file()
    }
    return [Step(arrays, expected)]


def _batched(step: Step, io: ModelIO, options: InputOptions) -> Step:
    """The step with the batch dimension (the batch-1 data repeated -b times)."""
    import numpy as np

    arrays = {}
    for name, array in step.arrays.items():
        if name in options.given:
            arrays[name] = options.given[name]
        elif io.batches:
            arrays[name] = np.repeat(array[np.newaxis, ...], options.batch_size, axis=0)
        else:
            arrays[name] = array
    expected = {
        k: np.repeat(v[np.newaxis, ...], options.batch_size, axis=0) if io.batches else v
        for k, v in step.expected.items()
    }
    return Step(arrays, expected)


def load_data(io: ModelIO, options: InputOptions) -> DataSet:
    """The steps to send: from ``--input-data`` (zero, random, directories, JSON files)."""
    if options.batch_size > 1 and not io.batches:
        raise InputError(
            f"-b {options.batch_size}: model '{io.name}' does not batch (max_batch_size 0)"
        )
    if io.batches and options.batch_size > io.max_batch_size:
        raise InputError(
            f"-b {options.batch_size} is over the model's max_batch_size {io.max_batch_size}"
        )
    for name in options.shapes:
        io.input(name)
    ctx = _Context(io, options, _dims_table(io, options))
    streams: list[list[Step]] = []
    from_streams = False
    kinds = options.sources or ("random",)
    for source in kinds:
        if source in ("zero", "random"):
            streams.append([Step(_synthetic_arrays(ctx, source))])
            continue
        if not source.strip():  # Path("") is the current folder: not what was meant
            raise InputError(
                "--input-data: an empty value: give zero, random, a directory or a file"
            )
        path = Path(source).expanduser()
        if path.is_dir():
            streams.append(_read_directory(path, ctx))
        elif path.is_file():
            more, as_streams = _read_json_file(path, ctx)
            from_streams = from_streams or as_streams
            streams.extend(more)
        else:
            raise InputError(f"--input-data {source}: not zero, random, a directory or a file")
    if not from_streams:
        streams = [[step for stream in streams for step in stream]]
    return DataSet([[_batched(s, io, options) for s in stream] for stream in streams], from_streams)


def _dims_table(io: ModelIO, options: InputOptions) -> dict[str, list[int] | None]:
    dims: dict[str, list[int] | None] = {}
    for name, spec in [*io.inputs.items(), *io.outputs.items()]:
        inner = _inner_dims(io, spec)
        given = options.shapes.get(name)
        dims[name] = given if given is not None else (None if any(d < 0 for d in inner) else inner)
    return dims


def _synthetic_arrays(ctx: _Context, kind: str) -> dict[str, Any]:
    arrays = {}
    for name, spec in ctx.io.inputs.items():
        if name in ctx.options.given:
            arrays[name] = ctx.options.given[name]
            continue
        dims = _fixed_dims(ctx.io, spec, ctx.options)
        arrays[name] = _synthetic(spec, dims, kind, ctx.options)
    return arrays
