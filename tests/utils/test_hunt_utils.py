"""Side by side with tritonclient.utils.shared_memory 2.73.0: what each call accepts and
the exceptions it raises (type and text), for the cases where tritonclient neither
crashes nor corrupts memory."""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.utils as tcu
import tritonclient.utils.shared_memory as ref

from tritonhttp.utils import shared_memory as shm

_PREFIX = f"thhunt-{os.getpid()}-"
_counter = itertools.count()


def _key() -> str:
    return f"/{_PREFIX}{next(_counter)}"


@pytest.fixture(autouse=True)
def _remove_segments() -> Iterator[None]:
    """tritonclient leaves a segment behind when a create fails at ``ftruncate``."""
    yield
    for p in Path("/dev/shm").iterdir():
        if p.name.startswith(_PREFIX):
            p.unlink()


@contextlib.contextmanager
def _regions(byte_size: int) -> Iterator[tuple[Any, shm.SharedMemoryRegion]]:
    """A tritonclient region and one of ours, same size, different keys."""
    theirs = ref.create_shared_memory_region("r", _key(), byte_size)
    ours = shm.create_shared_memory_region("r", _key(), byte_size)
    try:
        yield theirs, ours
    finally:
        ref.destroy_shared_memory_region(theirs)
        if not ours.destroyed:
            shm.destroy_shared_memory_region(ours)


def _raised(call: Callable[[], object]) -> BaseException:
    try:
        call()
    except Exception as e:
        return e
    raise AssertionError("no exception")


@pytest.mark.parametrize("byte_size", [-5, 8.0, 32.5])
def test_attaching_accepts_every_size_tritonclient_accepts(byte_size: Any) -> None:
    """Attaching only compares ``byte_size`` with the object's size, in both."""
    results = []
    for module in (ref, shm):
        key = _key()
        first = module.create_shared_memory_region("a", key, 16)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            second = module.create_shared_memory_region("b", key, byte_size)
        results.append([str(w.message).replace(key, "KEY") for w in caught])
        module.destroy_shared_memory_region(second)
        module.destroy_shared_memory_region(first)
    assert results[0] == results[1]
    if byte_size > 16:
        assert results[1] == [
            f"reusing shared memory region with key 'KEY', region size is 16 instead of "
            f"requested {byte_size}"
        ]


@pytest.mark.parametrize("byte_size", [-1, 1.5, "8", None])
def test_create_errors_begin_with_tritonclients_text(byte_size: Any) -> None:
    theirs = _raised(lambda: ref.create_shared_memory_region("r", _key(), byte_size))
    key = _key()
    ours = _raised(lambda: shm.create_shared_memory_region("r", key, byte_size))
    assert not Path("/dev/shm" + key).exists()
    assert type(theirs).__name__ == type(ours).__name__ == "SharedMemoryException"
    assert str(theirs) == "unable to create the shared memory region"
    assert str(ours).startswith("unable to create the shared memory region: byte_size ")


@pytest.mark.parametrize(
    ("offset", "detail"),
    [
        (-4, "offset must not be negative, got -4"),
        (4.0, "offset must be an integer, not float"),
        (None, "offset must be an integer, not NoneType"),
    ],
)
def test_set_offset_errors_begin_with_tritonclients_text(offset: Any, detail: str) -> None:
    value = [np.arange(4, dtype=np.int32)]
    with _regions(16) as (theirs, ours):
        expected = _raised(lambda: ref.set_shared_memory_region(theirs, value, offset))
        got = _raised(lambda: shm.set_shared_memory_region(ours, value, offset))
    assert isinstance(expected, ref.SharedMemoryException)
    assert isinstance(got, shm.SharedMemoryException)
    assert str(got) == f"{expected}: {detail}"


def test_set_with_a_bad_or_destroyed_handle_begins_with_tritonclients_text() -> None:
    value = [np.zeros(2, dtype=np.int8)]
    theirs = _raised(lambda: ref.set_shared_memory_region(None, value))
    assert str(theirs) == "unable to set the shared memory region"
    ours = _raised(lambda: shm.set_shared_memory_region(None, value))  # type: ignore[arg-type]
    assert isinstance(ours, shm.SharedMemoryException)
    assert str(ours).startswith(f"{theirs}: shm_handle must be a SharedMemoryRegion")
    handle = shm.create_shared_memory_region("gone", _key(), 8)
    shm.destroy_shared_memory_region(handle)
    ours = _raised(lambda: shm.set_shared_memory_region(handle, value))
    assert isinstance(ours, shm.SharedMemoryException)
    assert str(ours).startswith(f"{theirs}: shared memory region 'gone'")
    assert str(ours).endswith("has been destroyed")


@pytest.mark.parametrize(
    ("datatype", "shape", "offset", "detail"),
    [
        (np.int32, [5], 0, "is too small for 5 elements of int32 (20 bytes) at offset 0"),
        (np.int32, [1], 20, "offset 20 is past the end"),
        (np.int32, [1], 4.0, "offset must be an integer, not float"),
        (np.int32, [2.0], 0, "each dimension of shape must be an integer, not float"),
        pytest.param(
            np.int32,
            None,
            0,
            "shape must be a list of integers, not None",
            # (before numpy 2, numpy took a None shape for () with a DeprecationWarning)
            marks=pytest.mark.skipif(
                np.lib.NumpyVersion(np.__version__) < "2.0.0",
                reason="tritonclient's error for a None shape comes from numpy 2",
            ),
        ),
        ("no such type", [1], 0, "datatype must be a numpy dtype"),
    ],
)
def test_reads_refused_where_tritonclient_raised_type_error_are_type_errors(
    datatype: Any, shape: Any, offset: Any, detail: str
) -> None:
    with _regions(16) as (theirs, ours):
        expected = _raised(lambda: ref.get_contents_as_numpy(theirs, datatype, shape, offset))
        got = _raised(lambda: shm.get_contents_as_numpy(ours, datatype, shape, offset))
    assert type(expected) is TypeError
    assert isinstance(got, TypeError)  # `except TypeError` written for tritonclient works
    assert isinstance(got, shm.SharedMemoryException)
    assert detail in str(got)


def test_truncated_bytes_read_is_a_struct_error_like_tritonclients() -> None:
    framed = tcu.serialize_byte_tensor(np.array([b"\xff" * 8], dtype=object))
    broken = np.array(b"\xff\0\0\0" + framed.item()[4:], dtype=object)  # claims 255 bytes
    with _regions(16) as (theirs, ours):
        ref.set_shared_memory_region(theirs, [broken])
        shm.set_shared_memory_region(ours, [broken])
        expected = _raised(lambda: ref.get_contents_as_numpy(theirs, np.object_, [1]))
        got = _raised(lambda: shm.get_contents_as_numpy(ours, np.object_, [1]))
    assert type(expected) is struct.error
    assert isinstance(got, struct.error)
    assert isinstance(got, shm.SharedMemoryException)
    assert "BYTES element 0 at offset 4 claims 255 bytes but only 12 remain" in str(got)


def test_kept_difference_a_0d_numeric_array_is_written() -> None:
    """Documented in docs/migration.md: tritonclient fails on ``value[:]`` of a 0-d array."""
    value = np.array(7, dtype=np.int32)
    with _regions(8) as (theirs, ours):
        with pytest.raises(ref.SharedMemoryException, match="unable to set"):
            ref.set_shared_memory_region(theirs, [value])
        shm.set_shared_memory_region(ours, [value], offset=4)
        assert shm.get_contents_as_numpy(ours, np.int32, [2]).tolist() == [0, 7]


def _cuda_modules() -> tuple[Any, Any]:
    """tritonclient's and our CUDA modules (both import without a GPU, with cuda-python)."""
    theirs = pytest.importorskip("tritonclient.utils.cuda_shared_memory")
    try:
        from tritonhttp.utils import cuda_shared_memory as ours
    except RuntimeError:  # no cuda-python: the import names the extra
        pytest.skip("needs cuda-python")
    return theirs, ours


_CUDA_CALLS: dict[str, Callable[[Any], object]] = {
    "create byte_size -1": lambda m: m.create_shared_memory_region("c", -1, 0),
    "create byte_size str": lambda m: m.create_shared_memory_region("c", "64", 0),
    "create device_id -1": lambda m: m.create_shared_memory_region("c", 64, -1),
    "set not a handle": lambda m: m.set_shared_memory_region(None, [np.zeros(1)]),
    "get not a handle": lambda m: m.get_contents_as_numpy(None, np.float32, [1]),
}


@pytest.mark.parametrize("call", list(_CUDA_CALLS))
def test_cuda_argument_errors_begin_with_tritonclients_text(call: str) -> None:
    """Checked before CUDA is touched, so the same with and without a GPU."""
    theirs, ours = _cuda_modules()
    expected = _raised(lambda: _CUDA_CALLS[call](theirs))
    got = _raised(lambda: _CUDA_CALLS[call](ours))
    assert isinstance(expected, theirs.CudaSharedMemoryException)
    assert isinstance(got, ours.CudaSharedMemoryException)
    assert str(got).startswith(f"{expected}: ")


def test_cuda_set_checks_the_values_before_the_handle_as_tritonclient() -> None:
    theirs, ours = _cuda_modules()
    for values in (np.zeros(1), [1]):
        expected = _raised(lambda: theirs.set_shared_memory_region(None, values))  # noqa: B023
        got = _raised(lambda: ours.set_shared_memory_region(None, values))  # noqa: B023
        assert "input_values" in str(expected)
        assert isinstance(got, ours.CudaSharedMemoryException)
        # tritonclient's two texts are swapped (documented); ours say what is wrong
        assert str(got) == (
            "input_values must be specified as a list/tuple of numpy arrays"
            if isinstance(values, np.ndarray)
            else "each element of input_values must be a numpy array"
        )
