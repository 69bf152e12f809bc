"""POSIX shared memory between the server and a worker process: rings of tensor blocks.

Each direction has its own arena, a list of segments; only the newest is written to.
A segment is a ring: the producer (the side that writes tensors) allocates 64-byte
aligned blocks at its tail; the consumer releases blocks (in any order) and publishes
the oldest still-used position, ``head``, in the segment's first 8 bytes. When a block
does not fit, the producer adds a segment (``shm-growth-byte-size`` steps) and retires
the old one once it is empty.

Segments are created with ``shm_open`` under ``shm-region-prefix-name`` and unlinked at
once; the other side gets the file descriptor over a Unix socket. Nothing is left in
``/dev/shm`` whatever way either process ends.

Standard library and numpy only (the worker imports this module too).
"""

from __future__ import annotations

import contextlib
import importlib
import mmap
import os
import secrets
import struct
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["ALIGN", "HEADER", "Consumer", "Producer", "Segment", "create_segment"]

ALIGN = 64
HEADER = 64
_U64 = struct.Struct("<Q")

try:
    _posixshmem: Any = importlib.import_module("_posixshmem")
except ImportError:  # pragma: no cover - platforms without POSIX shared memory
    _posixshmem = None


def _align(n: int) -> int:
    return (n + ALIGN - 1) & ~(ALIGN - 1)


class Segment:
    """One mapped segment (``view`` is the whole mapping)."""

    __slots__ = ("id", "mm", "size", "view")

    def __init__(self, segment_id: int, fd: int, size: int) -> None:
        self.id = segment_id
        self.size = size
        self.mm = mmap.mmap(fd, size)
        self.view = memoryview(self.mm)

    def read_head(self) -> int:
        return int(_U64.unpack_from(self.mm, 0)[0])

    def write_head(self, value: int) -> None:
        _U64.pack_into(self.mm, 0, value)

    def close(self) -> None:
        self.view.release()
        with contextlib.suppress(BufferError):  # numpy views still use it: unmapped later
            self.mm.close()


def create_segment(prefix: str, size: int) -> int:
    """A new shared-memory object of ``size`` bytes, already unlinked: its descriptor."""
    for _ in range(8):
        name = f"/{prefix}{secrets.token_hex(8)}"
        try:
            if _posixshmem is not None:
                fd = int(_posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
                _posixshmem.shm_unlink(name)
            else:  # pragma: no cover
                path = f"/dev/shm{name}"
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
                os.unlink(path)
        except FileExistsError:
            continue
        try:
            os.ftruncate(fd, size)
        except OSError:
            os.close(fd)
            raise
        return fd
    raise OSError("could not create a unique shared-memory object")


class Producer:
    """The writing side of one direction: allocates blocks, grows the arena.

    ``announce(segment_id, fd, size)`` hands a new segment to the other side (before any
    block of it is referenced); ``retire(segment_id)`` tells it a segment is gone.
    """

    def __init__(
        self,
        prefix: str,
        default_size: int,
        growth: int,
        announce: Callable[[int, int, int], None],
        retire: Callable[[int], None],
        first_id: int = 1,
    ) -> None:
        self._prefix = prefix
        self._growth = max(growth, ALIGN)
        self._announce = announce
        self._retire = retire
        self._next_id = first_id
        self._lock = threading.Lock()
        self.segments: dict[int, Segment] = {}
        self._current: Segment | None = None
        self._tail = 0
        self._old: list[tuple[Segment, int]] = []  # retired segments and their final tail
        self._grow(max(default_size, HEADER + ALIGN))

    def _grow(self, size: int) -> None:
        fd = create_segment(self._prefix, size)
        try:
            seg = Segment(self._next_id, fd, size)
            self._next_id += 1
            self._announce(seg.id, fd, size)
        finally:
            os.close(fd)
        if self._current is not None:
            self._old.append((self._current, self._tail))
        self.segments[seg.id] = seg
        self._current = seg
        self._tail = 0

    def _collect(self) -> None:
        keep = []
        for seg, tail in self._old:
            if seg.read_head() >= tail:
                del self.segments[seg.id]
                self._retire(seg.id)
                seg.close()
            else:
                keep.append((seg, tail))
        self._old = keep

    def alloc(self, nbytes: int) -> tuple[Segment, int, int, int]:
        """A block of ``nbytes``: (segment, byte offset, start, end) (start/end: positions
        to hand to :meth:`Consumer.release`)."""
        n = _align(max(nbytes, 1))
        with self._lock:
            if self._old:
                self._collect()
            seg = self._current
            assert seg is not None
            cap = seg.size - HEADER
            if n <= cap:
                head = seg.read_head()
                tail = self._tail
                pos = tail % cap
                skip = cap - pos if pos + n > cap else 0
                if tail + skip + n - head <= cap:
                    start = tail + skip
                    self._tail = start + n
                    # the released range covers the skipped end of the ring too
                    return seg, HEADER + start % cap, tail, start + n
            need = n + HEADER
            size = max(seg.size + self._growth, -(-need // self._growth) * self._growth)
            self._grow(size)
            seg = self._current
            assert seg is not None
            self._tail = n
            return seg, HEADER, 0, n

    def close(self) -> None:
        with self._lock:
            for seg in self.segments.values():
                seg.close()
            self.segments.clear()
            self._old = []
            self._current = None


class Consumer:
    """The reading side of one direction: maps announced segments, releases blocks."""

    def __init__(self) -> None:
        self.segments: dict[int, Segment] = {}
        self._lock = threading.Lock()
        self._released: dict[int, dict[int, int]] = {}

    def add(self, segment_id: int, fd: int, size: int) -> None:
        try:
            self.segments[segment_id] = Segment(segment_id, fd, size)
        finally:
            os.close(fd)
        self._released[segment_id] = {}

    def drop(self, segment_id: int) -> None:
        seg = self.segments.pop(segment_id, None)
        self._released.pop(segment_id, None)
        if seg is not None:
            seg.close()

    def release(self, segment_id: int, start: int, end: int) -> None:
        """The block [start, end) of a segment is no longer used (any order)."""
        with self._lock:
            seg = self.segments.get(segment_id)
            if seg is None:
                return
            released = self._released[segment_id]
            head = seg.read_head()
            if start != head:
                released[start] = end
                return
            head = end
            while head in released:
                head = released.pop(head)
            seg.write_head(head)

    def close(self) -> None:
        for seg in self.segments.values():
            seg.close()
        self.segments.clear()
        self._released.clear()
