"""The control channel between the server and a worker, and tensors in shared memory.

Control messages are small pickled tuples framed by a 4-byte length on a Unix stream
socket; segment descriptors travel on a second Unix socket (``SCM_RIGHTS``). Tensor
data never goes through the socket: it is written into the sender's arena
(:mod:`._arena`) and described by ``(name, datatype, shape, segment, offset, start,
end, nbytes)``.

Standard library and numpy only (the worker imports this module too).
"""

from __future__ import annotations

import pickle
import socket
import struct
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ....utils._bytes import pack_items, unpack_array
from ._arena import Consumer, Producer

__all__ = [
    "DTYPES",
    "SMALL",
    "FrameReader",
    "TensorDesc",
    "encode",
    "read_tensor",
    "recv_fd",
    "send_fd",
    "write_tensor",
]

_LEN = struct.Struct("<I")

#: tensors up to this size are copied out of shared memory at once (larger ones are
#: used in place and their block is released when the array is garbage collected)
SMALL = 64 * 1024

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

#: (name, datatype, shape, segment id, byte offset, start, end, nbytes)
TensorDesc = tuple[str, str, tuple[int, ...], int, int, int, int, int]


def encode(message: Any) -> bytes:
    """One framed control message."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(payload)) + payload


class FrameReader:
    """Splits received bytes into control messages."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[Any]:
        buf = self._buf + data if self._buf else data
        out = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (n,) = _LEN.unpack_from(buf, pos)
            if end - pos - 4 < n:
                break
            out.append(pickle.loads(buf[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        self._buf = buf[pos:] if pos < end else b""
        return out


def send_fd(sock: socket.socket, fd: int) -> None:
    socket.send_fds(sock, [b"f"], [fd])


def recv_fd(sock: socket.socket) -> int:
    _, fds, _, _ = socket.recv_fds(sock, 1, 1)
    if not fds:
        raise ConnectionError("the peer closed the descriptor channel")
    return fds[0]


def write_tensor(
    arena: Producer, name: str, datatype: str, shape: Sequence[int], array: Any
) -> TensorDesc:
    """Copy a tensor into the arena. ``array``: numpy data (BYTES: an object array of
    ``bytes`` or a list of them)."""
    if datatype == "BYTES":
        items = array if isinstance(array, list) else array.ravel().tolist()
        data = pack_items(items)
        nbytes = len(data)
        seg, off, start, end = arena.alloc(nbytes)
        seg.view[off : off + nbytes] = data
    else:
        nbytes = int(array.nbytes)
        seg, off, start, end = arena.alloc(nbytes)
        if nbytes:
            dst = np.frombuffer(seg.mm, np.uint8, nbytes, off)
            src = array if array.flags.c_contiguous else np.ascontiguousarray(array)
            dst[:] = src.reshape(-1).view(np.uint8)
    return (name, datatype, tuple(int(d) for d in shape), seg.id, off, start, end, nbytes)


def read_tensor(arena: Consumer, desc: TensorDesc, dtypes: dict[str, Any] = DTYPES) -> Any:
    """The numpy data of a described tensor (BYTES: an object array of ``bytes``).

    Small tensors are copied and their block released at once; large ones are views
    whose block is released when the array (and every view of it) is gone.
    """
    _, datatype, shape, seg_id, off, start, end, nbytes = desc
    seg = arena.segments[seg_id]
    if datatype == "BYTES":
        out = unpack_array(seg.view[off : off + nbytes])
        arena.release(seg_id, start, end)
        return out.reshape(shape)
    dtype = dtypes[datatype]
    count = nbytes // dtype.itemsize if dtype.itemsize else 0
    if nbytes <= SMALL:
        array = np.frombuffer(seg.mm, dtype, count, off).copy()
        arena.release(seg_id, start, end)
        return array.reshape(shape)
    base = np.frombuffer(seg.mm, dtype, count, off)
    weakref.finalize(base, arena.release, seg_id, start, end)
    return base.reshape(shape)
