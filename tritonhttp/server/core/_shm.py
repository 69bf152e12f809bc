"""System shared-memory regions registered by clients (POSIX ``shm_open`` objects)."""

from __future__ import annotations

import contextlib
import mmap
import os
from dataclasses import dataclass, field
from typing import Any

from ._errors import Code, CoreError

__all__ = ["Region", "SharedMemoryRegistry"]

_posixshmem: Any
try:  # CPython's own binding of shm_open (POSIX only)
    import _posixshmem  # type: ignore[import-not-found,no-redef]
except ImportError:  # pragma: no cover - Windows
    _posixshmem = None


@dataclass(eq=False)
class Region:
    """A registered region: ``byte_size`` bytes at ``offset`` in the object ``key``."""

    name: str
    key: str
    offset: int
    byte_size: int
    view: memoryview
    _map: mmap.mmap
    users: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "offset": self.offset,
            "byte_size": self.byte_size,
        }

    def close(self) -> None:
        self.view.release()
        with contextlib.suppress(BufferError):  # views still alive: the map goes with them
            self._map.close()


class SharedMemoryRegistry:
    """The system shared-memory namespace (CUDA regions would share it)."""

    def __init__(self) -> None:
        self.regions: dict[str, Region] = {}

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        if name in self.regions:
            raise CoreError(
                f"shared memory region '{name}' already in manager", Code.ALREADY_EXISTS
            )
        if _posixshmem is None:
            raise CoreError(
                "system shared memory is not supported on this platform", Code.UNSUPPORTED
            )
        try:
            fd = _posixshmem.shm_open(key, os.O_RDWR, mode=0o600)
        except (OSError, ValueError):
            raise CoreError(
                f"Unable to open shared memory region: '{key}'", Code.INTERNAL
            ) from None
        try:
            size = os.fstat(fd).st_size
            if offset + byte_size > size:
                raise CoreError(
                    f"failed to register shared memory region '{name}': invalid args",
                    Code.INVALID_ARG,
                )
            if byte_size == 0 or offset % mmap.ALLOCATIONGRANULARITY:
                raise CoreError(
                    f"failed to register shared memory region '{name}': unable to process "
                    "address spaceInvalid argument",
                    Code.INVALID_ARG,
                )
            try:
                mapping = mmap.mmap(fd, byte_size, offset=offset)
            except (OSError, ValueError) as e:
                raise CoreError(
                    f"failed to register shared memory region '{name}': unable to process "
                    "address "
                    f"space{os.strerror(e.errno) if isinstance(e, OSError) and e.errno else e}",
                    Code.INVALID_ARG,
                ) from None
        finally:
            os.close(fd)
        self.regions[name] = Region(name, key, offset, byte_size, memoryview(mapping), mapping)

    def status(self, name: str | None = None) -> list[dict[str, Any]]:
        if name is None:
            return [self.regions[k].status() for k in sorted(self.regions)]
        region = self.regions.get(name)
        if region is None:
            raise CoreError(f"Unable to find system shared memory region: '{name}'", Code.NOT_FOUND)
        return [region.status()]

    def unregister(self, name: str | None = None) -> None:
        if name is not None:
            region = self.regions.get(name)
            if region is None:
                return
            if region.users:
                raise CoreError(
                    f"Cannot unregister shared memory region '{name}', it is currently in use.",
                    Code.INTERNAL,
                )
            del self.regions[name]
            region.close()
            return
        busy = []
        for key in sorted(self.regions):
            region = self.regions[key]
            if region.users:
                busy.append(key)
                continue
            del self.regions[key]
            region.close()
        if busy:
            raise CoreError(
                "Failed to unregister the following system shared memory regions: "
                + "".join(f"{b} ," for b in busy),
                Code.INTERNAL,
            )

    def lookup(self, name: str, offset: int, byte_size: int) -> tuple[Region, memoryview]:
        """The bytes ``[offset, offset+byte_size)`` of a region, bounds checked."""
        region = self.regions.get(name)
        if region is None:
            raise CoreError(f"Unable to find shared memory region: '{name}'", Code.NOT_FOUND)
        if offset >= region.byte_size and not (offset == 0 and region.byte_size == 0):
            raise CoreError(f"Invalid offset for shared memory region: '{name}'")
        if byte_size == 0 or offset + byte_size > region.byte_size:
            raise CoreError(f"Invalid offset + byte size for shared memory region: '{name}'")
        return region, region.view[offset : offset + byte_size]

    def close(self) -> None:
        for region in self.regions.values():
            region.close()
        self.regions.clear()
