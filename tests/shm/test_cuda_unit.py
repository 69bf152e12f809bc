"""tritonhttp.utils.cuda_shared_memory without a GPU: import, validation, handles, DLPack.

Everything here runs on any machine with cuda-python installed (the ``dev`` extra brings
it); the device paths are in test_cuda_gpu.py. DLPack export/import is exercised on host
memory (device -1), where numpy is a real consumer.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import gc
import inspect
import pickle
import types
import weakref

import numpy as np
import pytest
from shm_helpers import WITHOUT_CUDA_PYTHON, cuda_device_count, run_python

cuda_shm = pytest.importorskip("tritonhttp.utils.cuda_shared_memory")
from tritonhttp.utils.cuda_shared_memory import _dlpack, _handle, _region  # noqa: E402
from tritonhttp.utils.cuda_shared_memory._runtime import cudart  # noqa: E402

CudaError = cuda_shm.CudaSharedMemoryException


def ipc_handle(raw: bytes) -> object:
    handle = cudart.cudaIpcMemHandle_t()
    ctypes.memmove(handle.getPtr(), raw, len(raw))
    return handle


def fake_region(byte_size: int = 64) -> object:
    """A handle whose memory is never touched: only checks that precede CUDA calls run."""
    return cuda_shm.CudaSharedMemoryRegion("fake", ipc_handle(bytes(64)), 0, byte_size, 0)


# --- import ------------------------------------------------------------------------------


def test_import_without_cuda_python_names_the_extra() -> None:
    result = run_python(
        """
        import tritonhttp.utils.shared_memory  # unaffected
        try:
            import tritonhttp.utils.cuda_shared_memory
        except RuntimeError as e:
            print("RuntimeError:", e)
            print("cause:", type(e.__cause__).__name__)
        else:
            print("imported?!")
        """,
        prelude=WITHOUT_CUDA_PYTHON,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "RuntimeError:" in out and "pip install 'tritonhttp[cuda]'" in out
    assert "cuda-python" in out and "cause: ModuleNotFoundError" in out


#: the functions of tritonclient.utils.cuda_shared_memory
TC_FUNCTIONS = [
    "create_shared_memory_region",
    "get_raw_handle",
    "set_shared_memory_region",
    "get_contents_as_numpy",
    "set_shared_memory_region_from_dlpack",
    "as_shared_memory_tensor",
    "allocated_shared_memory_regions",
    "destroy_shared_memory_region",
]


def test_public_names_cover_tritonclients() -> None:
    expected = {*TC_FUNCTIONS, "CudaSharedMemoryException", "CudaSharedMemoryRegion"}
    assert expected <= set(cuda_shm.__all__)
    assert all(hasattr(cuda_shm, name) for name in cuda_shm.__all__)


@pytest.mark.parametrize("name", TC_FUNCTIONS)
def test_signatures_extend_tritonclients(name: str) -> None:
    tc_cuda = pytest.importorskip("tritonclient.utils.cuda_shared_memory")
    ours = list(inspect.signature(getattr(cuda_shm, name)).parameters.values())
    theirs = list(inspect.signature(getattr(tc_cuda, name)).parameters.values())
    assert [p.name for p in ours[: len(theirs)]] == [p.name for p in theirs]
    assert all(p.default is not inspect.Parameter.empty for p in ours[len(theirs) :])


def test_exception_message_repr_and_pickle() -> None:
    e = CudaError("no luck")
    assert str(e) == "no luck" and "no luck" in repr(e)
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is CudaError and str(again) == "no luck"


# --- no GPU ------------------------------------------------------------------------------


@pytest.mark.skipif(cuda_device_count() > 0, reason="a GPU is present")
def test_without_a_gpu_create_raises_a_clear_exception() -> None:
    with pytest.raises(CudaError, match="unable to create cuda shared memory handle") as info:
        cuda_shm.create_shared_memory_region("r", 64, 0)
    assert "GPU" in str(info.value)
    assert cuda_shm.allocated_shared_memory_regions() == []


@pytest.mark.parametrize(
    ("byte_size", "device_id", "message"),
    [
        (0, 0, "byte_size must be positive"),
        (-1, 0, "byte_size must not be negative"),
        (1.5, 0, "byte_size must be an integer"),
        (64, -1, "device_id must not be negative"),
        (64, "0", "device_id must be an integer"),
    ],
)
def test_create_validates_arguments_before_any_cuda_call(
    byte_size: object, device_id: object, message: str
) -> None:
    with pytest.raises(CudaError, match=message):
        cuda_shm.create_shared_memory_region("r", byte_size, device_id)
    assert cuda_shm.allocated_shared_memory_regions() == []


# --- raw handle --------------------------------------------------------------------------


def test_raw_handle_is_base64_of_the_64_handle_bytes() -> None:
    raw = bytes(range(64))
    region = cuda_shm.CudaSharedMemoryRegion("r", ipc_handle(raw), 0, 64, 0)
    encoded = cuda_shm.get_raw_handle(region)
    assert isinstance(encoded, bytes) and len(encoded) == 88
    assert base64.b64decode(encoded) == raw
    assert _handle.decode_raw_handle(encoded) == raw
    assert _handle.decode_raw_handle(encoded.decode()) == raw


def test_raw_handle_matches_tritonclients_encoding() -> None:
    tc_cuda = pytest.importorskip("tritonclient.utils.cuda_shared_memory")
    raw = bytes(reversed(range(64)))
    handle = ipc_handle(raw)
    region = cuda_shm.CudaSharedMemoryRegion("r", handle, 0, 64, 0)
    theirs = tc_cuda.get_raw_handle(types.SimpleNamespace(_cuda_shm_handle=handle))
    assert cuda_shm.get_raw_handle(region) == theirs


@pytest.mark.parametrize(
    ("encoded", "message"),
    [
        (base64.b64encode(bytes(63)), "decodes to 63 bytes"),
        (base64.b64encode(bytes(65)), "decodes to 65 bytes"),
        (b"not base64!", "not valid base64"),
        ("", "decodes to 0 bytes"),
    ],
)
def test_decoding_refuses_anything_but_64_bytes(encoded: bytes | str, message: str) -> None:
    with pytest.raises(CudaError, match=message):
        _handle.decode_raw_handle(encoded)


def test_encoding_refuses_wrong_lengths() -> None:
    with pytest.raises(CudaError, match="64 bytes"):
        _handle.encode_raw_handle(bytes(32))


# --- checks that come before CUDA ---------------------------------------------------------


def test_set_validates_values_and_bounds_before_copying() -> None:
    region = fake_region(64)
    with pytest.raises(CudaError, match="list/tuple of numpy arrays"):
        cuda_shm.set_shared_memory_region(region, np.zeros(2))
    with pytest.raises(CudaError, match="each element of input_values must be a numpy array"):
        cuda_shm.set_shared_memory_region(region, [[1, 2]])
    with pytest.raises(CudaError, match="do not fit"):
        cuda_shm.set_shared_memory_region(region, [np.zeros(9, np.float64)])
    with pytest.raises(CudaError, match="do not fit"):
        cuda_shm.set_shared_memory_region(region, [np.zeros(2, np.float64)], offset=56)
    with pytest.raises(CudaError, match="do not fit"):
        framed = np.array([b"\x05\x00\x00\x00hello" * 6], dtype=object)
        cuda_shm.set_shared_memory_region(region, [framed, framed])
    with pytest.raises(CudaError, match="offset must not be negative"):
        cuda_shm.set_shared_memory_region(region, [np.zeros(1)], offset=-1)


def test_get_validates_bounds_and_types_before_copying() -> None:
    region = fake_region(64)
    with pytest.raises(CudaError, match="insufficient"):
        cuda_shm.get_contents_as_numpy(region, np.float32, [17])
    with pytest.raises(CudaError, match="insufficient"):
        cuda_shm.get_contents_as_numpy(region, np.float32, [2], offset=60)
    with pytest.raises(CudaError, match="past the end"):
        cuda_shm.get_contents_as_numpy(region, np.object_, [1], offset=65)
    with pytest.raises(CudaError, match="datatype"):
        cuda_shm.get_contents_as_numpy(region, "nonsense", [1])
    with pytest.raises(CudaError, match="shape"):
        cuda_shm.get_contents_as_numpy(region, np.float32, "1")


def test_dlpack_view_validates_type_and_bounds() -> None:
    region = fake_region(64)
    with pytest.raises(CudaError, match="BYTES"):
        cuda_shm.as_shared_memory_tensor(region, "BYTES", [1])
    with pytest.raises(CudaError, match="unknown datatype"):
        cuda_shm.as_shared_memory_tensor(region, "FP8", [1])
    with pytest.raises(CudaError, match="does not fit"):
        cuda_shm.as_shared_memory_tensor(region, "FP32", [4, 5])
    with pytest.raises(CudaError, match="does not fit"):
        cuda_shm.as_shared_memory_tensor(region, "FP64", [1], offset=57)
    view = cuda_shm.as_shared_memory_tensor(region, "FP64", [2, 4])
    assert view.__dlpack_device__() == (2, 0)  # kDLCUDA, device 0


def test_handles_must_be_regions_and_die_with_destroy() -> None:
    with pytest.raises(CudaError, match="CudaSharedMemoryRegion"):
        cuda_shm.get_raw_handle(object())
    region = fake_region()
    with contextlib.suppress(CudaError):  # no GPU: cudaFree cannot even run
        cuda_shm.destroy_shared_memory_region(region)
    assert region.destroyed
    for call in (
        lambda: cuda_shm.get_raw_handle(region),
        lambda: cuda_shm.set_shared_memory_region(region, [np.zeros(1)]),
        lambda: cuda_shm.get_contents_as_numpy(region, np.float32, [1]),
        lambda: cuda_shm.as_shared_memory_tensor(region, "FP32", [1]),
        lambda: cuda_shm.set_shared_memory_region_from_dlpack(region, [np.zeros(1)]),
        lambda: cuda_shm.destroy_shared_memory_region(region),
    ):
        with pytest.raises(CudaError, match="has been destroyed"):
            call()


def test_memory_is_freed_by_destroy_or_by_the_last_export() -> None:
    allocation = _region._DeviceAllocation(0, 64, 0)
    token = _region._ExportToken(allocation)
    allocation.release()  # an export is alive: nothing is freed (no CUDA call either)
    assert not allocation.freed
    with pytest.raises(CudaError, match="destroyed"):
        _region._ExportToken(allocation)
    del token  # the last export goes: freed now
    assert allocation.freed
    lone = _region._DeviceAllocation(0, 64, 0)
    with contextlib.suppress(CudaError):  # no GPU: the free itself fails loudly
        lone.release()
    assert lone.freed


# --- DLPack on host memory ---------------------------------------------------------------


def host_tensor(
    buffer: np.ndarray, dtype: str, shape: list[int], offset: int = 0, owner: object = None
) -> _dlpack.SharedMemoryTensor:
    return _dlpack.SharedMemoryTensor(
        dtype,
        shape,
        buffer.ctypes.data,
        offset,
        buffer.nbytes,
        -1,
        (lambda: owner) if owner is not None else None,
    )


@pytest.mark.parametrize(
    "dtype",
    [
        *["BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"],
        *["FP16", "FP32", "FP64"],
    ],
)
def test_numpy_consumes_views_zero_copy(dtype: str) -> None:
    from tritonhttp.utils._dtypes import TRITON_TO_NUMPY

    np_type = TRITON_TO_NUMPY[dtype]
    buffer = np.zeros(128, dtype=np.uint8)
    expected = (np.arange(12) % 2).astype(np_type).reshape(3, 4)
    buffer[8 : 8 + expected.nbytes] = expected.view(np.uint8).ravel()
    got = np.from_dlpack(host_tensor(buffer, dtype, [3, 4], offset=8))
    assert got.dtype == np_type and got.shape == (3, 4)
    assert np.array_equal(got, expected)
    assert np.shares_memory(got, buffer)


#: the first numpy that marks an array from a writable versioned (DLPack 1) capsule
#: writeable (numpy PR 28600, backported to 2.2.5); before it, every import is read-only
NUMPY_WRITABLE_DLPACK = "2.2.5"


def test_views_are_writable_for_dlpack_1_consumers() -> None:
    buffer = np.zeros(4, dtype=np.float32)
    got = np.from_dlpack(host_tensor(buffer, "FP32", [4]))
    if not got.flags.writeable and np.lib.NumpyVersion(np.__version__) < NUMPY_WRITABLE_DLPACK:
        pytest.skip(f"numpy {np.__version__} imports DLPack read-only (< {NUMPY_WRITABLE_DLPACK})")
    assert got.flags.writeable
    got[2] = 7
    assert buffer[2] == 7


def test_capsule_fields_for_cuda_and_bf16() -> None:
    buffer = np.zeros(64, dtype=np.uint8)
    view = _dlpack.SharedMemoryTensor("BF16", [2, 3], buffer.ctypes.data, 4, 64, 3)
    assert view.__dlpack_device__() == (2, 3)
    capsule = view.__dlpack__(stream=None)
    info = _dlpack.read_dlpack(capsule)
    assert (info.device_type, info.device_id) == (2, 3)
    assert info.shape == [2, 3] and info.nbytes == 12
    assert info.address == buffer.ctypes.data + 4
    tensor = _dlpack._tensor_of(capsule)
    assert tensor is not None
    assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (4, 16, 1)


def test_dlpack_refuses_other_devices_and_copies() -> None:
    buffer = np.zeros(8, dtype=np.float32)
    view = host_tensor(buffer, "FP32", [8])
    with pytest.raises(BufferError):
        view.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        view.__dlpack__(copy=True)
    assert view.__dlpack__(dl_device=(1, 0)) is not None


class Owner:
    pass


def test_consumers_keep_the_owner_alive_and_release_it() -> None:
    buffer = np.arange(8, dtype=np.float32)
    owner = Owner()
    alive = weakref.ref(owner)
    view = host_tensor(buffer, "FP32", [8], owner=owner)
    del owner
    consumer = np.from_dlpack(view)
    del view
    gc.collect()
    assert alive() is not None, "the consumer still uses the memory"
    assert consumer.sum() == 28
    del consumer
    assert alive() is None


def test_unconsumed_capsules_release_the_owner() -> None:
    buffer = np.arange(8, dtype=np.float32)
    owner = Owner()
    alive = weakref.ref(owner)
    view = host_tensor(buffer, "FP32", [8], owner=owner)
    del owner
    capsule = view.__dlpack__()
    legacy = view.__dlpack__(max_version=(1, 0))
    assert alive() is not None
    del capsule, legacy, view
    assert alive() is None


def test_many_exports_leak_nothing() -> None:
    import tracemalloc

    buffer = np.arange(64, dtype=np.float32)
    live = [0, 0]  # [alive now, made in total]

    class Counted:
        def __init__(self) -> None:
            live[0] += 1
            live[1] += 1

        def __del__(self) -> None:
            live[0] -= 1

    def make() -> Counted:
        return Counted()

    view = _dlpack.SharedMemoryTensor("FP32", [8, 8], buffer.ctypes.data, 0, 256, -1, make)

    def cycle(n: int) -> None:
        for i in range(n):
            if i % 2:
                np.from_dlpack(view).sum()
            else:
                view.__dlpack__()

    cycle(200)  # warm up caches
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cycle(5000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert live == [0, 5200]
    assert grown < 16 * 1024, f"{grown} bytes kept after 5000 exports"


def test_exception_in_flight_while_a_capsule_dies() -> None:
    buffer = np.arange(4, dtype=np.float32)
    owner = Owner()
    alive = weakref.ref(owner)
    view = host_tensor(buffer, "FP32", [4], owner=owner)
    del owner

    def boom(*_: object) -> None:
        raise KeyError("in flight")

    with pytest.raises(KeyError, match="in flight"):
        boom(view.__dlpack__(), view.__dlpack__(), boom(1))
    del view
    gc.collect()
    assert alive() is None


# --- reading producers' capsules ---------------------------------------------------------


def test_read_dlpack_describes_numpy_arrays() -> None:
    array = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    info = _dlpack.read_dlpack(array)
    assert (info.device_type, info.shape, info.nbytes) == (1, [2, 3, 4], 48)
    assert info.address == array.ctypes.data
    info = _dlpack.read_dlpack(array[1])  # contiguous slice with a data offset
    assert info.address == array[1].ctypes.data and info.nbytes == 24
    info = _dlpack.read_dlpack(array.__dlpack__())  # a bare capsule works too
    assert info.nbytes == 48
    info = _dlpack.read_dlpack(np.zeros((3, 1, 2), np.float32)[:, :, :])
    assert info.nbytes == 24


def test_read_dlpack_refuses_non_contiguous_and_non_dlpack() -> None:
    array = np.arange(24, dtype=np.int16).reshape(4, 6)
    with pytest.raises(CudaError, match="not contiguous"):
        _dlpack.read_dlpack(array[:, ::2])
    with pytest.raises(CudaError, match="not contiguous"):
        _dlpack.read_dlpack(array.T)
    with pytest.raises(CudaError, match="neither a DLPack"):
        _dlpack.read_dlpack(b"bytes")


def test_read_dlpack_understands_tritonclients_one_bit_bools() -> None:
    tc_tensor = pytest.importorskip("tritonclient.utils._shared_memory_tensor")
    buffer = np.array([1, 0, 1, 1, 0], dtype=np.bool_)
    theirs = tc_tensor.SharedMemoryTensor("BOOL", [5], buffer.ctypes.data, 0, 5, -1)
    info = _dlpack.read_dlpack(theirs)
    assert info.nbytes == 5


def test_from_dlpack_validates_before_copying() -> None:
    region = fake_region(16)
    with pytest.raises(CudaError, match="list/tuple"):
        cuda_shm.set_shared_memory_region_from_dlpack(region, np.zeros(2))
    with pytest.raises(CudaError, match="do not fit"):
        cuda_shm.set_shared_memory_region_from_dlpack(region, [np.zeros(3, np.float64)])
    with pytest.raises(CudaError, match="do not fit"):
        cuda_shm.set_shared_memory_region_from_dlpack(region, [np.zeros(1)], offset=9)
    with pytest.raises(CudaError, match="not contiguous"):
        cuda_shm.set_shared_memory_region_from_dlpack(region, [np.zeros((2, 2))[:, :1]])

    class Vulkan:
        def __init__(self) -> None:
            self.array = np.zeros(2, np.float32)

        def __dlpack_device__(self) -> tuple[int, int]:
            return (7, 0)

        def __dlpack__(self, stream: object = None) -> object:
            capsule = self.array.__dlpack__()
            tensor = _dlpack._tensor_of(capsule)
            assert tensor is not None
            tensor.device = _dlpack.DLDevice(7, 0)
            return capsule

    with pytest.raises(CudaError, match="device type 7 is not supported"):
        cuda_shm.set_shared_memory_region_from_dlpack(region, [Vulkan()])
