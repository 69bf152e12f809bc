"""Admission: Triton's validation of a parsed inference request against a model's config,
in Triton's order and words, and the decoding of its inputs.

Plain data and numpy only (no protobuf): the server checks every request with it, and a
backend whose own processes take requests unparsed builds one from :meth:`Admission.spec`
there, to check them the same way.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ...utils._bytes import BytesFramingError, unpack_array
from ...utils._dtypes import TRITON_TO_NUMPY
from ._errors import BackendError, CoreError
from ._types import InferRequest, InputTensor

__all__ = ["Admission", "AdmissionSpec", "triton_map_order"]

#: an input of the config: (name, wire datatype, dims, optional, reshape or None)
InputEntry = tuple[str, str, list[int], bool, "list[int] | None"]
#: what builds an :class:`Admission`: (model name, version, max_batch_size, inputs,
#: output names), picklable
AdmissionSpec = tuple[str, int, int, list[InputEntry], list[str]]

_BATCH_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension "
    "to be prepended to each input shape. If you want to specify the full shape including the "
    "batch dim in your input dims config, try setting max_batch_size to zero. See the model "
    "configuration docs for more info on max_batch_size."
)
_U32 = struct.Struct("<I")


def _fmt_shape(shape: list[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _wrap64(value: int) -> int:
    """``value`` as a wrapping int64 (what Triton's element and byte counts come to)."""
    return (value + 2**63) % 2**64 - 2**63


# --- the order Triton walks a request's inputs in: that of a libstdc++
# std::unordered_map<std::string, ...> filled in request order (which error is reported
# first, and the names listed in a wrong-count error, follow it)

_M64 = (1 << 64) - 1
_MURMUR_MUL = 0xC6A4A7935BD1E995
_MURMUR_SEED = 0xC70F6907
#: the bucket counts a map growing one insertion at a time goes through (11 asked for at the
#: first insertion, then at least twice the count: libstdc++'s prime list, max load 1.0)
_BUCKET_LADDER = (13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229,
                  172933, 351061, 712697, 1447153, 2938679)  # fmt: skip
_name_hashes: dict[str, int] = {}


def _string_hash(name: str) -> int:
    """libstdc++'s ``std::hash<std::string>`` (``_Hash_bytes``, 64-bit) of ``name``'s UTF-8."""
    cached = _name_hashes.get(name)
    if cached is not None:
        return cached
    data = name.encode("utf-8", "surrogateescape")
    n = len(data)
    h = _MURMUR_SEED ^ ((n * _MURMUR_MUL) & _M64)
    whole = n & ~7
    for i in range(0, whole, 8):
        k = (int.from_bytes(data[i : i + 8], "little") * _MURMUR_MUL) & _M64
        k = ((k ^ (k >> 47)) * _MURMUR_MUL) & _M64
        h = ((h ^ k) * _MURMUR_MUL) & _M64
    if n & 7:
        h = ((h ^ int.from_bytes(data[whole:], "little")) * _MURMUR_MUL) & _M64
    h = ((h ^ (h >> 47)) * _MURMUR_MUL) & _M64
    h ^= h >> 47
    if len(_name_hashes) < 4096:
        _name_hashes[name] = h
    return h


def triton_map_order(names: list[str]) -> list[int]:
    """The positions of ``names`` (inserted in that order) in the iteration order of
    Triton's map of them.

    A new element goes to the front of its bucket's run of nodes, a bucket's first one to
    the front of the list; growing the table re-inserts the nodes in list order. Up to two
    elements that is the reverse of the insertion order.
    """
    if len(names) <= 2:
        return list(range(len(names)))[::-1]
    hashes = [_string_hash(name) for name in names]
    # the list as runs per bucket: bucket -> its nodes (newest last); runs newest last
    runs: dict[int, list[int]] = {}
    step = 0
    buckets = _BUCKET_LADDER[0]
    for i in range(len(names)):
        if i >= buckets:  # one more than the table holds: grow it, re-insert in list order
            step += 1
            buckets = (
                _BUCKET_LADDER[step] if step < len(_BUCKET_LADDER) else buckets * 2 + 1
            )  # (beyond the ladder: no longer Triton's order, still deterministic)
            listed = [j for run in reversed(runs.values()) for j in reversed(run)]
            runs = {}
            for j in listed:
                runs.setdefault(hashes[j] % buckets, []).append(j)
        runs.setdefault(hashes[i] % buckets, []).append(i)
    return [j for run in reversed(runs.values()) for j in reversed(run)]


def _triton_order(inputs: dict[str, InputTensor]) -> list[InputTensor]:
    """``inputs`` (in request order) in the iteration order of Triton's map of them."""
    tensors = list(inputs.values())
    return [tensors[j] for j in triton_map_order([t.name for t in tensors])]


class _InputSpec:
    __slots__ = ("dims", "dtype", "name", "optional", "reshape", "wire")

    def __init__(
        self, name: str, wire: str, dims: list[int], optional: bool, reshape: list[int] | None
    ) -> None:
        self.name = name
        self.wire = wire
        self.dims = dims
        self.optional = optional
        self.reshape = reshape
        self.dtype = TRITON_TO_NUMPY.get(wire)


class Admission:
    """A model version's rules for requests (from its config): :meth:`check`."""

    def __init__(
        self, name: str, version: int, max_batch: int, inputs: list[InputEntry],
        outputs: list[str],
    ) -> None:  # fmt: skip
        self.name = name
        self.version = version
        self.max_batch = max_batch
        self.inputs = {i[0]: _InputSpec(*i) for i in inputs}  # (config order)
        self.input_count = len(inputs)
        self.required = sum(1 for i in inputs if not i[3])
        self.output_names = list(outputs)
        self.outputs = set(outputs)
        #: ``"model_name":...,"model_version":...`` as response JSON (built once)
        self.wire_prefix = b""
        self._spec: AdmissionSpec = (name, version, max_batch, list(inputs), list(outputs))

    def spec(self) -> AdmissionSpec:
        """What rebuilds this admission elsewhere (``Admission(*spec)``)."""
        return self._spec

    def check(self, req: InferRequest) -> BackendError | None:
        """Validate ``req`` and decode its inputs (raises CoreError, JSON-typed). Returns
        the BackendError of what Triton's backend fails after admission (answered as
        text/plain), or None."""
        prefix = req.log_prefix()
        name = self.name
        if req.raw:
            self._map_raw_input(req, prefix)
        if req.requested_outputs:
            unknown = [o for o in req.requested_outputs if o not in self.outputs]
            if unknown:
                # Triton keeps the requested outputs in a std::set: the first by byte order
                raise CoreError(f"unexpected inference output '{min(unknown)}' for model '{name}'")
        inputs = req.inputs
        n = len(inputs)
        if n > self.input_count or n < self.required:
            self._count_error(req, prefix)
        order = _triton_order(inputs) if n > 2 else list(reversed(inputs.values()))
        specs = self.inputs
        max_batch = self.max_batch
        # Triton's batch size is a uint32 that the first input with a non-zero batch
        # dimension sets
        batch = 0
        if max_batch > 0:
            for t in order:
                if t.name not in specs:
                    raise CoreError(f"unexpected inference input '{t.name}' for model '{name}'")
                if not t.shape:
                    raise CoreError(
                        f"{prefix}input '{t.name}' has no shape but model requires batch "
                        f"dimension for '{name}'"
                    )
                if batch == 0:
                    batch = t.shape[0] & 0xFFFFFFFF
                elif t.shape[0] != batch:
                    raise CoreError(
                        f"{prefix}input '{t.name}' batch size does not match other inputs for "
                        f"'{name}'"
                    )
            if (batch ^ 0x80000000) - 0x80000000 > max_batch:  # (compared as an int32)
                raise CoreError(
                    f"{prefix}inference request batch-size must be <= {max_batch} for '{name}'"
                )
        else:
            for t in order:
                if t.name not in specs:
                    raise CoreError(f"unexpected inference input '{t.name}' for model '{name}'")
        req.batch_size = batch or 1
        # each input in turn: datatype, shape, then its bytes
        backend_error: BackendError | None = None
        for t in order:
            spec = specs[t.name]
            if t.datatype != spec.wire:
                raise CoreError(
                    f"{prefix}inference input '{t.name}' data-type is '{t.datatype}', but model "
                    f"'{name}' expects '{spec.wire}'"
                )
            shape = t.shape[1:] if max_batch > 0 else t.shape
            dims = spec.dims
            if shape != dims and (
                len(shape) != len(dims)
                or any(d != -1 and d != s for d, s in zip(dims, shape, strict=False))
            ):
                expected = ([-1, *dims]) if max_batch > 0 else dims
                msg = (
                    f"{prefix}unexpected shape for input '{t.name}' for model '{name}'. "
                    f"Expected {_fmt_shape(expected)}, got {_fmt_shape(t.shape)}. "
                )
                if max_batch > 0:
                    msg += _BATCH_NOTE
                raise CoreError(msg)
            if -1 in shape:  # (a dim of 2**64 - 1, read as int64)
                raise CoreError(
                    f"{prefix}All input dimensions should be specified for input '{t.name}' for "
                    f"model '{name}', got {_fmt_shape(t.shape)}"
                )
            if max_batch > 0 and (t.shape[0] != batch or not batch):
                # the bytes expected are those of the request's batch size (0: no batch
                # dimension at all)
                t.shape = [batch, *shape] if batch else shape
            try:
                self._decode(t, spec, prefix)
            except BackendError as e:  # Triton's backend fails it, after admission
                backend_error = backend_error or e
                continue
            if spec.reshape is not None and t.array is not None:
                shape = spec.reshape
                if max_batch > 0:
                    shape = [t.shape[0], *shape]
                if -1 in shape:
                    known = 1
                    for d in shape:
                        known *= d if d != -1 else 1
                    shape = [t.array.size // known if d == -1 and known else d for d in shape]
                t.shape = shape
                t.array = t.array.reshape(shape)
        return backend_error

    def _count_error(self, req: InferRequest, prefix: str) -> None:
        missing = "[" + "".join(
            f"'{n}'," for n, i in self.inputs.items() if not i.optional and n not in req.inputs
        )
        missing = missing[:-1] + "]"
        got = "[" + "".join(f"'{t.name}'," for t in _triton_order(req.inputs))
        got = got[:-1] + "]" if req.inputs else "[]"
        n = len(req.inputs)
        if self.input_count == self.required:
            head = f"expected {self.input_count} inputs but got {n} inputs"
        else:
            head = (
                f"expected number of inputs between {self.required} and {self.input_count} "
                f"but got {n} inputs"
            )
        raise CoreError(
            f"{prefix}{head} for model '{self.name}'. Got input(s) {got}, but missing required "
            f"input(s) {missing}. Please provide all required input(s)."
        )

    def _map_raw_input(self, req: InferRequest, prefix: str) -> None:
        raw = req.inputs.pop("raw_input")
        if len(self.inputs) != 1:
            raise CoreError(
                f"{prefix}Raw request must only have 1 input (found 1) to be deduced but got "
                f"{len(self.inputs)} inputs in '{self.name}' model configuration"
            )
        (spec,) = self.inputs.values()
        dims = list(spec.dims)
        assert raw.raw is not None
        size = raw.raw.nbytes
        if spec.wire == "BYTES":
            if dims != [1]:
                raise CoreError(
                    f"{prefix}For BYTE datatype raw input '{spec.name}', the model must have "
                    "input shape [1]"
                )
            shape = [1]
        else:
            variable = [i for i, d in enumerate(dims) if d == -1]
            if len(variable) > 1:
                raise CoreError(
                    f"The shape of the raw input '{spec.name}' can not be deduced because "
                    "there are more than one variable-sized dimension"
                )
            shape = dims
            if variable:
                itemsize = spec.dtype.itemsize if spec.dtype is not None else 1
                fixed = int(np.prod([d for d in dims if d != -1], dtype=np.int64)) * itemsize
                shape = list(dims)
                shape[variable[0]] = size // fixed if fixed and size % fixed == 0 else 0
                if fixed and size % fixed:
                    shape[variable[0]] = -1
        if self.max_batch > 0:
            shape = [1, *shape]
        expected_elems = int(np.prod(shape, dtype=np.int64)) if -1 not in shape else -1
        if spec.wire != "BYTES" and spec.dtype is not None:
            expected = expected_elems * spec.dtype.itemsize
            if expected != size:
                raise CoreError(
                    f"{prefix}input byte size mismatch for input 'raw_input' for model "
                    f"'{self.name}'. Expected {max(expected, 0)}, got {size}"
                )
        req.inputs[spec.name] = InputTensor(spec.name, spec.wire, shape, raw=raw.raw)

    def _decode(self, t: InputTensor, spec: _InputSpec, prefix: str) -> None:
        exact = 1
        for d in t.shape:
            exact *= d
        # Triton counts in int64 (wrapping)
        count = exact if -(2**63) <= exact < 2**63 else _wrap64(exact)
        # a shape no array has (Triton 2.51 passes some to the model, whose stub crashes)
        impossible = exact != count or (count <= 0 and min(t.shape, default=0) < 0)
        if t.raw is None:
            assert t.array is not None
            if t.array.size != count:  # (JSON data: a batch size not its own)
                if spec.wire == "BYTES":
                    raise self._string_count_error(t.array.size, count, t.name, prefix)
                raise CoreError(
                    f"{prefix}input byte size mismatch for input '{t.name}' for model "
                    f"'{self.name}'. Expected {_wrap64(count * t.array.itemsize)}, got "
                    f"{t.array.nbytes}"
                )
            if t.array.shape != tuple(t.shape):
                t.array = self._reshaped(t.array, t, exact, impossible, prefix)
            return
        raw = t.raw
        if spec.wire == "BYTES":
            array = self._decode_bytes(raw, count, t.name, prefix)
        else:
            assert spec.dtype is not None
            expected = _wrap64(count * spec.dtype.itemsize)
            if raw.nbytes != expected:
                raise CoreError(
                    f"{prefix}input byte size mismatch for input '{t.name}' for model "
                    f"'{self.name}'. Expected {expected}, got {raw.nbytes}"
                )
            array = np.frombuffer(raw, dtype=spec.dtype)
            impossible = impossible or array.size != exact  # (the byte count wrapped)
        if not impossible:
            try:
                t.array = array.reshape(t.shape)
                t.raw = None
                return
            except ValueError:
                pass
        self._reshaped(array, t, exact, True, prefix)  # (raises)

    def _reshaped(
        self,
        array: np.ndarray[Any, Any],
        t: InputTensor,
        exact: int,
        impossible: bool,
        prefix: str,
    ) -> np.ndarray[Any, Any]:
        """``array`` in ``t``'s shape; refused (with the exact count) where no array has
        that shape: Triton 2.51 takes some such requests, and its model stub crashes."""
        if not impossible:
            try:
                return array.reshape(t.shape)
            except ValueError:
                pass
        if array.dtype == np.object_:
            raise self._string_count_error(array.size, exact, t.name, prefix)
        raise CoreError(
            f"{prefix}input byte size mismatch for input '{t.name}' for model '{self.name}'. "
            f"Expected {exact * array.itemsize}, got {array.nbytes}"
        )

    def _decode_bytes(
        self, raw: memoryview, count: int, name: str, prefix: str
    ) -> np.ndarray[Any, Any]:
        """The ``count`` elements of a BYTES input, refused the way Triton 2.51 refuses them.

        Triton's core counts elements by their length indicators (a truncated last element
        still counts): a cut indicator, or a count that differs from the shape's, is refused
        at admission. A truncated last element in an otherwise right count passes admission
        and fails in the Python backend (:class:`BackendError`).
        """
        try:
            return unpack_array(raw, count)
        except BytesFramingError:
            pass
        buf = raw.tobytes()
        off, end, found = 0, len(buf), 0
        while off < end:
            if end - off < 4:
                raise CoreError(
                    f"{prefix}incomplete string length indicator for inference input "
                    f"'{name}' for model '{self.name}', expecting 4 bytes but only "
                    f"{end - off} bytes available. Please make sure the string length "
                    "indicator is in one buffer."
                )
            (length,) = _U32.unpack_from(buf, off)
            off += 4
            found += 1
            if found > count:
                raise self._string_count_error(found, count, name, prefix)
            if end - off < length:
                if found == count:
                    raise BackendError(
                        f"incomplete string data for inference input '{name}', expecting "
                        f"string of length {length} but only {end - off} bytes available"
                    )
                break
            off += length
        raise self._string_count_error(found, count, name, prefix)

    def _string_count_error(self, found: int, count: int, name: str, prefix: str) -> CoreError:
        """Triton's answer to ``found`` BYTES elements where the shape holds ``count``: it
        stops counting at the first element too many."""
        if found > count and found:  # (a negative count fails at the first element)
            return CoreError(
                f"{prefix}unexpected number of string elements {max(count, 0) + 1} for inference "
                f"input '{name}' for model '{self.name}', expecting {count}"
            )
        return CoreError(
            f"{prefix}expected {count} string elements for inference input '{name}' for "
            f"model '{self.name}', got {found}"
        )
