"""A loaded model version: request admission (Triton's validation, in Triton's order and
words), decoding of binary inputs, the response cache, and the scheduler in front of its
instances (:mod:`._scheduler`, :mod:`._sequence`)."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...utils._bytes import BytesFramingError, unpack_array
from ...utils._dtypes import TRITON_TO_NUMPY
from ._backend_api import ModelInstance
from ._cache import ResponseCache
from ._config import wire_datatype
from ._errors import BackendError, CoreError
from ._queue import PriorityQueue
from ._scheduler import BatchingRules, DynamicBatcher, FifoScheduler, Refusal, Scheduler
from ._sequence import SequenceBatcher
from ._stats import ModelStats
from ._types import ExecutionTimes, InferRequest, InferResponse, InputTensor
from .model_config_pb2 import ModelConfig

__all__ = ["ModelVersion"]

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


def _triton_order(inputs: dict[str, InputTensor]) -> list[InputTensor]:
    """``inputs`` (in request order) in the iteration order of Triton's map of them.

    A new element goes to the front of its bucket's run of nodes, a bucket's first one to
    the front of the list; growing the table re-inserts the nodes in list order. Up to two
    elements that is the reverse of the request order.
    """
    tensors = list(inputs.values())
    if len(tensors) <= 2:
        tensors.reverse()
        return tensors
    hashes = [_string_hash(t.name) for t in tensors]
    # the list as runs per bucket: bucket -> its nodes (newest last); runs newest last
    runs: dict[int, list[int]] = {}
    step = 0
    buckets = _BUCKET_LADDER[0]
    for i in range(len(tensors)):
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
    return [tensors[j] for run in reversed(runs.values()) for j in reversed(run)]


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


class ModelVersion:
    """One version of a model: its state, config, instances, queue and statistics."""

    def __init__(self, name: str, version: int) -> None:
        self.name = name
        self.version = version
        self.state = "LOADING"
        self.reason = ""
        self.config: ModelConfig | None = None
        self.config_json = b""
        self.metadata_json = b""
        self.instances: list[ModelInstance] = []
        self.answers_directly = False
        self.stats = ModelStats()
        self.decoupled = False
        self.in_flight = 0
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._inputs: dict[str, _InputSpec] = {}
        self._input_count = 0
        self._required = 0
        self._outputs: set[str] = set()
        self.output_names: list[str] = []
        self._max_batch = 0
        self.scheduler: Scheduler | None = None
        self._sequence: SequenceBatcher | None = None
        #: the server's response cache, when this version uses it
        self.cache: ResponseCache | None = None
        self.labels: dict[str, list[str]] = {}
        #: ``"model_name":...,"model_version":...`` as response JSON (built once)
        self.wire_prefix = b""
        #: (output name, datatype, *shape) -> ``{"name":...,"datatype":...,"shape":[...]``
        #: (built once per output shape, up to 1024 of them)
        self.wire_heads: dict[tuple[str | int, ...], bytes] = {}

    # ------------------------------------------------------------------ setup

    def activate(
        self,
        config: ModelConfig,
        instances: list[ModelInstance],
        cache: ResponseCache | None = None,
    ) -> None:
        """Take the final config and the created instances; the version becomes READY.

        ``cache`` is the server's response cache; the version uses it when its config
        enables ``response_cache``.
        """
        self.config = config
        self.instances = instances
        self.decoupled = config.model_transaction_policy.decoupled
        self._max_batch = config.max_batch_size
        self._inputs = {
            i.name: _InputSpec(
                i.name,
                wire_datatype(i.data_type),
                list(i.dims),
                i.optional,
                list(i.reshape.shape) if i.HasField("reshape") else None,
            )
            for i in config.input
        }
        self._input_count = len(config.input)
        self._required = sum(1 for i in config.input if not i.optional)
        self.output_names = [o.name for o in config.output]
        self._outputs = set(self.output_names)
        which = config.WhichOneof("scheduling_choice")
        self._sequence = None
        scheduler: Scheduler
        if which == "sequence_batching":
            scheduler = self._sequence = SequenceBatcher(
                config, instances, self._execute, self.stats
            )
        elif which == "dynamic_batching":
            scheduler = DynamicBatcher(
                instances,
                self._execute,
                self.stats,
                BatchingRules.from_config(config),
                PriorityQueue(config.dynamic_batching),
            )
        else:
            scheduler = FifoScheduler(instances, self._execute, self.stats)
        self.scheduler = scheduler
        self.cache = cache if cache is not None and config.response_cache.enable else None
        #: every instance may write an answer to the client itself (``InferRequest.direct``)
        self.answers_directly = (
            bool(instances)
            and self.cache is None
            and not self.decoupled
            and all(getattr(i, "answers_directly", False) for i in instances)
        )
        self.state = "READY"
        self.reason = ""

    @property
    def ready(self) -> bool:
        return self.state == "READY"

    # ------------------------------------------------------------------ admission

    def admit(self, req: InferRequest) -> None:
        """Validate a parsed request against the config (raises CoreError, JSON-typed;
        BackendError for what Triton's backend fails after admission, text/plain)."""
        req.start_ns = time.monotonic_ns()
        prefix = req.log_prefix()
        name = self.name
        if req.raw:
            self._map_raw_input(req, prefix)
        if req.requested_outputs:
            unknown = [o for o in req.requested_outputs if o not in self._outputs]
            if unknown:
                # Triton keeps the requested outputs in a std::set: the first by byte order
                raise CoreError(f"unexpected inference output '{min(unknown)}' for model '{name}'")
        inputs = req.inputs
        n = len(inputs)
        if n > self._input_count or n < self._required:
            self._count_error(req, prefix)
        order = _triton_order(inputs) if n > 2 else list(reversed(inputs.values()))
        specs = self._inputs
        max_batch = self._max_batch
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
        if self._sequence is not None:
            self._sequence.check(req)
        if backend_error is not None:
            self.stats.record_request(False, time.monotonic_ns() - req.start_ns, 0)
            raise backend_error

    def _count_error(self, req: InferRequest, prefix: str) -> None:
        assert self.config is not None
        missing = "[" + "".join(
            f"'{i.name}'," for i in self.config.input if not i.optional and i.name not in req.inputs
        )
        missing = missing[:-1] + "]"
        got = "[" + "".join(f"'{t.name}'," for t in _triton_order(req.inputs))
        got = got[:-1] + "]" if req.inputs else "[]"
        n = len(req.inputs)
        if self._input_count == self._required:
            head = f"expected {self._input_count} inputs but got {n} inputs"
        else:
            head = (
                f"expected number of inputs between {self._required} and {self._input_count} "
                f"but got {n} inputs"
            )
        raise CoreError(
            f"{prefix}{head} for model '{self.name}'. Got input(s) {got}, but missing required "
            f"input(s) {missing}. Please provide all required input(s)."
        )

    def _map_raw_input(self, req: InferRequest, prefix: str) -> None:
        assert self.config is not None
        raw = req.inputs.pop("raw_input")
        cfg_inputs = self.config.input
        if len(cfg_inputs) != 1:
            raise CoreError(
                f"{prefix}Raw request must only have 1 input (found 1) to be deduced but got "
                f"{len(cfg_inputs)} inputs in '{self.name}' model configuration"
            )
        spec = self._inputs[cfg_inputs[0].name]
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
        if self._max_batch > 0:
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

    # ------------------------------------------------------------------ scheduling

    async def infer(self, req: InferRequest) -> InferResponse:
        """Answer an admitted request (from the cache, or through the scheduler).

        Raises CoreError when the scheduler refuses it outright (queue full).
        """
        scheduler = self.scheduler
        assert scheduler is not None
        self.in_flight += 1
        try:
            cache = self.cache
            if cache is None:
                return await scheduler.infer(req)
            return await self._infer_cached(cache, scheduler, req)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0 and self._drain_waiters:
                for waiter in self._drain_waiters:
                    if not waiter.done():
                        waiter.set_result(None)
                self._drain_waiters.clear()

    async def _infer_cached(
        self, cache: ResponseCache, scheduler: Scheduler, req: InferRequest
    ) -> InferResponse:
        t0 = time.monotonic_ns()
        key = cache.key(self.name, self.version, req)
        hit = cache.lookup(key)
        t1 = time.monotonic_ns()
        cache.stats.lookup_ns += t1 - t0
        if hit is not None:
            self.stats.record_cache_hit(t1 - req.start_ns, t1 - t0)
            return hit
        response = await scheduler.infer(req)
        if not isinstance(response, Refusal):
            t2 = time.monotonic_ns()
            existed = cache.contains(key)
            cache.insert(key, response)
            t3 = time.monotonic_ns()
            cache.stats.insertion_ns += t3 - t2
            if not existed:
                self.stats.record_cache_miss((t1 - t0) + (t3 - t2))
        return response

    def cancel(self, req: InferRequest) -> None:
        """The client went away: drop the request if queued, else flag it cancelled."""
        req.cancelled = True
        if self.scheduler is not None:
            self.scheduler.cancel(req)

    async def _execute(
        self,
        inst: ModelInstance,
        requests: list[InferRequest],
        nulls: tuple[int, ...] = (),
        on_free: Callable[[], None] | None = None,
    ) -> list[InferResponse]:
        """Run one batch on ``inst`` and count it. ``nulls`` are the positions of
        sequence-batcher padding requests: part of the batch size, not inferences.
        ``on_free``: see :class:`ExecutionTimes`."""
        t0 = time.monotonic_ns()
        times = ExecutionTimes(on_free=on_free)
        responses = await inst.execute(requests, times)
        t1 = time.monotonic_ns()
        batch = 0
        for r in requests:
            batch += r.batch_size
        stats = self.stats
        failed = responses[0].failed if len(responses) == 1 else all(r.failed for r in responses)
        pairs = zip(requests, responses, strict=False)
        if nulls:
            real = [pair for i, pair in enumerate(pairs) if i not in nulls]
            stats.record_execution(
                batch, len(real), times.input_ns, times.infer_ns, times.output_ns, failed,
                sum(r.batch_size for r, _ in real),
            )  # fmt: skip
        else:
            real = pairs  # type: ignore[assignment]
            stats.record_execution(
                batch, len(requests), times.input_ns, times.infer_ns, times.output_ns, failed
            )
        started = t0 + times.waited_ns
        for r, resp in real:
            stats.record_request(not resp.failed, t1 - r.start_ns, started - r.start_ns)
        return responses

    @property
    def pending(self) -> int:
        return self.scheduler.pending if self.scheduler is not None else 0

    def close(self) -> None:
        """Stop the scheduler's timers (the version is unloading)."""
        if self.scheduler is not None:
            self.scheduler.close()

    async def drain(self) -> None:
        """Wait until no request is in flight."""
        if self.in_flight:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter
