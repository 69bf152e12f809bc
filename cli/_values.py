"""Parsing what users type: ``K=V`` pairs, tensor values, and fitting them to a model.

A tensor value (``--input NAME=VALUE``) is one of:

* a comma list ``1,2,3,4`` (a single value is a one-element list; empty is empty);
* JSON ``[[1, 2], [3, 4]]`` / ``["text", ...]`` (nesting gives the shape);
* ``@file.npy`` (a numpy array), ``@file.json`` (JSON as above);
* ``@file`` with any other extension: the file's bytes as one BYTES element.

The datatype and the shape come from the model's metadata unless overridden; a flat list
fills the model's dims (one ``-1`` takes what is left), and the batch dimension is added
when the model batches.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._errors import InputError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ModelIO",
    "RawValue",
    "TensorSpec",
    "batch_size",
    "fit_shape",
    "parse_assignments",
    "parse_dims",
    "parse_json_or_text",
    "parse_tensor_value",
    "to_array",
    "triton_datatype",
]

_TRUE = {"true", "True", "TRUE", "1"}
_FALSE = {"false", "False", "FALSE", "0"}


def parse_assignments(pairs: Iterable[str], option: str) -> list[tuple[str, str]]:
    """``["K=V", ...]`` -> ``[("K", "V"), ...]``; a usage error for a pair without ``=``."""
    parsed = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {pair!r}", param_hint=option)
        parsed.append((key.strip(), value))
    return parsed


def parse_json_or_text(text: str) -> Any:
    """A JSON value if ``text`` is one (``1``, ``true``, ``[1]``, ``"s"``), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_dims(text: str, what: str) -> list[int]:
    """``"2,3"`` (or ``"[2, 3]"``) -> ``[2, 3]``; ``""`` -> ``[]`` (a scalar)."""
    body = text.strip().strip("[]()").strip()
    if not body:
        return []
    try:
        dims = [int(part) for part in body.split(",")]
    except ValueError:
        raise InputError(f"{what}: bad shape {text!r} (expected integers like 2,3)") from None
    if any(d < 0 for d in dims):
        raise InputError(f"{what}: bad shape {text!r} (dimensions must not be negative)")
    return dims


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output as its metadata describes it."""

    name: str
    datatype: str
    shape: list[int]  # -1: any size (includes the batch dimension when the model batches)


@dataclass(frozen=True)
class ModelIO:
    """A model's inputs and outputs, and whether it batches."""

    name: str
    version: str
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    max_batch_size: int
    #: inputs the configuration marks ``optional``
    optional: frozenset[str] = frozenset()

    @classmethod
    def from_server(cls, metadata: dict[str, Any], config: dict[str, Any]) -> ModelIO:
        """From ``get_model_metadata`` and ``get_model_config`` answers."""

        def specs(items: list[dict[str, Any]]) -> dict[str, TensorSpec]:
            return {
                t["name"]: TensorSpec(t["name"], t["datatype"], [int(d) for d in t["shape"]])
                for t in items
            }

        versions = metadata.get("versions") or [""]
        return cls(
            name=metadata["name"],
            version=str(versions[-1]),
            inputs=specs(metadata.get("inputs", [])),
            outputs=specs(metadata.get("outputs", [])),
            max_batch_size=int(config.get("max_batch_size", 0) or 0),
            optional=frozenset(
                str(t.get("name")) for t in config.get("input", []) if t.get("optional")
            ),
        )

    def missing_inputs(self, given: Iterable[str]) -> list[str]:
        """The required inputs (not ``optional`` in the configuration) not in ``given``."""
        have = set(given)
        return [n for n in self.inputs if n not in have and n not in self.optional]

    @property
    def batches(self) -> bool:
        """Whether the model has a batch dimension (``max_batch_size > 0``)."""
        return self.max_batch_size > 0

    def input(self, name: str) -> TensorSpec:
        """The named input; a clear error listing the inputs when there is none."""
        spec = self.inputs.get(name)
        if spec is None:
            known = ", ".join(self.inputs) or "none"
            raise InputError(f"model '{self.name}' has no input '{name}' (inputs: {known})")
        return spec

    def output(self, name: str) -> TensorSpec:
        """The named output; a clear error listing the outputs when there is none."""
        spec = self.outputs.get(name)
        if spec is None:
            known = ", ".join(self.outputs) or "none"
            raise InputError(f"model '{self.name}' has no output '{name}' (outputs: {known})")
        return spec


@dataclass(frozen=True)
class RawValue:
    """A tensor value as typed, before it meets a datatype.

    ``kind`` is ``"list"`` (``value`` holds comma-list tokens), ``"json"`` (a parsed JSON
    value), ``"array"`` (a numpy array from a .npy file) or ``"bytes"`` (a file's bytes).
    """

    name: str
    kind: str
    value: Any
    source: str

    @property
    def has_shape(self) -> bool:
        """Whether the value carries its own shape (nested JSON or a numpy array)."""
        if self.kind == "array":
            return True
        return self.kind == "json" and isinstance(self.value, list) and _depth(self.value) > 1


def _depth(value: Any) -> int:
    depth = 0
    while isinstance(value, list):
        depth += 1
        if not value:
            break
        value = value[0]
    return depth


def parse_tensor_value(name: str, text: str) -> RawValue:
    """Parse the VALUE of ``--input NAME=VALUE`` (files are read here)."""
    stripped = text.strip()
    if stripped.startswith("@"):
        if not stripped[1:].strip():
            raise InputError(f"input '{name}': '@' names no file (give @PATH)")
        return _read_file(name, stripped[1:])
    if stripped.startswith(("[", '"')):
        try:
            return RawValue(name, "json", _load_json(stripped), text)
        except ValueError as e:
            raise InputError(f"input '{name}': invalid JSON: {e}") from None
    tokens = [] if stripped == "" else [t.strip() for t in text.split(",")]
    return RawValue(name, "list", tokens, text)


def _read_file(name: str, path_text: str) -> RawValue:
    path = Path(path_text).expanduser()
    source = "@" + path_text
    try:
        if path.suffix.lower() == ".npy":
            import numpy as np

            try:
                array = np.load(path, allow_pickle=False)
            except ValueError as e:
                if "allow_pickle" in str(e):
                    raise InputError(
                        f"input '{name}': {path} holds Python objects (a pickle); save BYTES "
                        "as a fixed-width bytes array (dtype 'S') or give them as JSON",
                    ) from None
                raise InputError(f"input '{name}': cannot read {path}: {e}") from None
            return RawValue(name, "array", array, source)
        if path.suffix.lower() == ".json":
            text = path.read_text(encoding="utf-8")
            try:
                return RawValue(name, "json", _load_json(text), source)
            except ValueError as e:
                raise InputError(f"input '{name}': {path} is not valid JSON: {e}") from None
        return RawValue(name, "bytes", path.read_bytes(), source)
    except OSError as e:
        raise InputError(f"input '{name}': cannot read {path}: {e.strerror or e}") from None


# -- values -> arrays ------------------------------------------------------------------


class _Overflow(float):
    """A number typed beyond FP64's range (``1e400``), which Python reads as infinity.

    It keeps the text so that it is refused as out of range, not sent as ``inf``.
    """

    text: str

    def __new__(cls, text: str) -> _Overflow:
        made = super().__new__(cls, text)
        made.text = text
        return made


_INFINITY_SPELLINGS = {"inf", "infinity"}


def _float_or_overflow(text: str) -> float:
    """``float(text)``, or an :class:`_Overflow` when a finite number reads as infinity."""
    value = float(text)
    if math.isinf(value) and text.strip().lstrip("+-").lower() not in _INFINITY_SPELLINGS:
        return _Overflow(text.strip())
    return value


def _load_json(text: str) -> Any:
    return json.loads(text, parse_float=_float_or_overflow)


def _shown(x: Any) -> str:
    return x.text if isinstance(x, _Overflow) else str(x)


def _float_limits(dtype: np.dtype[Any]) -> tuple[float, int]:
    """The largest finite value of a float dtype, and the smallest magnitude that rounds
    to infinity in it (the largest plus half a unit in the last place)."""
    import ml_dtypes

    finfo: Any = ml_dtypes.finfo  # numpy's finfo, extended to BF16
    info = finfo(dtype)
    largest = float(info.max)
    return largest, int(largest) + 2 ** (int(info.maxexp) - 2 - int(info.nmant))


def _range_text(dtype: np.dtype[Any]) -> str:
    import numpy as np

    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return f"[{info.min}, {info.max}]"
    largest, _ = _float_limits(dtype)
    return f"[{-largest:g}, {largest:g}]"


def _flatten(value: Any, name: str) -> tuple[list[int], list[Any]]:
    """Shape and row-major elements of a (rectangular) nested list."""
    if not isinstance(value, list):
        return [], [value]
    if not value:
        return [0], []
    parts = [_flatten(v, name) for v in value]
    inner = parts[0][0]
    if any(p[0] != inner for p in parts):
        raise InputError(f"input '{name}': nested lists have different lengths")
    flat: list[Any] = []
    for _, elements in parts:
        flat.extend(elements)
    return [len(value), *inner], flat


def _token(token: str, datatype: str, name: str) -> Any:
    """A comma-list token as a Python number/bool for a numeric datatype."""
    if datatype == "BOOL":
        if token in _TRUE:
            return True
        if token in _FALSE:
            return False
        raise InputError(f"input '{name}': {token!r} is not a BOOL (true/false/1/0)")
    try:
        return int(token)
    except ValueError:
        pass
    try:
        return _float_or_overflow(token)
    except ValueError:
        raise InputError(f"input '{name}': {token!r} is not a number ({datatype})") from None


def _check_numbers(elements: Sequence[Any], datatype: str, name: str) -> None:
    import numpy as np

    from tritonhttp.utils import triton_to_np_dtype

    dtype = np.dtype(triton_to_np_dtype(datatype))
    overflow = None if datatype == "BOOL" or dtype.kind in "iu" else _float_limits(dtype)[1]
    for x in elements:
        if datatype == "BOOL":
            if not isinstance(x, bool) and x not in (0, 1):
                raise InputError(f"input '{name}': {_shown(x)!r} is not a BOOL")
        elif isinstance(x, bool) or not isinstance(x, (int, float)):
            raise InputError(f"input '{name}': {x!r} is not a number ({datatype})")
        elif isinstance(x, _Overflow) or (
            overflow is not None and (isinstance(x, int) or math.isfinite(x)) and abs(x) >= overflow
        ):
            raise InputError(
                f"input '{name}': {_shown(x)} is out of range for {datatype} {_range_text(dtype)}",
            )
        elif dtype.kind in "iu":
            if isinstance(x, float) and not (math.isfinite(x) and x.is_integer()):
                raise InputError(f"input '{name}': {x!r} is not an integer ({datatype})")
            info = np.iinfo(dtype)
            if not info.min <= int(x) <= info.max:
                raise InputError(
                    f"input '{name}': {x} is out of range for {datatype} [{info.min}, {info.max}]",
                )


def triton_datatype(array: np.ndarray[Any, Any], name: str) -> str:
    """The Triton datatype of an array made by :func:`to_array` (object arrays: BYTES)."""
    from tritonhttp.utils import np_to_triton_dtype

    if array.dtype.kind == "O":
        return "BYTES"
    datatype = np_to_triton_dtype(array.dtype)
    if datatype is None:
        raise InputError(f"input '{name}': numpy dtype {array.dtype} has no Triton datatype")
    return str(datatype)


def _bytes_element(x: Any, name: str) -> bytes:
    if isinstance(x, _Overflow):
        return x.text.encode("utf-8")
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        try:
            # Bytes of the command line that are not UTF-8 reach Python as the
            # surrogates U+DC80..U+DCFF; they are sent as the bytes they stand for.
            return x.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as e:
            raise InputError(
                f"input '{name}': {x[e.start : e.end]!r} is a lone UTF-16 surrogate, "
                "which has no UTF-8 form (give the bytes with @FILE instead)"
            ) from None
    return json.dumps(x).encode("utf-8")


def _cast(
    array: np.ndarray[Any, Any], target: np.dtype[Any], raw: RawValue, datatype: str
) -> np.ndarray[Any, Any]:
    """``array`` as ``target``; an error when a value does not fit (an integer that would
    wrap around, a finite number that would become infinity)."""
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        cast = array.astype(target)
        if target.kind in "iu":
            changed = cast.astype(array.dtype) != array
        else:
            changed = np.isinf(cast.astype(np.float64)) & ~np.isinf(array)
    bad = np.flatnonzero(changed)
    if bad.size:
        first = array.reshape(-1)[bad[0]].item()
        raise InputError(
            f"input '{raw.name}': {raw.source} holds {first}, out of range for {datatype} "
            f"{_range_text(target)}",
        )
    return cast


def to_array(raw: RawValue, datatype: str) -> np.ndarray[Any, Any]:
    """The value as a numpy array of the Triton ``datatype`` (shape as given or flat)."""
    import numpy as np

    from tritonhttp.utils import np_to_triton_dtype, triton_to_np_dtype

    name = raw.name
    if raw.kind == "array":
        array: np.ndarray[Any, Any] = raw.value
        if datatype == "BYTES":
            if array.dtype.kind not in "SUO":
                raise InputError(
                    f"input '{name}': {raw.source} holds {array.dtype} values, expected BYTES",
                )
            out = np.empty(array.shape, dtype=np.object_)
            out.reshape(-1)[:] = [_bytes_element(x, name) for x in array.reshape(-1).tolist()]
            return out
        target = np.dtype(triton_to_np_dtype(datatype))
        if array.dtype == target:
            return array
        if array.dtype.kind in "biuf" and np.can_cast(array.dtype, target, "same_kind"):
            return _cast(array, target, raw, datatype)
        have = np_to_triton_dtype(array.dtype) or str(array.dtype)
        raise InputError(
            f"input '{name}': {raw.source} holds {have} values, the model expects {datatype} "
            "(use --datatype to override)",
        )
    if raw.kind == "bytes":
        if datatype != "BYTES":
            raise InputError(
                f"input '{name}': {raw.source} is not .npy or .json, so it is read as one BYTES "
                f"element, but the input is {datatype}",
            )
        out = np.empty([1], dtype=np.object_)
        out[0] = raw.value
        return out
    if raw.kind == "list":
        shape = [len(raw.value)]
        elements: list[Any] = raw.value
        if datatype != "BYTES":
            elements = [_token(t, datatype, name) for t in elements]
    else:
        shape, elements = _flatten(raw.value, name)
    if datatype == "BYTES":
        out = np.empty(len(elements), dtype=np.object_)
        out[:] = [_bytes_element(x, name) for x in elements]
        return out.reshape(shape)
    try:
        dtype = triton_to_np_dtype(datatype)
    except Exception:
        dtype = None
    if dtype is None:
        raise InputError(f"input '{name}': unknown datatype {datatype!r}")
    _check_numbers(elements, datatype, name)
    return np.asarray(elements, dtype=dtype).reshape(shape)


# -- shapes ----------------------------------------------------------------------------


def batch_size(io: ModelIO, arrays: dict[str, np.ndarray[Any, Any]]) -> int:
    """The batch size of a request: the first dimension of its inputs (1 if none)."""
    if not io.batches:
        return 1
    for array in arrays.values():
        if array.ndim:
            return int(array.shape[0])
    return 1


def _matches(shape: Sequence[int], dims: Sequence[int]) -> bool:
    return len(shape) == len(dims) and all(
        d < 0 or d == s for s, d in zip(shape, dims, strict=True)
    )


def _show(dims: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def fit_shape(
    array: np.ndarray[Any, Any],
    raw: RawValue,
    spec: TensorSpec | None,
    batches: bool,
    override: list[int] | None,
) -> np.ndarray[Any, Any]:
    """Give ``array`` the shape the model expects (or ``override``), or say why not."""
    name = raw.name
    if override is not None:
        count = math.prod(override)
        if count != array.size:
            raise InputError(
                f"input '{name}': --shape {_show(override)} needs {count} values, got {array.size}",
            )
        return array.reshape(override)
    if spec is None:
        return array
    dims = spec.shape
    inner = dims[1:] if batches else dims
    if _matches(array.shape, dims):
        return array
    if batches and _matches(array.shape, inner):
        return array.reshape([1, *array.shape])
    expected = _show(dims) + (f" (batch + {_show(inner)})" if batches else "")
    if raw.has_shape and array.ndim != 1:
        raise InputError(
            f"shape mismatch: input '{name}' expects {expected}, got {_show(array.shape)}",
        )
    # A flat list: fill the model's dims.
    n = array.size
    wild = [i for i, d in enumerate(inner) if d < 0]
    known = math.prod(d for d in inner if d >= 0)
    shape: list[int] | None = None
    batch = 1
    if not wild:
        if n == known:
            shape = list(inner)
        elif batches and known > 0 and n % known == 0:
            shape, batch = list(inner), n // known
    elif len(wild) == 1 and known > 0 and n % known == 0:
        shape = list(inner)
        shape[wild[0]] = n // known
    elif len(wild) > 1:
        raise InputError(
            f"input '{name}': the model's shape {_show(dims)} has several variable "
            "dimensions; give the shape with --shape NAME=D1,D2,...",
        )
    if shape is None:
        raise InputError(
            f"shape mismatch: input '{name}' expects {expected}"
            f"{f' ({known} values per item)' if batches and known else ''}, got {n} values",
        )
    if batches:
        shape = [batch, *shape]
    return array.reshape(shape)
