"""The response cache (``--cache-config local,size=N``): responses keyed by what was asked.

A model opts in with ``response_cache { enable: true }``. The key covers the model name
and version, every input (name, datatype, shape and bytes, in name order), the requested
outputs and the request's own parameters, so two requests share a response only when
the model could not tell them apart. Entries are bounded by their byte size and evicted
least recently used first. Only successful responses are stored.

Sizes are counted as Triton's local cache counts them: the cache's own bookkeeping takes
``BUFFER_OVERHEAD`` bytes of ``size`` (so a cache smaller than ``MIN_SIZE`` cannot hold
anything and Triton refuses to start with one), an entry takes its serialised outputs
(``ENTRY_OVERHEAD`` plus, per output, ``OUTPUT_OVERHEAD``, 8 bytes per dimension, its
name, its datatype and its data) rounded up to ``ALIGNMENT``. Entries are placed in the
rest of the buffer, less ``ALIGNMENT`` bytes that stay free, as Triton's allocator places
them (best fit; a piece left over smaller than ``MIN_BLOCK`` goes with the entry; freed
neighbours merge), so a cache whose free bytes are scattered evicts more than one whose
free bytes are together.
"""

from __future__ import annotations

import bisect
import collections
import hashlib
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..support import _json
from ._types import InferRequest, InferResponse, OutputTensor

__all__ = ["MIN_SIZE", "CacheStats", "ResponseCache", "parse_cache_size"]

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
#: bytes of ``size`` the cache's own bookkeeping takes (what an empty cache reports used)
BUFFER_OVERHEAD = 128
#: bytes charged per entry and per output on top of names, dimensions and data
ENTRY_OVERHEAD = 12
OUTPUT_OVERHEAD = 28
#: entries take whole multiples of this many bytes
ALIGNMENT = 16
#: the smallest free piece a placement leaves behind (smaller ones go with the entry)
MIN_BLOCK = 48
#: how much larger than ``size`` a response may be and still be tried (evicting entries)
SIZE_CHECK_SLACK = 8
#: the smallest ``size`` Triton's local cache starts with (room for its smallest entry)
MIN_SIZE = 192


def parse_cache_size(text: str) -> int:
    """A ``size=`` value: a non-negative byte count."""
    value = int(text, 10)
    if value < 0:
        raise ValueError("size must not be negative")
    return value


@dataclass(slots=True)
class _Entry:
    outputs: list[OutputTensor]
    parameters: dict[str, Any] | None
    offset: int
    size: int


class _Arena:
    """Where entries lie in the cache's buffer: the free pieces, by offset."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, 0)
        self._free: list[tuple[int, int]] = [(0, self.capacity)] if self.capacity else []

    def take(self, size: int) -> tuple[int, int] | None:
        """``(offset, length)`` of the best-fitting free piece for ``size`` bytes."""
        fits = [(length, offset) for offset, length in self._free if length >= size]
        if not fits:
            return None
        length, offset = min(fits)
        self._free.remove((offset, length))
        if length - size >= MIN_BLOCK:
            bisect.insort(self._free, (offset + size, length - size))
            length = size
        return offset, length

    def give(self, offset: int, length: int) -> None:
        """Free a piece, merged with the free pieces either side of it."""
        i = bisect.bisect_left(self._free, (offset, length))
        if i < len(self._free) and self._free[i][0] == offset + length:
            length += self._free.pop(i)[1]
        if i > 0 and sum(self._free[i - 1]) == offset:
            offset, before = self._free.pop(i - 1)
            length += before
        bisect.insort(self._free, (offset, length))


@dataclass(slots=True)
class CacheStats:
    """Server-wide cache counters (the ``nv_cache_*`` gauges of the metrics)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    lookup_ns: int = 0
    insertion_ns: int = 0


def _data_bytes(array: np.ndarray[Any, Any]) -> int:
    if array.dtype == np.object_:
        return sum(4 + len(x if isinstance(x, bytes) else bytes(x)) for x in array.reshape(-1))
    return int(array.nbytes)


def _serialised_size(outputs: list[OutputTensor]) -> int:
    """The bytes of a response with ``outputs`` as the cache serialises it (before its
    entry is rounded up to ``ALIGNMENT``)."""
    size = ENTRY_OVERHEAD
    for out in outputs:
        size += OUTPUT_OVERHEAD + 8 * len(out.shape) + len(out.name) + len(out.datatype)
        size += _data_bytes(out.array)
    return size


def _frozen(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    copy = np.array(array, copy=True)
    copy.setflags(write=False)
    return copy


class ResponseCache:
    """An in-memory LRU cache of responses bounded by ``size`` bytes."""

    def __init__(self, size: int) -> None:
        self.size = size
        #: bytes in use, the cache's own bookkeeping included (as Triton reports them)
        self.used = min(BUFFER_OVERHEAD, size)
        self._arena = _Arena(size - BUFFER_OVERHEAD - ALIGNMENT)
        self.stats = CacheStats()
        self._entries: collections.OrderedDict[bytes, _Entry] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def utilization(self) -> float:
        return self.used / self.size if self.size else 0.0

    # ------------------------------------------------------------------ keys

    @staticmethod
    def key(model: str, version: int, req: InferRequest) -> bytes:
        """The cache key of an admitted (decoded) request."""
        h = hashlib.blake2b(digest_size=32)
        name = model.encode()
        h.update(_U32.pack(len(name)) + name + _U64.pack(version))
        for input_name in sorted(req.inputs):
            t = req.inputs[input_name]
            head = f"{input_name}\0{t.datatype}\0{t.shape}".encode()
            h.update(_U32.pack(len(head)) + head)
            arr = t.array
            if arr is None:  # not decoded: hash what arrived
                raw = t.raw if t.raw is not None else b""
                h.update(_U64.pack(len(raw)))
                h.update(raw)
            elif arr.dtype == np.object_:
                items = arr.reshape(-1).tolist()
                h.update(_U64.pack(len(items)))
                for item in items:
                    data = item if isinstance(item, bytes) else bytes(item)
                    h.update(_U32.pack(len(data)))
                    h.update(data)
            else:
                contiguous = np.ascontiguousarray(arr)
                h.update(_U64.pack(contiguous.nbytes))
                h.update(contiguous.data.cast("B"))
        outputs = ",".join(req.requested_outputs) if req.requested_outputs else "*"
        h.update(b"\1" + outputs.encode())
        if req.parameters:
            h.update(b"\2" + _json.dumps(req.parameters))
        return h.digest()

    # ------------------------------------------------------------------ lookup and insert

    def lookup(self, key: bytes) -> InferResponse | None:
        entry = self._entries.get(key)
        if entry is None:
            self.stats.misses += 1
            return None
        self._entries.move_to_end(key)
        self.stats.hits += 1
        return InferResponse(
            outputs=list(entry.outputs),
            parameters=dict(entry.parameters) if entry.parameters else None,
        )

    def contains(self, key: bytes) -> bool:
        return key in self._entries

    def insert(self, key: bytes, response: InferResponse) -> bool:
        """Store a successful response; False when the key is already there or it
        cannot be stored (an error, or larger than the whole cache). As in Triton, a
        response larger than ``size`` is refused at once, while one that fits ``size``
        but not the room entries can have evicts every entry before it is given up."""
        if key in self._entries or response.error is not None or response.failed:
            return False
        serialised = _serialised_size(response.outputs)
        if serialised - SIZE_CHECK_SLACK > self.size:
            return False  # refused outright
        size = -(-serialised // ALIGNMENT) * ALIGNMENT
        outputs = [
            OutputTensor(out.name, out.datatype, list(out.shape), _frozen(out.array))
            for out in response.outputs
        ]
        while (place := self._arena.take(size)) is None and self._entries:
            _, old = self._entries.popitem(last=False)
            self._arena.give(old.offset, old.size)
            self.used -= old.size
            self.stats.evictions += 1
        if place is None:
            return False
        params = dict(response.parameters) if response.parameters else None
        self._entries[key] = _Entry(outputs, params, *place)
        self.used += place[1]
        return True
