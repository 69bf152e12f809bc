"""Shared-memory regions registered by clients: one namespace for system and CUDA regions.

System regions are POSIX ``shm_open`` objects mapped once at registration. Inference
reads an input region in place (the model gets a numpy view of the mapping, no copy) and
writes an output straight into its region. Semantics follow Triton 2.51 (messages, check
order, in-use rules) except for its bugs: a region registered at a non-zero offset is
addressed relative to that offset and bounded by its own byte size (2.51 checked the
bounds against ``offset + byte_size`` and applied the offset twice), and several regions
may share one key (2.51 answered ``Invalid shared memory region``).

A mapping is never unmapped while a view of it is alive (numpy arrays a model kept, a
response still being sent): ``mmap.close`` refuses then, and the memory goes when the last
view does. A client that shrinks a registered object (``ftruncate``) would make accesses
past the new end fault; the size is checked before every read and write.
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._cuda_shm import IPC_HANDLE_SIZE, CudaDevice, CudaPythonDevice, CudaRegion, open_region
from ._errors import Code, CoreError

__all__ = ["Region", "RegionSlice", "SharedMemoryRegistry", "SystemRegion"]

_posixshmem: Any
try:  # CPython's own binding of shm_open (POSIX only)
    import _posixshmem  # type: ignore[import-not-found,no-redef]
except ImportError:  # pragma: no cover - Windows
    _posixshmem = None

_U64 = 1 << 64
#: mmap(2) refuses lengths above the user address space (x86-64: 2**47 - one page)
_MAX_MAP_LENGTH = (1 << 47) - mmap.PAGESIZE


@dataclass(eq=False)
class SystemRegion:
    """A registered system region: ``byte_size`` bytes at ``offset`` in the object ``key``."""

    name: str
    key: str
    offset: int
    byte_size: int
    view: memoryview
    _map: mmap.mmap
    users: int = 0
    #: the object's (st_dev, st_ino) when it was registered
    identity: tuple[int, int] = (0, 0)
    #: where the mapping starts in this process
    address: int = 0

    kind = "system"

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "offset": self.offset,
            "byte_size": self.byte_size,
        }

    def _check_backing(self) -> None:
        """Refuse to touch pages the client cut off its object (they would SIGBUS)."""
        try:
            size = self._map.size()  # fstat of the mapping's own descriptor
        except (OSError, ValueError):
            size = -1
        if size < self.offset + self.byte_size:
            raise CoreError(
                f"shared memory region '{self.name}' is no longer usable: its object "
                f"'{self.key}' was truncated to {max(size, 0)} bytes after registration",
                Code.INTERNAL,
            )

    def read(self, offset: int, byte_size: int) -> memoryview:
        """``[offset, offset+byte_size)`` of the region, in place (no copy)."""
        self._check_backing()
        return self.view[offset : offset + byte_size]

    def write(self, offset: int, data: bytes | memoryview) -> None:
        """Copy ``data`` to ``offset`` (skipped when it already is that very memory)."""
        source = memoryview(data)
        if source.ndim != 1 or source.format != "B":
            source = source.cast("B")
        n = source.nbytes
        if not n:
            return
        self._check_backing()
        target = self.view[offset : offset + n]
        if _address(target) == _address(source):
            return  # an output that is a view of its own destination (identity in place)
        target[:] = source

    def open_object(self) -> int | None:
        """A new descriptor of the object this region maps, opened by its key as at
        registration; None when the key names another object now (the client destroyed
        and re-created it) or one too small to hold the region."""
        try:
            fd = _open_key(self.key)
        except (OSError, ValueError):
            return None
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None
        if (st.st_dev, st.st_ino) != self.identity or st.st_size < self.offset + self.byte_size:
            os.close(fd)
            return None
        return fd

    def close(self) -> bool:
        """Unmap; False if views are still alive (the mapping goes with the last of them)."""
        with contextlib.suppress(BufferError):  # only slices are handed out: not expected
            self.view.release()
        try:
            self._map.close()
        except BufferError:
            return False
        return True


Region = SystemRegion | CudaRegion


@dataclass(slots=True)
class RegionSlice:
    """The part of a region an input or output names (bounds already checked)."""

    region: Region
    offset: int
    byte_size: int

    def read(self) -> memoryview:
        return self.region.read(self.offset, self.byte_size)

    def write(self, data: bytes | memoryview) -> None:
        self.region.write(self.offset, data)


def _address(view: memoryview) -> int:
    return int(np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0])


class SharedMemoryRegistry:
    """Every registered region, system and CUDA, by name (one namespace, as in Triton)."""

    def __init__(self, cuda: CudaDevice | None = None) -> None:
        self._regions: dict[str, Region] = {}
        self._cuda = cuda

    # ------------------------------------------------------------------ queries

    def status(self, name: str | None = None, kind: str = "system") -> list[dict[str, Any]]:
        """Status entries of one kind, sorted by name; or of one region (404s as Triton)."""
        if name is None:
            return [r.status() for k, r in sorted(self._regions.items()) if r.kind == kind]
        region = self._regions.get(name)
        if region is None:
            label = "system" if kind == "system" else "cuda"
            raise CoreError(
                f"Unable to find {label} shared memory region: '{name}'", Code.NOT_FOUND
            )
        if region.kind != kind:
            registered = "CUDA" if region.kind == "cuda" else "system"
            other = "system" if region.kind == "cuda" else "CUDA"
            raise CoreError(
                f"The region named '{name}' is registered as {registered} shared memory, "
                f"not {other} shared memory",
                Code.NOT_FOUND,
            )
        return [region.status()]

    def lookup(self, name: str, offset: int, byte_size: int) -> RegionSlice:
        """``[offset, offset+byte_size)`` of a region, bounds checked with Triton's texts."""
        region = self._regions.get(name)
        if region is None:
            raise CoreError(f"Unable to find shared memory region: '{name}'", Code.NOT_FOUND)
        if offset >= region.byte_size:
            raise CoreError(f"Invalid offset for shared memory region: '{name}'")
        # Triton bounds the last byte, offset + byte_size - 1, in unsigned arithmetic: an
        # empty extent passes anywhere inside the region but at its very start
        if offset + byte_size == 0 or offset + byte_size > region.byte_size:
            raise CoreError(f"Invalid offset + byte size for shared memory region: '{name}'")
        return RegionSlice(region, offset, byte_size)

    # ------------------------------------------------------------------ system regions

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Map ``[offset, offset+byte_size)`` of the POSIX object ``key`` as ``name``."""
        if name in self._regions:
            raise CoreError(
                f"shared memory region '{name}' already in manager", Code.ALREADY_EXISTS
            )
        if _posixshmem is None:  # pragma: no cover - Windows
            raise CoreError(
                "system shared memory is not supported on this platform", Code.UNSUPPORTED
            )
        try:
            fd = _open_key(key)
        except (OSError, ValueError):
            raise CoreError(
                f"Unable to open shared memory region: '{key}'", Code.INTERNAL
            ) from None
        try:
            mapping = _map(fd, name, offset, byte_size)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        view = memoryview(mapping)
        self._regions[name] = SystemRegion(
            name, key, offset, byte_size, view, mapping,
            identity=(st.st_dev, st.st_ino), address=_address(view),
        )  # fmt: skip

    # ------------------------------------------------------------------ CUDA regions

    def register_cuda(self, name: str, raw_handle: bytes, device_id: int, byte_size: int) -> None:
        """Open a CUDA IPC handle (64 bytes) on ``device_id`` as region ``name``."""
        if len(raw_handle) != IPC_HANDLE_SIZE:
            raise CoreError("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
        if name in self._regions:
            raise CoreError(
                f"shared memory region '{name}' already in manager", Code.ALREADY_EXISTS
            )
        if self._cuda is None:
            self._cuda = CudaPythonDevice()
        self._regions[name] = open_region(self._cuda, name, raw_handle, device_id, byte_size)

    # ------------------------------------------------------------------ unregister

    def unregister(self, name: str | None = None, kind: str = "system") -> None:
        """Drop one region of ``kind`` (absent or other kind: nothing), or all of them."""
        if name is not None:
            region = self._regions.get(name)
            if region is None or region.kind != kind:
                return
            if region.users:
                raise CoreError(
                    f"Cannot unregister shared memory region '{name}', it is currently in use.",
                    Code.INTERNAL,
                )
            self._drop(region)
            return
        failed = []
        for key in sorted(self._regions):
            region = self._regions[key]
            if region.kind != kind:
                continue
            if region.users:
                failed.append(key)
                continue
            try:
                self._drop(region)
            except CoreError:
                failed.append(key)
        if failed:
            label = "system" if kind == "system" else "cuda"
            raise CoreError(
                f"Failed to unregister the following {label} shared memory regions: "
                + "".join(f"{b} ," for b in failed),
                Code.INTERNAL,
            )

    def _drop(self, region: Region) -> None:
        if isinstance(region, CudaRegion):
            region.close()  # raises (and the region stays) when CUDA refuses
            del self._regions[region.name]
            return
        del self._regions[region.name]
        if not region.close():
            # A view may only be held by garbage awaiting collection: collect once, retry.
            gc.collect()
            with contextlib.suppress(BufferError):
                region._map.close()

    def close(self) -> None:
        """Unregister everything (server shutdown); never raises."""
        for region in list(self._regions.values()):
            with contextlib.suppress(CoreError):
                self._drop(region)
        self._regions.clear()


def _open_key(key: str) -> int:
    """A descriptor of the POSIX object ``key`` (raises OSError or ValueError).

    glibc's shm_open adds O_NOFOLLOW and refuses names with an inner '/', so a key never
    leaves /dev/shm nor follows a link; O_NONBLOCK keeps a FIFO there from blocking (its
    size, 0, fails the registration checks)."""
    return int(_posixshmem.shm_open(key, os.O_RDWR | os.O_NONBLOCK, mode=0o600))


def _map(fd: int, name: str, offset: int, byte_size: int) -> mmap.mmap:
    """mmap ``[offset, offset+byte_size)`` of ``fd`` with Triton's checks and messages."""
    size = os.fstat(fd).st_size
    # Triton adds the two as size_t: a sum past 2**64 wraps around (and then mmap refuses)
    if (offset + byte_size) % _U64 > size:
        raise CoreError(f"failed to register shared memory region '{name}': invalid args")
    if byte_size == 0 or offset % mmap.PAGESIZE:
        problem = os.strerror(22)  # EINVAL
    elif byte_size > _MAX_MAP_LENGTH:
        problem = os.strerror(12)  # ENOMEM
    elif offset + byte_size >= 1 << 63:
        problem = os.strerror(75)  # EOVERFLOW: past the largest file offset
    else:
        try:
            return mmap.mmap(fd, byte_size, offset=offset)
        except (OSError, ValueError, OverflowError) as e:
            problem = os.strerror(e.errno) if isinstance(e, OSError) and e.errno else str(e)
    raise CoreError(
        f"failed to register shared memory region '{name}': unable to process address space"
        + problem
    )
