"""The control channel between the server and a worker, and tensors in shared memory.

Control messages are small pickled tuples framed by a 4-byte length on a Unix stream
socket; segment descriptors travel on a second Unix socket (``SCM_RIGHTS``). The two
messages of a plain request handed over unparsed (its ``exec`` with the body inline and
the ``done`` of its answer written to the client) are packed with :mod:`struct` instead,
flagged in the length's top bit, and read back as the same tuples: unpickling right after
another process ran on the CPU cost several microseconds more. The
tensors of a request or response form one *block*. A block of more than
:data:`INLINE` bytes is written into the sender's arena (:mod:`._arena`) and described
by ``(segment, offset, start, end, tensors)``; the receiver copies a small one out and
uses a large one in place. A block of at most :data:`INLINE` bytes rides inside the
control message as ``(data, tensors)``: for tensors that small, allocating and releasing
arena space costs more than the copy (measured: about 20,000 instructions per request on
each side, ~7% of an add_sub request). Each tensor is ``(name, datatype, shape, offset
in the block, nbytes)``.

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
    "DECLINED",
    "DTYPES",
    "SMALL",
    "BlockDesc",
    "FrameReader",
    "TensorDesc",
    "encode",
    "read_block",
    "recv_fd",
    "send_fd",
    "write_block",
]

_LEN = struct.Struct("<I")

#: tensors up to this size are copied out of shared memory at once (larger ones are
#: used in place and their block is released when the array is garbage collected)
SMALL = 64 * 1024
#: blocks of at most this many bytes travel inside the control message (not the arena)
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

#: a response descriptor: the worker did not take an unparsed request (the server parses
#: and answers it); the others are ``(0, code, message)`` for an error, ``(1, block,
#: parameters)`` for outputs and ``(2, rest)`` for an answer written to the client
DECLINED = (3,)

#: one tensor inside a block: (name, datatype, shape, offset in the block, nbytes)
TensorDesc = tuple[str, str, tuple[int, ...], int, int]
#: the tensors of one request or response: (segment id, byte offset, start, end, tensors)
BlockDesc = tuple[int, int, int, int, list[TensorDesc]]


#: the top bit of a frame's length: the message is packed (see the module doc), not pickled
_PACKED = 1 << 31
_SIZE = _PACKED - 1
#: ``("exec", batch, [(token, header length, body, key)])``, the body following
_EXEC = struct.Struct("<Bqqqq")
#: ``("done", batch, [(token, (2, b""), False)], [False])``
_DONE = struct.Struct("<Bqq")
_EXEC_KIND = 1
_DONE_KIND = 2


def encode(message: Any) -> bytes:
    """One framed control message."""
    packed = _pack(message)
    if packed is not None:
        return _LEN.pack(len(packed) | _PACKED) + packed
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    if len(payload) > _SIZE:
        raise ValueError(f"a control message of {len(payload)} bytes is over the 2 GiB limit")
    return _LEN.pack(len(payload)) + payload


def _pack(m: Any) -> bytes | None:
    """``m`` packed, when it is one of the two messages that travel so (else None). Every
    value must have the exact type the reader rebuilds (an ``int``, not a ``bool``)."""
    if type(m) is not tuple or not m:
        return None
    kind = m[0]
    try:
        if kind == "exec" and len(m) == 3:
            descs = m[2]
            if type(descs) is list and len(descs) == 1:
                desc = descs[0]
                if type(desc) is tuple and len(desc) == 4:  # (not a parsed request's)
                    token, header_len, body, key = desc
                    if (
                        type(body) is bytes
                        and type(m[1]) is type(token) is type(header_len) is type(key) is int
                    ):
                        return _EXEC.pack(_EXEC_KIND, m[1], token, header_len, key) + body
        elif kind == "done" and len(m) == 4:
            finals, flags = m[2], m[3]
            if (
                type(finals) is list
                and len(finals) == 1
                and type(flags) is list
                and len(flags) == 1
                and flags[0] is False
            ):
                final = finals[0]
                if type(final) is tuple and len(final) == 3:
                    token, desc, failed = final
                    if (
                        failed is False
                        and type(desc) is tuple
                        and len(desc) == 2
                        and type(desc[0]) is int
                        and desc[0] == 2
                        and type(desc[1]) is bytes
                        and not desc[1]
                        and type(m[1]) is type(token) is int
                    ):
                        return _DONE.pack(_DONE_KIND, m[1], token)
    except struct.error:  # (a number past 64 bits)
        return None
    return None


def _unpack(data: Any) -> Any:
    """The message a packed frame's payload holds."""
    kind = data[0]
    if kind == _EXEC_KIND:
        _, batch, token, header_len, key = _EXEC.unpack_from(data)
        return ("exec", batch, [(token, header_len, bytes(data[_EXEC.size :]), key)])
    if kind == _DONE_KIND and len(data) == _DONE.size:
        _, batch, token = _DONE.unpack_from(data)
        return ("done", batch, [(token, (2, b""), False)], [False])
    raise ValueError(f"unknown packed control message (kind {kind})")


class FrameReader:
    """Splits received bytes into control messages."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[Any]:
        if not self._buf and len(data) >= 4:
            (head,) = _LEN.unpack_from(data)
            if head & _SIZE == len(data) - 4:  # (the usual case: one whole message)
                if head & _PACKED:
                    return [_unpack(memoryview(data)[4:])]
                return [pickle.loads(memoryview(data)[4:])]
        buf = self._buf + data if self._buf else data
        out = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (head,) = _LEN.unpack_from(buf, pos)
            n = head & _SIZE
            if end - pos - 4 < n:
                break
            payload = buf[pos + 4 : pos + 4 + n]
            out.append(_unpack(payload) if head & _PACKED else pickle.loads(payload))
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


def write_block(arena: Producer, tensors: Sequence[tuple[str, str, Sequence[int], Any]]) -> Any:
    """The tensors of one request or response as one block (inline when small).

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
    if total <= INLINE:
        return _inline(parts)
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


def _inline(parts: list[tuple[str, str, tuple[int, ...], int, Any]]) -> Any:
    """A small block as ``(data, tensors)``, each tensor 8-byte aligned in ``data``."""
    chunks = []
    descs: list[TensorDesc] = []
    rel = 0
    for name, datatype, shape, nbytes, data in parts:
        chunks.append(data if isinstance(data, bytes) else data.tobytes())
        pad = -nbytes & 7
        if pad:
            chunks.append(bytes(pad))
        descs.append((name, datatype, shape, rel, nbytes))
        rel += nbytes + pad
    return (b"".join(chunks), descs)


def read_block(
    arena: Consumer, block: Any, dtypes: dict[str, Any] = DTYPES
) -> list[tuple[str, str, tuple[int, ...], Any]]:
    """The tensors of a block as (name, datatype, shape, numpy data).

    A small block is copied out and released at once; a large one is used in place and
    released when every array over it is gone. BYTES come back as object arrays.
    """
    if block is None:
        return []
    if len(block) == 2:  # inline: (data, tensors)
        return _arrays(bytearray(block[0]), block[1], dtypes, True)
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
