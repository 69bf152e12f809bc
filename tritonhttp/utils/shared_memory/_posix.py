"""POSIX shared-memory objects: key checks and the few system calls we need.

Segments are opened with ``shm_open`` and mapped with :mod:`mmap` directly rather than
through :class:`multiprocessing.shared_memory.SharedMemory`, so Python's
``resource_tracker`` never registers them: it can neither unlink a segment this process
merely attached to nor warn about it at exit.
"""

from __future__ import annotations

import contextlib
import importlib
import mmap
import os
import stat
import sys
from typing import Any

from ._errors import SharedMemoryException

__all__ = [
    "MAX_NAME_BYTES",
    "ObjectIdentity",
    "create_object",
    "map_object",
    "normalized_path",
    "object_identity",
    "open_existing",
    "unlink_if_same",
]

#: Longest name a POSIX shared-memory object may have (NAME_MAX of /dev/shm).
MAX_NAME_BYTES = 255

#: (st_dev, st_ino) of a shared-memory object: tells a segment from a later one that
#: reuses its name.
ObjectIdentity = tuple[int, int]

_posixshmem: Any
try:
    _posixshmem = importlib.import_module("_posixshmem")
except ImportError:  # pragma: no cover - Windows and exotic builds
    _posixshmem = None


def _require_posix() -> Any:
    if _posixshmem is None:  # pragma: no cover - Windows and exotic builds
        raise SharedMemoryException(
            f"system shared memory needs POSIX shm_open, which this platform ({sys.platform}) lacks"
        )
    return _posixshmem


def normalized_path(shm_key: object) -> str:
    """The ``shm_open`` name for a key: ``"/name"``; anything else is refused.

    A key is an optional leading ``/`` followed by a name without ``/`` or NUL, not
    ``.`` or ``..``, of at most 255 bytes -- so a key can never reach a file outside
    the shared-memory namespace (``/dev/shm`` on Linux).
    """
    if not isinstance(shm_key, str):
        raise SharedMemoryException(
            f"shm_key must be a str such as '/my_region', not {type(shm_key).__name__}"
        )
    name = shm_key[1:] if shm_key.startswith("/") else shm_key
    problem = None
    if not name:
        problem = "the name after the leading '/' is empty"
    elif "/" in name:
        problem = "only one leading '/' is allowed, the name itself may not contain '/'"
    elif "\x00" in name:
        problem = "the name contains a NUL character"
    elif name in (".", ".."):
        problem = "'.' and '..' are not names"
    elif len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        problem = f"the name is longer than {MAX_NAME_BYTES} bytes"
    if problem:
        raise SharedMemoryException(f"invalid shared memory key {shm_key!r}: {problem}")
    return "/" + name


def _check_regular(fd: int, path: str) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise SharedMemoryException(f"shared memory key '{path}' does not name a memory object")
    return st


def open_existing(path: str) -> tuple[int, int, ObjectIdentity]:
    """Open an existing object read-write: ``(fd, size, identity)``.

    Raises ``FileNotFoundError`` when no object has that name.
    """
    fd: int = _require_posix().shm_open(path, os.O_RDWR, mode=0o600)
    try:
        st = _check_regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size, (st.st_dev, st.st_ino)


def create_object(path: str, byte_size: int) -> tuple[int, ObjectIdentity]:
    """Create a new object of ``byte_size`` bytes (fails if the name exists)."""
    posix = _require_posix()
    fd: int = posix.shm_open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    try:
        os.ftruncate(fd, byte_size)
        st = os.fstat(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            posix.shm_unlink(path)
        os.close(fd)
        raise
    return fd, (st.st_dev, st.st_ino)


def map_object(fd: int, size: int) -> mmap.mmap:
    """Map ``size`` bytes of ``fd`` shared and read-write, then close ``fd``."""
    try:
        if sys.version_info >= (3, 13):
            return mmap.mmap(fd, size, trackfd=False)
        return mmap.mmap(fd, size)  # keeps a private duplicate of fd until closed
    finally:
        os.close(fd)


def object_identity(path: str) -> ObjectIdentity | None:
    """Identity of the object named ``path`` now, or None when there is none."""
    try:
        fd, _, identity = open_existing(path)
    except (OSError, SharedMemoryException):
        return None
    os.close(fd)
    return identity


def unlink_if_same(path: str, identity: ObjectIdentity | None) -> None:
    """Unlink ``path`` if it still names the object we created (``identity``).

    A name that is gone already, or that now names someone else's object, is left alone.
    """
    if identity is not None and object_identity(path) != identity:
        return
    with contextlib.suppress(FileNotFoundError):
        _require_posix().shm_unlink(path)
