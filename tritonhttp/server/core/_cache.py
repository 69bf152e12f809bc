"""The response cache (``--cache-config local,size=N``): responses keyed by what was asked.

A model opts in with ``response_cache { enable: true }``. The key covers the model name
and version, every input (name, datatype, shape and bytes, in name order), the requested
outputs and the request's own parameters, so two requests share a response only when
the model could not tell them apart. Entries are bounded by their byte size and evicted
least recently used first. Only successful responses are stored.
"""

from __future__ import annotations

import collections
import hashlib
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..support import _json
from ._types import InferRequest, InferResponse, OutputTensor

__all__ = ["CacheStats", "ResponseCache", "parse_cache_size"]

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
#: bytes charged per entry and per output on top of the data (names, shapes, bookkeeping)
ENTRY_OVERHEAD = 128
OUTPUT_OVERHEAD = 64


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
    size: int


@dataclass(slots=True)
class CacheStats:
    """Server-wide cache counters (the ``nv_cache_*`` gauges of the metrics)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    lookup_ns: int = 0
    insertion_ns: int = 0


def _frozen(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    copy = np.array(array, copy=True)
    copy.setflags(write=False)
    return copy


class ResponseCache:
    """An in-memory LRU cache of responses bounded by ``size`` bytes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
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
        cannot be stored (an error, or larger than the whole cache)."""
        if key in self._entries or response.error is not None or response.failed:
            return False
        outputs = []
        size = ENTRY_OVERHEAD
        for out in response.outputs:
            arr = out.array
            if arr.dtype == np.object_:
                nbytes = sum(
                    4 + len(x if isinstance(x, bytes) else bytes(x)) for x in arr.reshape(-1)
                )
            else:
                nbytes = int(arr.nbytes)
            size += OUTPUT_OVERHEAD + len(out.name) + nbytes
            outputs.append(OutputTensor(out.name, out.datatype, list(out.shape), _frozen(arr)))
        if size > self.size:
            return False
        while self.used + size > self.size and self._entries:
            _, old = self._entries.popitem(last=False)
            self.used -= old.size
            self.stats.evictions += 1
        params = dict(response.parameters) if response.parameters else None
        self._entries[key] = _Entry(outputs, params, size)
        self.used += size
        return True
