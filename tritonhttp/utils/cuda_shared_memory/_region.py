"""CUDA shared-memory regions: tritonclient's API with W15 fixed.

* :func:`destroy_shared_memory_region` frees the device memory (tritonclient only drops
  the handle from a list; memory lingers while the caller still holds the handle) --
  unless DLPack consumers still use it, in which case the last of them frees it;
* writes and reads are bounds-checked and take an ``offset`` (tritonclient: none);
* reads copy only the bytes asked for, once (tritonclient copies the whole region twice);
* DLPack exports never leak (see ``_dlpack``); no CUDA stream is created or leaked: all
  copies are synchronous ``cudaMemcpy`` calls.
"""

from __future__ import annotations

import operator
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._bytes import (
    BytesFramingError,
    element_list,
    framed_extent,
    pack_items,
    to_object_array,
    unpack_items,
)
from .._dtypes import read_dtype
from . import _runtime
from ._dlpack import DLDeviceType, SharedMemoryTensor, read_dlpack
from ._errors import CudaSharedMemoryException
from ._handle import encode_raw_handle, handle_bytes
from ._runtime import cudart

__all__ = [
    "CudaSharedMemoryRegion",
    "allocated_shared_memory_regions",
    "allocated_shm_regions",
    "as_shared_memory_tensor",
    "create_shared_memory_region",
    "destroy_shared_memory_region",
    "get_contents_as_numpy",
    "get_raw_handle",
    "set_shared_memory_region",
    "set_shared_memory_region_from_dlpack",
]

#: Live region handles, in creation order (tritonclient's module attribute of this name).
allocated_shm_regions: list[CudaSharedMemoryRegion] = []
_lock = threading.Lock()


def _free(address: int, device_id: int) -> None:
    with _runtime.on_device(device_id):
        _runtime.call("cudaFree", cudart.cudaFree, address)


def _free_quietly(address: int, device_id: int) -> None:
    try:
        _free(address, device_id)
    except Exception:  # garbage collection or exit: nobody to tell
        return


class _DeviceAllocation:
    """Device memory plus who still uses it: the region handle and DLPack exports.

    Freed by the region's destroy once no export is alive, else by the last export; freed
    quietly when everything holding it was garbage collected (or at exit).
    """

    def __init__(self, address: int, byte_size: int, device_id: int) -> None:
        self.address = address
        self.byte_size = byte_size
        self.device_id = device_id
        self._lock = threading.Lock()
        self._exports = 0
        self._released = False
        self._finalizer = weakref.finalize(self, _free_quietly, address, device_id)

    @property
    def freed(self) -> bool:
        return not self._finalizer.alive

    def add_export(self) -> None:
        with self._lock:
            if self._released:
                raise CudaSharedMemoryException(
                    "the cuda shared memory region of this tensor has been destroyed"
                )
            self._exports += 1

    def drop_export(self) -> None:
        with self._lock:
            self._exports -= 1
            free_now = self._released and self._exports == 0
        if free_now and self._finalizer.detach() is not None:
            _free_quietly(self.address, self.device_id)

    def release(self) -> None:
        """The handle is destroyed: free now, or when the last export goes."""
        with self._lock:
            self._released = True
            if self._exports:
                return
        if self._finalizer.detach() is not None:
            _free(self.address, self.device_id)


class _ExportToken:
    """Owned by one exported DLPack tensor; tells the allocation when it is gone."""

    def __init__(self, allocation: _DeviceAllocation) -> None:
        allocation.add_export()
        self._allocation: _DeviceAllocation | None = allocation

    def __del__(self) -> None:
        allocation = getattr(self, "_allocation", None)  # None if __init__ raised
        self._allocation = None
        if allocation is not None:
            allocation.drop_export()


class CudaSharedMemoryRegion:
    """Handle to one CUDA allocation that can be shared with Triton by IPC handle.

    Built by :func:`create_shared_memory_region`. Pass :func:`get_raw_handle`, the
    device id and :attr:`byte_size` to ``register_cuda_shared_memory``.
    """

    def __init__(
        self,
        triton_shm_name: str,
        cuda_shm_handle: Any,
        base_addr: int,
        byte_size: int,
        device_id: int,
    ) -> None:
        self._triton_shm_name = triton_shm_name
        self._cuda_shm_handle = cuda_shm_handle
        self._base_addr = int(base_addr)
        self._byte_size = int(byte_size)
        self._device_id = int(device_id)
        self._allocation: _DeviceAllocation | None = _DeviceAllocation(
            self._base_addr, self._byte_size, self._device_id
        )
        self._destroyed = False

    @property
    def triton_shm_name(self) -> str:
        """Name under which the region is (to be) registered with the server."""
        return self._triton_shm_name

    @property
    def byte_size(self) -> int:
        """Size of the allocation in bytes."""
        return self._byte_size

    @property
    def device_id(self) -> int:
        """The GPU holding the memory."""
        return self._device_id

    @property
    def destroyed(self) -> bool:
        """True once :func:`destroy_shared_memory_region` was called on this handle."""
        return self._destroyed

    def __repr__(self) -> str:
        state = "destroyed" if self._destroyed else f"{self._byte_size} bytes"
        return (
            f"<CudaSharedMemoryRegion name={self._triton_shm_name!r} "
            f"device={self._device_id} ({state})>"
        )


def _live(cuda_shm_handle: object) -> _DeviceAllocation:
    if not isinstance(cuda_shm_handle, CudaSharedMemoryRegion):
        raise CudaSharedMemoryException(
            "cuda_shm_handle must be a CudaSharedMemoryRegion returned by "
            f"create_shared_memory_region, not {type(cuda_shm_handle).__name__}"
        )
    allocation = cuda_shm_handle._allocation
    if allocation is None:
        raise CudaSharedMemoryException(
            f"cuda shared memory region '{cuda_shm_handle._triton_shm_name}' has been destroyed"
        )
    return allocation


def _non_negative(value: object, what: str) -> int:
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise CudaSharedMemoryException(
            f"{what} must be an integer, not {type(value).__name__}"
        ) from None
    if number < 0:
        raise CudaSharedMemoryException(f"{what} must not be negative, got {number}")
    return number


_CREATE_FAILED = "unable to create cuda shared memory handle"
_SET_FAILED = "unable to set values in cuda shared memory"
_READ_FAILED = "failed to read cuda shared memory results"


def _check_values(input_values: object) -> None:
    """tritonclient checks the values first, before it looks at the handle."""
    if not isinstance(input_values, (list, tuple)):
        raise CudaSharedMemoryException(
            "input_values must be specified as a list/tuple of numpy arrays"
        )
    for value in input_values:
        if not isinstance(value, np.ndarray):
            raise CudaSharedMemoryException("each element of input_values must be a numpy array")


def create_shared_memory_region(
    triton_shm_name: str, byte_size: int, device_id: int
) -> CudaSharedMemoryRegion:
    """Allocate ``byte_size`` bytes on GPU ``device_id`` that Triton can open by IPC handle.

    The caller's current device is left as it was. Raises
    :class:`CudaSharedMemoryException` (also without a GPU or driver).
    """
    try:
        size = _non_negative(byte_size, "byte_size")
        device = _non_negative(device_id, "device_id")
    except CudaSharedMemoryException as e:  # tritonclient's text first, then what is wrong
        raise CudaSharedMemoryException(f"{_CREATE_FAILED}: {e}") from None
    if size == 0:
        raise CudaSharedMemoryException(f"{_CREATE_FAILED}: byte_size must be positive")
    try:
        with _runtime.on_device(device):
            _runtime.ensure_unified_addressing(device)
            address = int(_runtime.call(f"cudaMalloc({size})", cudart.cudaMalloc, size))
            try:
                ipc_handle = _runtime.call(
                    "cudaIpcGetMemHandle", cudart.cudaIpcGetMemHandle, address
                )
            except BaseException:
                _free_quietly(address, device)
                raise
    except CudaSharedMemoryException as e:
        raise CudaSharedMemoryException(f"{_CREATE_FAILED}: {e}") from e
    region = CudaSharedMemoryRegion(triton_shm_name, ipc_handle, address, size, device)
    with _lock:
        allocated_shm_regions.append(region)
    return region


def get_raw_handle(cuda_shm_handle: CudaSharedMemoryRegion) -> bytes:
    """Base64 of the region's 64-byte ``cudaIpcMemHandle_t`` (for the server)."""
    _live(cuda_shm_handle)
    return encode_raw_handle(handle_bytes(cuda_shm_handle._cuda_shm_handle))


def _host_plan(
    input_values: object, start: int, capacity: int, name: str
) -> list[tuple[int, np.ndarray[Any, Any]]]:
    """(region offset, contiguous host array) per value, after every check."""
    _check_values(input_values)
    assert isinstance(input_values, (list, tuple))
    plan: list[tuple[int, np.ndarray[Any, Any]]] = []
    position = start
    for value in input_values:
        if value.dtype == np.object_:
            item = value.reshape(-1)[0] if value.size == 1 else None
            if not isinstance(item, (bytes, bytearray, memoryview)):  # not serialized yet
                item = pack_items(element_list(value)) if value.size else b""
            host = np.frombuffer(item, dtype=np.uint8)  # no copy of the framed bytes
        elif value.dtype.hasobject:
            raise CudaSharedMemoryException(
                f"unable to set values in cuda shared memory: dtype {value.dtype} holds objects"
            )
        else:
            host = np.ascontiguousarray(value)
        plan.append((position, host))
        position += host.nbytes
    if position > capacity:
        raise CudaSharedMemoryException(
            f"unable to set values in cuda shared memory: {position - start} bytes at offset "
            f"{start} do not fit in region '{name}' of {capacity} bytes"
        )
    return plan


def set_shared_memory_region(
    cuda_shm_handle: CudaSharedMemoryRegion,
    input_values: Sequence[np.ndarray[Any, Any]],
    offset: int = 0,
) -> None:
    """Copy numpy arrays back to back into the region from ``offset`` (default 0).

    Object arrays are BYTES (``serialize_byte_tensor`` output, or serialized here).
    Nothing is copied unless everything fits.
    """
    _check_values(input_values)
    try:
        allocation = _live(cuda_shm_handle)
        start = _non_negative(offset, "offset")
    except CudaSharedMemoryException as e:  # tritonclient's text first, then what is wrong
        raise CudaSharedMemoryException(f"{_SET_FAILED}: {e}") from None
    plan = _host_plan(input_values, start, allocation.byte_size, cuda_shm_handle._triton_shm_name)
    try:
        with _runtime.on_device(allocation.device_id):
            for at, host in plan:
                _runtime.memcpy(allocation.address + at, host.ctypes.data, host.nbytes)
    except CudaSharedMemoryException as e:
        raise CudaSharedMemoryException(f"unable to set values in cuda shared memory: {e}") from e


def set_shared_memory_region_from_dlpack(
    cuda_shm_handle: CudaSharedMemoryRegion, input_values: Sequence[Any], offset: int = 0
) -> None:
    """Copy DLPack tensors (CPU, CUDA, CUDA-host or managed memory) into the region.

    Each must be C-contiguous; they are written back to back from ``offset``. CUDA
    producers are asked for their data on the legacy default stream, which the copies
    use. Nothing is copied unless everything fits.
    """
    allocation = _live(cuda_shm_handle)
    start = _non_negative(offset, "offset")
    if not isinstance(input_values, (list, tuple)):
        raise CudaSharedMemoryException(
            "input_values must be specified as a list/tuple of DLPack-capable objects"
        )
    supported = {
        DLDeviceType.kDLCPU,
        DLDeviceType.kDLCUDA,
        DLDeviceType.kDLCUDAHost,
        DLDeviceType.kDLCUDAManaged,
    }
    tensors = [read_dlpack(value) for value in input_values]
    position = start
    for tensor in tensors:
        if tensor.device_type not in supported:
            raise CudaSharedMemoryException(
                f"DLPack device type {tensor.device_type} is not supported"
            )
        position += tensor.nbytes
    if position > allocation.byte_size:
        raise CudaSharedMemoryException(
            f"unable to set values in cuda shared memory: {position - start} bytes at offset "
            f"{start} do not fit in region '{cuda_shm_handle._triton_shm_name}' of "
            f"{allocation.byte_size} bytes"
        )
    try:
        with _runtime.on_device(allocation.device_id):
            position = start
            for tensor in tensors:
                if tensor.device_type == DLDeviceType.kDLCUDA:
                    _runtime.ensure_unified_addressing(tensor.device_id)
                _runtime.memcpy(allocation.address + position, tensor.address, tensor.nbytes)
                position += tensor.nbytes
    except CudaSharedMemoryException as e:
        raise CudaSharedMemoryException(f"unable to set values in cuda shared memory: {e}") from e
    finally:
        del tensors  # release the producers' capsules now


def _shape_of(shape: object) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (_non_negative(shape, "shape"),)
    if not isinstance(shape, (list, tuple, np.ndarray)):
        raise CudaSharedMemoryException(f"shape must be a list of integers, not {shape!r}")
    return tuple(_non_negative(d, "each dimension of shape") for d in shape)


def get_contents_as_numpy(
    cuda_shm_handle: CudaSharedMemoryRegion,
    datatype: Any,
    shape: Sequence[int],
    offset: int = 0,
) -> np.ndarray[Any, Any]:
    """A host copy of a tensor stored in the region at ``offset`` (default 0).

    ``datatype`` is a numpy dtype or type (or a Triton name such as ``"FP32"``);
    ``np.object_`` / ``np.bytes_`` read BYTES elements into an object array of ``bytes``.
    Only the bytes needed are copied, straight into the returned (writable) array.
    """
    try:
        allocation = _live(cuda_shm_handle)
        dtype = read_dtype(datatype, CudaSharedMemoryException)
        dims = _shape_of(shape)
        start = _non_negative(offset, "offset")
    except CudaSharedMemoryException as e:  # tritonclient's text first, then what is wrong
        raise CudaSharedMemoryException(f"{_READ_FAILED}: {e}") from None
    size = allocation.byte_size
    name = cuda_shm_handle._triton_shm_name
    if start > size:
        raise CudaSharedMemoryException(
            f"offset {start} is past the end of cuda shared memory region '{name}' ({size} bytes)"
        )
    count = 1
    for d in dims:
        count *= d
    is_bytes = dtype == np.object_ or (dtype.kind == "S" and dtype.itemsize == 0)
    if not is_bytes and (dtype.itemsize == 0 or dtype.hasobject):
        raise CudaSharedMemoryException(f"cannot read elements of dtype {dtype} from memory")
    needed = size - start if is_bytes else count * dtype.itemsize
    if start + needed > size:
        raise CudaSharedMemoryException(
            "The size of the shared memory region is insufficient to provide numpy array "
            f"with requested size: region '{name}' has {size} bytes, {count} elements of "
            f"{dtype} at offset {start} need {needed}"
        )
    host = np.empty(needed if is_bytes else dims, dtype=np.uint8 if is_bytes else dtype)
    try:
        with _runtime.on_device(allocation.device_id):
            _runtime.memcpy(host.ctypes.data, allocation.address + start, needed)
    except CudaSharedMemoryException as e:
        raise CudaSharedMemoryException(f"{_READ_FAILED}: {e}") from e
    if not is_bytes:
        return host
    try:
        end = framed_extent(host.data, count)
        return to_object_array(unpack_items(host.data[:end], count), dims)
    except BytesFramingError as e:
        raise CudaSharedMemoryException(
            f"unable to read {count} BYTES elements at offset {start} of cuda shared memory "
            f"region '{name}': {e}"
        ) from None


def as_shared_memory_tensor(
    cuda_shm_handle: CudaSharedMemoryRegion,
    datatype: str,
    shape: Sequence[int],
    offset: int = 0,
) -> SharedMemoryTensor:
    """A zero-copy DLPack view (``datatype`` is a Triton name) of the region at ``offset``.

    The region's memory stays allocated while any consumer of the view is alive.
    """
    allocation = _live(cuda_shm_handle)
    dims = _shape_of(shape)
    start = _non_negative(offset, "offset")
    return SharedMemoryTensor(
        datatype,
        dims,
        allocation.address,
        start,
        allocation.byte_size,
        allocation.device_id,
        export_owner=lambda: _ExportToken(allocation),
    )


def allocated_shared_memory_regions() -> list[CudaSharedMemoryRegion]:
    """The handles created and not yet destroyed by this process."""
    with _lock:
        return list(allocated_shm_regions)


def destroy_shared_memory_region(cuda_shm_handle: CudaSharedMemoryRegion) -> None:
    """Free the region's device memory and forget the handle.

    Memory still used through :func:`as_shared_memory_tensor` views is freed when the
    last view is released. Destroying twice raises :class:`CudaSharedMemoryException`.
    Nothing is unregistered from the server.
    """
    with _lock:
        allocation = _live(cuda_shm_handle)
        cuda_shm_handle._allocation = None
        cuda_shm_handle._destroyed = True
        if cuda_shm_handle in allocated_shm_regions:
            allocated_shm_regions.remove(cuda_shm_handle)
    try:
        allocation.release()
    except CudaSharedMemoryException as e:
        raise CudaSharedMemoryException(
            f"unable to free cuda shared memory region '{cuda_shm_handle._triton_shm_name}': {e}"
        ) from e
