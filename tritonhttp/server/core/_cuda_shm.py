"""CUDA shared-memory regions: device memory another process shares by IPC handle.

A client allocates device memory, exports a ``cudaIpcMemHandle_t`` (64 bytes) and
registers it; the server opens the handle with ``cudaIpcOpenMemHandle`` on the given
device. Python-backend models work on host tensors, so an input region is copied to the
host before the model runs and an output is copied from the host into its region, as
Triton does for a CPU model.

The device is reached through :class:`CudaDevice`; :class:`CudaPythonDevice` is the real
one (NVIDIA's cuda-python bindings, loaded on first use). Without cuda-python or a GPU
every open fails, and the server answers a registration as a CPU-only Triton does.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..support._logging import VERBOSE
from ._errors import Code, CoreError

__all__ = [
    "CudaDevice",
    "CudaPythonDevice",
    "CudaRegion",
    "CudaUnavailable",
    "open_failed",
]

log = logging.getLogger("tritonhttp.server")

#: sizeof(cudaIpcMemHandle_t)
IPC_HANDLE_SIZE = 64


class CudaUnavailable(Exception):
    """The device could not do what was asked (no cuda-python, no GPU, a CUDA error)."""


class CudaDevice(Protocol):
    """What the registry needs from CUDA. Addresses are plain integers."""

    def open(self, raw_handle: bytes, device_id: int) -> tuple[int, int]:
        """Open an IPC handle on ``device_id``: (device address, size of the allocation)."""
        ...

    def close(self, address: int, device_id: int) -> None:
        """Close what :meth:`open` returned."""
        ...

    def to_host(self, address: int, device_id: int, nbytes: int) -> np.ndarray[Any, Any]:
        """``nbytes`` from device memory, as a new host ``uint8`` array."""
        ...

    def from_host(self, address: int, device_id: int, data: memoryview) -> None:
        """Copy host bytes to device memory."""
        ...


def open_failed(name: str | None = None) -> CoreError:
    """Triton's answer when a handle cannot be opened (or, with ``name``, is too small)."""
    if name is None:
        return CoreError("failed to register shared memory region: invalid args")
    return CoreError(f"failed to register shared memory region '{name}': invalid args")


@dataclass(eq=False)
class CudaRegion:
    """A registered CUDA region: ``byte_size`` bytes at ``address`` on ``device_id``."""

    name: str
    device_id: int
    byte_size: int
    address: int
    device: CudaDevice
    users: int = 0
    closed: bool = False

    kind = "cuda"

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "device_id": self.device_id, "byte_size": self.byte_size}

    def read(self, offset: int, byte_size: int) -> memoryview:
        """A host copy of ``[offset, offset+byte_size)`` (bounds checked by the registry)."""
        try:
            host = self.device.to_host(self.address + offset, self.device_id, byte_size)
        except CudaUnavailable as e:
            raise CoreError(
                f"failed to copy from cuda shared memory region '{self.name}': {e}",
                Code.INTERNAL,
            ) from None
        return host.data

    def write(self, offset: int, data: bytes | memoryview) -> None:
        view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
        if not view.nbytes:
            return
        try:
            self.device.from_host(self.address + offset, self.device_id, view)
        except CudaUnavailable as e:
            raise CoreError(
                f"failed to copy into cuda shared memory region '{self.name}': {e}",
                Code.INTERNAL,
            ) from None

    def close(self) -> None:
        """Close the IPC mapping (CoreError when CUDA refuses; the region stays then)."""
        if self.closed:
            return
        try:
            self.device.close(self.address, self.device_id)
        except CudaUnavailable as e:
            raise CoreError(f"failed to close CUDA IPC handle: {e}", Code.INTERNAL) from None
        self.closed = True
        log.log(VERBOSE, "closed the CUDA IPC handle of region '%s'", self.name)


# ----------------------------------------------------------------------------- cuda-python


class CudaPythonDevice:
    """:class:`CudaDevice` on NVIDIA's cuda-python bindings (``pip install tritonhttp[cuda]``).

    The bindings are imported when first needed; every failure (missing bindings, no
    driver or GPU, a CUDA error) is a :class:`CudaUnavailable` naming the cause.
    """

    def __init__(self) -> None:
        self._runtime: Any = None
        self._problem: str | None = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._runtime is not None:
            return self._runtime
        with self._lock:
            if self._runtime is None and self._problem is None:
                try:
                    from ...utils.cuda_shared_memory import _runtime

                    count = _runtime.call("cudaGetDeviceCount", _runtime.cudart.cudaGetDeviceCount)
                    if not count:
                        self._problem = "no CUDA device is visible"
                    else:
                        self._runtime = _runtime
                except RuntimeError as e:  # cuda-python missing: the utils name the extra
                    self._problem = str(e)
                except Exception as e:  # CudaSharedMemoryException: no driver, no GPU
                    self._problem = str(e)
        if self._runtime is None:
            raise CudaUnavailable(self._problem or "CUDA is unavailable")
        return self._runtime

    def _call(self, what: str, function: Any, *args: Any) -> Any:
        rt = self._load()
        try:
            return rt.call(what, function, *args)
        except Exception as e:
            raise CudaUnavailable(str(e)) from None

    @contextlib.contextmanager
    def _on(self, device_id: int) -> Any:
        rt = self._load()
        try:
            with rt.on_device(device_id):
                yield rt
        except CudaUnavailable:
            raise
        except Exception as e:
            raise CudaUnavailable(str(e)) from None

    def open(self, raw_handle: bytes, device_id: int) -> tuple[int, int]:
        import ctypes

        rt = self._load()
        cudart = rt.cudart
        handle = cudart.cudaIpcMemHandle_t()
        ctypes.memmove(int(handle.getPtr()), raw_handle, IPC_HANDLE_SIZE)
        with self._on(device_id):
            address = int(
                self._call(
                    "cudaIpcOpenMemHandle",
                    cudart.cudaIpcOpenMemHandle,
                    handle,
                    cudart.cudaIpcMemLazyEnablePeerAccess,
                )
            )
            try:
                _base, size = self._call(
                    "cuMemGetAddressRange", rt.cudadrv.cuMemGetAddressRange, address
                )
            except CudaUnavailable:
                with contextlib.suppress(CudaUnavailable):
                    self._call("cudaIpcCloseMemHandle", cudart.cudaIpcCloseMemHandle, address)
                raise
        return address, int(size)

    def close(self, address: int, device_id: int) -> None:
        rt = self._load()
        with self._on(device_id):
            self._call("cudaIpcCloseMemHandle", rt.cudart.cudaIpcCloseMemHandle, address)

    def to_host(self, address: int, device_id: int, nbytes: int) -> np.ndarray[Any, Any]:
        rt = self._load()
        host = np.empty(nbytes, dtype=np.uint8)
        if nbytes:
            with self._on(device_id):
                self._call(
                    "cudaMemcpy",
                    rt.cudart.cudaMemcpy,
                    host.ctypes.data,
                    address,
                    nbytes,
                    rt.cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost,
                )
        return host

    def from_host(self, address: int, device_id: int, data: memoryview) -> None:
        rt = self._load()
        source = np.frombuffer(data, dtype=np.uint8)
        with self._on(device_id):
            self._call(
                "cudaMemcpy",
                rt.cudart.cudaMemcpy,
                address,
                source.ctypes.data,
                source.nbytes,
                rt.cudart.cudaMemcpyKind.cudaMemcpyHostToDevice,
            )


def open_region(
    device: CudaDevice, name: str, raw_handle: bytes, device_id: int, byte_size: int
) -> CudaRegion:
    """Open and size-check a handle; CoreError with Triton's text if either fails."""
    try:
        address, allocation = device.open(raw_handle, device_id)
    except CudaUnavailable as e:
        log.error("failed to open CUDA IPC handle for region '%s': %s", name, e)
        raise open_failed() from None
    region = CudaRegion(name, device_id, byte_size, address, device)
    if byte_size > allocation:
        log.error(
            "cuda shared memory region '%s': byte_size %d is larger than the %d-byte allocation",
            name,
            byte_size,
            allocation,
        )
        with contextlib.suppress(CoreError):
            region.close()
        raise open_failed(name)
    log.log(
        VERBOSE,
        "opened the CUDA IPC handle of region '%s' on device %d (%d of %d bytes)",
        name,
        device_id,
        byte_size,
        allocation,
    )
    return region
