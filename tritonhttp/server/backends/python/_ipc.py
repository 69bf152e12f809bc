"""Tensors between the server and a worker, in shared memory, and descriptors passed on.

The tensors of a request or response form one *block*, written into the sender's arena
(:mod:`._arena`) and described by ``(segment, offset, start, end, tensors)``; the
receiver copies a small one out and uses a large one in place. Each tensor is
``(name, datatype, shape, offset in the block, nbytes)``. Descriptors (arena segments,
client connections, clients' shared-memory objects) travel on a second Unix socket with
``SCM_RIGHTS``.

A large request input that lies in a client's system shared-memory region skips the
arena: the worker maps it from the region's object copy-on-write (:func:`map_private`),
so the model reads the client's pages without a copy and writes into private ones. A
large output the client asked into a system region is written there by the worker
(:func:`place_output`) rather than into the arena.

Standard library and numpy only (the worker imports this module too).
"""

from __future__ import annotations

import mmap
import os
import socket
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ....utils._bytes import pack_items, unpack_array
from ._arena import Consumer, Producer

__all__ = [
    "DTYPES",
    "MAPPED_MIN",
    "SMALL",
    "BlockDesc",
    "TensorDesc",
    "map_private",
    "place_output",
    "read_block",
    "recv_fd",
    "send_fd",
    "settle_private",
    "write_block",
]

#: tensors up to this size are copied out of shared memory at once (larger ones are
#: used in place and their block is released when the array is garbage collected)
SMALL = 64 * 1024
#: request inputs in a client's shared-memory region from this size on are mapped by the
#: worker rather than copied into the arena (a smaller copy costs less than the mapping)
MAPPED_MIN = 1 << 20
#: an unparsed request body of at most this many bytes travels inside its message
INLINE = 4096

#: datatype -> numpy dtype of the data in shared memory (BF16 as uint16)
DTYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BF16": np.dtype(np.uint16),
}

#: one tensor inside a block: (name, datatype, shape, offset in the block, nbytes)
TensorDesc = tuple[str, str, tuple[int, ...], int, int]
#: the tensors of one request or response: (segment id, byte offset, start, end, tensors)
BlockDesc = tuple[int, int, int, int, list[TensorDesc]]


def send_fd(sock: socket.socket, fd: int) -> None:
    socket.send_fds(sock, [b"f"], [fd])


def recv_fd(sock: socket.socket) -> int:
    _, fds, _, _ = socket.recv_fds(sock, 1, 1)
    if not fds:
        raise ConnectionError("the peer closed the descriptor channel")
    return fds[0]


def write_block(arena: Producer, tensors: Sequence[tuple[str, str, Sequence[int], Any]]) -> Any:
    """The tensors of one request or response as one block in ``arena``.

    ``tensors``: (name, datatype, shape, data) with numpy data (BYTES: an object array
    of ``bytes`` or a list of them). Returns the block's descriptor (None: no tensors).
    """
    if not tensors:
        return None
    parts: list[tuple[str, str, tuple[int, ...], int, Any]] = []
    total = 0
    for name, datatype, shape, data in tensors:
        if datatype == "BYTES":
            items = data if isinstance(data, list) else data.ravel().tolist()
            data = pack_items(items)
            nbytes = len(data)
        else:
            if not data.flags.c_contiguous:
                data = np.ascontiguousarray(data)
            nbytes = int(data.nbytes)
        parts.append((name, datatype, tuple(map(int, shape)), nbytes, data))
        total += (nbytes + 63) & ~63
    seg, off, start, end = arena.alloc(total)
    mm = seg.mm
    descs: list[TensorDesc] = []
    rel = 0
    for name, datatype, shape, nbytes, data in parts:
        if nbytes:
            at = off + rel
            if isinstance(data, bytes):
                mm[at : at + nbytes] = data
            elif nbytes <= 4096:
                mm[at : at + nbytes] = data.tobytes()
            else:
                np.frombuffer(mm, np.uint8, nbytes, at)[:] = data.reshape(-1).view(np.uint8)
        descs.append((name, datatype, shape, rel, nbytes))
        rel += (nbytes + 63) & ~63
    return (seg.id, off, start, end, descs)


def read_block(
    arena: Consumer, block: Any, dtypes: dict[str, Any] = DTYPES
) -> list[tuple[str, str, tuple[int, ...], Any]]:
    """The tensors of a block as (name, datatype, shape, numpy data).

    A small block is copied out and released at once; a large one is used in place and
    released when every array over it is gone. BYTES come back as object arrays.
    """
    if block is None:
        return []
    seg_id, off, start, end, descs = block
    seg = arena.segments[seg_id]
    last = descs[-1]
    used = last[3] + last[4]
    small = used <= SMALL
    buf: Any
    if small:
        buf = bytearray(seg.view[off : off + used])
        arena.release(seg_id, start, end)
    else:
        buf = np.frombuffer(seg.mm, np.uint8, used, off)
        weakref.finalize(buf, arena.release, seg_id, start, end)
    return _arrays(buf, descs, dtypes, small)


def _arrays(
    buf: Any, descs: list[TensorDesc], dtypes: dict[str, Any], small: bool
) -> list[tuple[str, str, tuple[int, ...], Any]]:
    out = []
    for name, datatype, shape, rel, nbytes in descs:
        if datatype == "BYTES":
            data = unpack_array(memoryview(buf)[rel : rel + nbytes]).reshape(shape)
        else:
            dtype = dtypes[datatype]
            count = nbytes // dtype.itemsize
            if small:
                data = np.frombuffer(buf, dtype, count, rel).reshape(shape)
            else:
                data = buf[rel : rel + nbytes].view(dtype).reshape(shape)
        out.append((name, datatype, shape, data))
    return out


def map_private(
    fd: int, offset: int, nbytes: int, datatype: str, shape: Sequence[int]
) -> tuple[np.ndarray[Any, Any], mmap.mmap]:
    """``nbytes`` at ``offset`` of the object ``fd`` as a writable array over a private
    (copy-on-write) mapping, and the mapping: pages the model only reads are the
    object's own, pages it writes become its own copies (:func:`settle_private` makes
    them all its own). The mapping goes with the last array over it.
    Raises OSError when the object no longer holds those bytes."""
    if os.fstat(fd).st_size < offset + nbytes:  # (touching pages past its end: SIGBUS)
        raise OSError(f"the shared-memory object is smaller than {offset + nbytes} bytes")
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    mm = mmap.mmap(
        fd, offset + nbytes - start, flags=mmap.MAP_PRIVATE,
        prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=start,
    )  # fmt: skip
    dtype = DTYPES[datatype]
    array = np.frombuffer(mm, dtype, nbytes // dtype.itemsize, offset - start).reshape(shape)
    return array, mm


def settle_private(mm: mmap.mmap) -> None:
    """Unmap a :func:`map_private` mapping no array uses any more; one still used (the
    model kept an input) is made wholly private instead: a write of each page to itself
    copies the pages it did not write yet, so that later writes to the client's region
    no longer show through."""
    try:
        mm.close()
    except BufferError:
        pages = np.frombuffer(mm, np.uint8)[:: mmap.PAGESIZE]
        pages[...] = pages.copy()


def place_output(fd: int, offset: int, array: np.ndarray[Any, Any]) -> bool:
    """Write ``array``'s bytes (little-endian, C order) at ``offset`` of the object
    ``fd`` (a client's region); False when the object no longer holds them (nothing
    written: touching pages past its end would SIGBUS)."""
    nbytes = int(array.nbytes)
    if os.fstat(fd).st_size < offset + nbytes:
        return False
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    # (populated at once: one call instead of a page fault per page written)
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
    mm = mmap.mmap(fd, offset + nbytes - start, flags=flags, offset=start)
    try:
        target = np.frombuffer(mm, np.uint8, nbytes, offset - start)
        target[:] = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        del target
    finally:
        mm.close()
    return True
