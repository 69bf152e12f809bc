"""System (POSIX) shared-memory regions: tritonclient's API, made safe.

Same functions, arguments, keys and results as ``tritonclient.utils.shared_memory``
2.73.0. They differ only where tritonclient crashes, leaks or misleads:

* every handle operation checks that the handle is still alive, so using a destroyed
  handle (including a second destroy) raises :class:`SharedMemoryException`;
* arrays returned by :func:`get_contents_as_numpy` hold the mapping open, so reading
  them after the region was destroyed reads the (unlinked) memory instead of
  segfaulting; the memory goes back to the system when the last such array is gone;
* offsets and sizes are checked before anything is written (no partial writes);
* keys must name a shared-memory object (``/name``), never another file;
* Python's resource tracker is not involved, so attaching never unlinks or warns.
"""

from __future__ import annotations

import contextlib
import mmap
import operator
import os
import struct
import warnings
from collections.abc import Sequence
from typing import Any, SupportsIndex

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
from . import _posix, _registry
from ._errors import SharedMemoryException

__all__ = [
    "SharedMemoryRegion",
    "create_shared_memory_region",
    "destroy_shared_memory_region",
    "get_contents_as_numpy",
    "mapped_shared_memory_regions",
    "set_shared_memory_region",
]


class SharedMemoryRegion:
    """Handle to one mapping of a system shared-memory object.

    Built by :func:`create_shared_memory_region`; pass it to the other functions of this
    module. ``triton_shm_name`` is the name to register with the server, ``shm_key`` the
    key of the object (pass both, plus :attr:`byte_size`, to
    ``register_system_shared_memory``).
    """

    def __init__(self, triton_shm_name: str, shm_key: str) -> None:
        self._triton_shm_name = triton_shm_name
        self._shm_key = shm_key
        self._path: str | None = None
        self._mmap: mmap.mmap | None = None
        self._byte_size = 0
        self._destroyed = False

    @property
    def triton_shm_name(self) -> str:
        """Name under which the region is (to be) registered with the server."""
        return self._triton_shm_name

    @property
    def shm_key(self) -> str:
        """Key of the shared-memory object, as given to :func:`create_shared_memory_region`."""
        return self._shm_key

    @property
    def byte_size(self) -> int:
        """Size of the mapping in bytes (the object's size, which may exceed the request)."""
        return self._byte_size

    @property
    def destroyed(self) -> bool:
        """True once :func:`destroy_shared_memory_region` was called on this handle."""
        return self._destroyed

    def __repr__(self) -> str:
        state = "destroyed" if self._destroyed else f"{self._byte_size} bytes"
        return (
            f"<SharedMemoryRegion name={self._triton_shm_name!r} key={self._shm_key!r} ({state})>"
        )


class _ReadTypeError(SharedMemoryException, TypeError):
    """A read refused where tritonclient's numpy or slicing raised ``TypeError``: also
    a ``TypeError``, so ``except TypeError`` clauses written for tritonclient still
    catch it."""


class _ReadStructError(SharedMemoryException, struct.error):
    """A truncated BYTES read: also the ``struct.error`` tritonclient raised."""


def _live_mapping(shm_handle: object) -> mmap.mmap:
    if not isinstance(shm_handle, SharedMemoryRegion):
        raise SharedMemoryException(
            "shm_handle must be a SharedMemoryRegion returned by create_shared_memory_region, "
            f"not {type(shm_handle).__name__}"
        )
    mapping = shm_handle._mmap
    if mapping is None or mapping.closed:
        if shm_handle._destroyed:
            raise SharedMemoryException(
                f"shared memory region '{shm_handle._triton_shm_name}' "
                f"(key '{shm_handle._shm_key}') has been destroyed"
            )
        raise SharedMemoryException(
            f"shared memory region '{shm_handle._triton_shm_name}' is not mapped; "
            "create handles with create_shared_memory_region"
        )
    return mapping


def _as_offset(
    value: object, what: str = "offset", error: type[SharedMemoryException] = SharedMemoryException
) -> int:
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise error(f"{what} must be an integer, not {type(value).__name__}") from None
    if number < 0:
        raise SharedMemoryException(f"{what} must not be negative, got {number}")
    return number


_CREATE_FAILED = "unable to create the shared memory region"
_SET_FAILED = "unable to set the shared memory region"


def _requested_size(byte_size: object) -> int | float:
    """``byte_size`` as a number. Attaching only compares it with the object's size (any
    int or float, as tritonclient); :func:`_check_size_to_create` checks it for a create."""
    if isinstance(byte_size, float):
        return byte_size
    try:
        return operator.index(byte_size)  # type: ignore[arg-type]
    except TypeError:
        raise SharedMemoryException(
            f"{_CREATE_FAILED}: byte_size must be an integer, not {type(byte_size).__name__}"
        ) from None


def _check_size_to_create(byte_size: object, size: int | float) -> None:
    if isinstance(size, float):
        raise SharedMemoryException(
            f"{_CREATE_FAILED}: byte_size must be an integer, not {type(byte_size).__name__}"
        )
    if size < 0:
        raise SharedMemoryException(f"{_CREATE_FAILED}: byte_size must not be negative, got {size}")
    if size == 0:
        raise SharedMemoryException(f"{_CREATE_FAILED}: byte_size must be positive")


def create_shared_memory_region(
    triton_shm_name: str, shm_key: str, byte_size: int, create_only: bool = False
) -> SharedMemoryRegion:
    """Map the system shared-memory object ``shm_key``, creating it if needed.

    Unless ``create_only`` is true, an existing object with that key is attached to
    (and a ``UserWarning`` is issued when it is smaller than ``byte_size``); otherwise a
    new object of ``byte_size`` bytes is created. Every call returns a new handle; the
    object is unlinked when the last handle of the process that created it is destroyed.

    Raises :class:`SharedMemoryException` when the key is invalid or the object cannot be
    created (``create_only`` and it exists, ``byte_size`` 0, no space, ...).
    """
    path = _posix.normalized_path(shm_key)
    size_wanted = _requested_size(byte_size)
    handle = SharedMemoryRegion(triton_shm_name, shm_key)
    with _registry.lock:
        fd = -1
        created = False
        identity: _posix.ObjectIdentity | None = None
        actual = 0
        for _attempt in range(3):  # attach and create can race with other processes
            if not create_only:
                try:
                    fd, actual, identity = _posix.open_existing(path)
                    break
                except FileNotFoundError:
                    pass
                except OSError as e:
                    raise SharedMemoryException(
                        f"unable to open the shared memory region with key '{shm_key}': "
                        f"{e.strerror}"
                    ) from e
            _check_size_to_create(byte_size, size_wanted)
            try:
                fd, identity = _posix.create_object(path, int(size_wanted))
            except FileExistsError as e:
                if create_only:
                    raise SharedMemoryException(
                        "unable to create the shared memory region: key "
                        f"'{shm_key}' already exists (create_only=True)"
                    ) from e
                continue  # someone created it since we looked: attach to theirs
            except OSError as e:
                raise SharedMemoryException(
                    f"unable to create the shared memory region with key '{shm_key}': {e.strerror}"
                ) from e
            created, actual = True, int(size_wanted)
            break
        else:
            raise SharedMemoryException(
                f"unable to create the shared memory region with key '{shm_key}': it keeps "
                "appearing and disappearing"
            )
        if actual == 0:
            os.close(fd)
            raise SharedMemoryException(
                f"unable to attach to the shared memory region with key '{shm_key}': the "
                "object is empty (size 0)"
            )
        try:
            mapping = _posix.map_object(fd, actual)
        except OSError as e:
            if created:
                _posix.unlink_if_same(path, identity)
            failed = _CREATE_FAILED if created else "unable to map the shared memory region"
            raise SharedMemoryException(f"{failed} with key '{shm_key}': {e}") from e
        state = _registry.registry.get(path)
        if state is None:
            state = _registry.registry[path] = _registry.KeyState(key=shm_key)
        if created:
            state.creator_pid, state.identity = os.getpid(), identity
        state.handles += 1
        handle._path, handle._mmap, handle._byte_size = path, mapping, actual
    if size_wanted > actual:
        warnings.warn(
            f"reusing shared memory region with key '{shm_key}', region size is {actual} "
            f"instead of requested {size_wanted}",
            UserWarning,
            stacklevel=2,
        )
    return handle


def _payload_of_object_array(value: np.ndarray[Any, Any]) -> bytes | bytearray | memoryview:
    """Bytes to write for an object array: serialized BYTES, or serialize it now."""
    if value.size == 0:
        return b""
    if value.size == 1:
        item = value.reshape(-1)[0]
        if isinstance(item, (bytes, bytearray, memoryview)):
            return item  # the output of serialize_byte_tensor: already framed
    return pack_items(element_list(value))


def set_shared_memory_region(
    shm_handle: SharedMemoryRegion,
    input_values: Sequence[np.ndarray[Any, Any]],
    offset: int = 0,
) -> None:
    """Copy ``input_values`` (numpy arrays) back to back into the region from ``offset``.

    Object arrays are BYTES: the output of ``serialize_byte_tensor`` (a single ``bytes``
    item) is copied as is, any other object array is serialized first. Everything is
    checked before the first byte is written: nothing is written if the values do not
    fit. Raises :class:`SharedMemoryException`.
    """
    if not isinstance(input_values, (list, tuple)):
        raise SharedMemoryException(
            "input_values must be specified as a list/tuple of numpy arrays"
        )
    for input_value in input_values:
        if not isinstance(input_value, np.ndarray):
            raise SharedMemoryException("each element of input_values must be a numpy array")
    try:
        mapping = _live_mapping(shm_handle)
        start = _as_offset(offset)
    except SharedMemoryException as e:  # tritonclient's text first, then what is wrong
        raise SharedMemoryException(f"{_SET_FAILED}: {e}") from None
    plan: list[tuple[int, np.ndarray[Any, Any] | bytes | bytearray | memoryview]] = []
    position = start
    for value in input_values:
        if value.dtype.hasobject:
            if value.dtype != np.object_:
                raise SharedMemoryException(
                    f"unable to set the shared memory region: dtype {value.dtype} holds "
                    "Python objects"
                )
            try:
                framed = _payload_of_object_array(value)
            except ValueError as e:
                raise SharedMemoryException(f"unable to set the shared memory region: {e}") from e
            nbytes = memoryview(framed).nbytes
            plan.append((position, framed))
        else:
            nbytes = value.nbytes
            plan.append((position, value))
        position += nbytes
    if position > len(mapping):
        raise SharedMemoryException(
            f"unable to set the shared memory region: {position - start} bytes at offset "
            f"{start} do not fit in region '{shm_handle._triton_shm_name}' of "
            f"{len(mapping)} bytes"
        )
    try:
        for at, payload in plan:
            if isinstance(payload, np.ndarray):
                if payload.size == 0:
                    continue
                target = np.frombuffer(mapping, payload.dtype, payload.size, at)
                np.copyto(target.reshape(payload.shape), payload, casting="no")
            else:
                with memoryview(payload) as source:
                    mapping[at : at + source.nbytes] = source.cast("B")
    except (ValueError, TypeError) as e:  # the mapping was closed under us by a destroy
        raise SharedMemoryException(
            f"unable to set the shared memory region '{shm_handle._triton_shm_name}': {e}"
        ) from e


def _resolve_shape(shape: object) -> tuple[int, ...]:
    dims: Sequence[object]
    if isinstance(shape, (int, np.integer)):
        dims = (shape,)
    elif isinstance(shape, (list, tuple, np.ndarray)):
        dims = list(shape)
    else:
        raise _ReadTypeError(f"shape must be a list of integers, not {shape!r}")
    return tuple(_as_offset(d, "each dimension of shape", _ReadTypeError) for d in dims)


def get_contents_as_numpy(
    shm_handle: SharedMemoryRegion,
    datatype: Any,
    shape: Sequence[SupportsIndex],
    offset: int = 0,
) -> np.ndarray[Any, Any]:
    """A numpy array of ``datatype`` and ``shape`` read from the region at ``offset``.

    ``datatype`` is a numpy dtype or type (a Triton name such as ``"FP32"`` works too).
    Numeric types give a writable zero-copy **view** of the region; it stays valid (and
    keeps the memory mapped) even after the region is destroyed. ``np.object_`` /
    ``np.bytes_`` read BYTES elements (4-byte length + data) into an object array of
    ``bytes``. Raises :class:`SharedMemoryException` when the array would extend past
    the region or the handle was destroyed.
    """
    mapping = _live_mapping(shm_handle)
    dtype = read_dtype(datatype, _ReadTypeError)
    dims = _resolve_shape(shape)
    start = _as_offset(offset, error=_ReadTypeError)
    count = 1
    for d in dims:
        count *= d
    size = len(mapping)
    name = shm_handle._triton_shm_name
    if start > size:
        raise _ReadTypeError(
            f"offset {start} is past the end of shared memory region '{name}' ({size} bytes)"
        )
    bytes_type = dtype == np.object_ or (dtype.kind == "S" and dtype.itemsize == 0)
    try:
        if bytes_type:
            try:
                end = framed_extent(mapping, count, start)
                with memoryview(mapping) as whole, whole[start:end] as framed:
                    items = unpack_items(framed, count)
            except BytesFramingError as e:
                raise _ReadStructError(
                    f"unable to read {count} BYTES elements at offset {start} of shared "
                    f"memory region '{name}' ({size} bytes): {e}"
                ) from None
            return to_object_array(items, dims)
        if dtype.itemsize == 0 or dtype.hasobject:
            raise SharedMemoryException(f"cannot read elements of dtype {dtype} from memory")
        needed = count * dtype.itemsize
        if start + needed > size:
            raise _ReadTypeError(
                f"shared memory region '{name}' ({size} bytes) is too small for "
                f"{count} elements of {dtype} ({needed} bytes) at offset {start}"
            )
        return np.frombuffer(mapping, dtype, count, start).reshape(dims)
    except SharedMemoryException:
        raise
    except (ValueError, TypeError) as e:  # the mapping was closed under us by a destroy
        raise SharedMemoryException(f"unable to read shared memory region '{name}': {e}") from e


def mapped_shared_memory_regions() -> list[str]:
    """Keys of the shared-memory objects this process has live handles to."""
    with _registry.lock:
        return [state.key for state in _registry.registry.values()]


def destroy_shared_memory_region(shm_handle: SharedMemoryRegion) -> None:
    """Release the handle; unlink the object when its creator's last handle goes.

    Arrays obtained from :func:`get_contents_as_numpy` keep working (the memory stays
    mapped until the last of them is gone); the handle itself is dead afterwards and
    destroying it again raises :class:`SharedMemoryException` (tritonclient: KeyError).
    Nothing is unregistered from the server.
    """
    mapping = _live_mapping(shm_handle)
    path = shm_handle._path
    assert path is not None
    should_unlink = False
    identity: _posix.ObjectIdentity | None = None
    with _registry.lock:
        if shm_handle._mmap is not mapping:  # destroyed by another thread meanwhile
            _live_mapping(shm_handle)
        shm_handle._destroyed = True
        shm_handle._mmap = None
        state = _registry.registry.get(path)
        if state is not None:
            state.handles -= 1
            if state.handles <= 0:
                del _registry.registry[path]
                should_unlink, identity = state.owned, state.identity
        # Arrays that still view the mapping keep it open (BufferError): it is unmapped
        # when the last of them is collected.
        with contextlib.suppress(BufferError):
            mapping.close()
        if should_unlink:
            try:
                _posix.unlink_if_same(path, identity)
            except OSError as e:
                raise SharedMemoryException(
                    f"unable to unlink the shared memory region with key "
                    f"'{shm_handle._shm_key}': {e.strerror}"
                ) from e
