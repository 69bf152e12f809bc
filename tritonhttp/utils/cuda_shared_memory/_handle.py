"""The raw CUDA IPC handle: 64 bytes, sent to the server base64-encoded.

``register_cuda_shared_memory(name, raw_handle, device_id, byte_size)`` takes the output
of :func:`encode_raw_handle` (what ``get_raw_handle`` returns); the server decodes it
and opens the memory with ``cudaIpcOpenMemHandle``. Nothing here needs a GPU.
"""

from __future__ import annotations

import base64
import binascii
import ctypes
from typing import Protocol

from ._errors import CudaSharedMemoryException

__all__ = ["CUDA_IPC_HANDLE_SIZE", "decode_raw_handle", "encode_raw_handle", "handle_bytes"]

#: sizeof(cudaIpcMemHandle_t)
CUDA_IPC_HANDLE_SIZE = 64


class _HasPointer(Protocol):
    def getPtr(self) -> int: ...


def handle_bytes(ipc_handle: _HasPointer) -> bytes:
    """The 64 bytes of a cuda-python ``cudaIpcMemHandle_t``.

    Read through ``getPtr()``, which every cuda-python release provides (13.x dropped the
    ``reserved`` attribute that 12.x had).
    """
    address = int(ipc_handle.getPtr())
    if not address:
        raise CudaSharedMemoryException("the CUDA IPC handle has no storage")
    return ctypes.string_at(address, CUDA_IPC_HANDLE_SIZE)


def encode_raw_handle(raw: bytes) -> bytes:
    """Base64 (standard alphabet, padded) of the 64 handle bytes: 88 ASCII bytes."""
    if len(raw) != CUDA_IPC_HANDLE_SIZE:
        raise CudaSharedMemoryException(
            f"a CUDA IPC handle has {CUDA_IPC_HANDLE_SIZE} bytes, not {len(raw)}"
        )
    return base64.b64encode(raw)


def decode_raw_handle(encoded: bytes | str) -> bytes:
    """The 64 handle bytes from their base64 form; anything else is refused."""
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as e:
        raise CudaSharedMemoryException(f"the raw handle is not valid base64: {e}") from None
    if len(raw) != CUDA_IPC_HANDLE_SIZE:
        raise CudaSharedMemoryException(
            f"the raw handle decodes to {len(raw)} bytes, a cudaIpcMemHandle_t has "
            f"{CUDA_IPC_HANDLE_SIZE}"
        )
    return raw
