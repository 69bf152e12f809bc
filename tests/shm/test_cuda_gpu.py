"""tritonhttp.utils.cuda_shared_memory on a real GPU (skipped without one).

Run them all in one go on a GPU machine with ``scripts/gpu-check.sh``.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from _dtypes import NUMERIC
from shm_helpers import run_python

cuda_shm = pytest.importorskip("tritonhttp.utils.cuda_shared_memory")
from tritonhttp.utils import serialize_byte_tensor  # noqa: E402
from tritonhttp.utils.cuda_shared_memory._runtime import cudart  # noqa: E402

pytestmark = pytest.mark.gpu

MiB = 1 << 20


def free_memory(device: int) -> int:
    previous = cudart.cudaGetDevice()[1]
    cudart.cudaSetDevice(device)
    try:
        error, free, _total = cudart.cudaMemGetInfo()
        assert int(error) == 0
        return int(free)
    finally:
        cudart.cudaSetDevice(previous)


@pytest.fixture
def made(gpu: int) -> Iterator[list[object]]:
    """Regions a test creates (append them); destroyed afterwards if the test did not."""
    regions: list[object] = []
    yield regions
    for region in regions:
        if not region.destroyed:
            cuda_shm.destroy_shared_memory_region(region)
    assert cuda_shm.allocated_shared_memory_regions() == []


def create(made: list[object], byte_size: int, device: int = 0) -> object:
    region = cuda_shm.create_shared_memory_region(f"r{uuid.uuid4().hex[:6]}", byte_size, device)
    made.append(region)
    return region


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
def test_round_trip_at_an_offset(made: list[object], dtype: object) -> None:
    value = (np.arange(60).reshape(3, 4, 5) % 5).astype(dtype)
    region = create(made, value.nbytes + 16)
    cuda_shm.set_shared_memory_region(region, [value], offset=16)
    got = cuda_shm.get_contents_as_numpy(region, dtype, value.shape, offset=16)
    assert got.dtype == np.dtype(dtype) and got.flags.writeable
    assert np.array_equal(got, value)


def test_back_to_back_values_and_bytes(made: list[object]) -> None:
    words = np.array([b"cuda", b"", b"shared memory"], dtype=object)
    numbers = np.arange(6, dtype=np.float32).reshape(2, 3).T  # not contiguous
    region = create(made, 256)
    cuda_shm.set_shared_memory_region(region, [numbers, serialize_byte_tensor(words)])
    assert np.array_equal(cuda_shm.get_contents_as_numpy(region, np.float32, [3, 2]), numbers)
    got = cuda_shm.get_contents_as_numpy(region, np.object_, [3], offset=numbers.nbytes)
    assert got.tolist() == words.tolist()
    cuda_shm.set_shared_memory_region(region, [words], offset=100)  # serialized for us
    assert cuda_shm.get_contents_as_numpy(region, np.bytes_, [3], 100).tolist() == words.tolist()


def test_the_callers_device_is_left_alone(made: list[object]) -> None:
    before = cudart.cudaGetDevice()[1]
    region = create(made, 1024)
    cuda_shm.set_shared_memory_region(region, [np.ones(4)])
    cuda_shm.get_contents_as_numpy(region, np.float64, [4])
    cuda_shm.destroy_shared_memory_region(region)
    assert cudart.cudaGetDevice()[1] == before


def test_list_destroy_and_double_destroy(made: list[object]) -> None:
    a, b = create(made, 64), create(made, 64)
    assert cuda_shm.allocated_shared_memory_regions() == [a, b]
    cuda_shm.destroy_shared_memory_region(a)
    assert cuda_shm.allocated_shared_memory_regions() == [b]
    with pytest.raises(cuda_shm.CudaSharedMemoryException, match="has been destroyed"):
        cuda_shm.destroy_shared_memory_region(a)
    with pytest.raises(cuda_shm.CudaSharedMemoryException, match="has been destroyed"):
        cuda_shm.get_contents_as_numpy(a, np.float32, [1])


def test_destroy_frees_the_device_memory(made: list[object]) -> None:
    size = 512 * MiB
    start = free_memory(0)
    region = create(made, size)
    assert free_memory(0) < start - size * 0.9
    cuda_shm.destroy_shared_memory_region(region)
    assert free_memory(0) > start - size * 0.1, "destroy must give the memory back"


def test_a_dlpack_consumer_keeps_the_memory_until_it_lets_go(made: list[object]) -> None:
    size = 512 * MiB
    start = free_memory(0)
    region = create(made, size)
    view = cuda_shm.as_shared_memory_tensor(region, "FP32", [size // 4])
    assert view.__dlpack_device__() == (2, 0)
    capsule = view.__dlpack__(stream=1)
    cuda_shm.destroy_shared_memory_region(region)
    assert free_memory(0) < start - size * 0.9, "still used by the capsule"
    with pytest.raises(cuda_shm.CudaSharedMemoryException, match="destroyed"):
        view.__dlpack__()
    del capsule
    gc.collect()
    assert free_memory(0) > start - size * 0.1
    del view


def test_dlpack_device_to_device_copy(made: list[object]) -> None:
    value = np.arange(1000, dtype=np.int32)
    source, target = create(made, value.nbytes), create(made, value.nbytes + 8)
    cuda_shm.set_shared_memory_region(source, [value])
    view = cuda_shm.as_shared_memory_tensor(source, "INT32", [10, 100])
    cuda_shm.set_shared_memory_region_from_dlpack(target, [view], offset=8)
    got = cuda_shm.get_contents_as_numpy(target, np.int32, [1000], offset=8)
    assert np.array_equal(got, value)


def test_dlpack_from_host_arrays(made: list[object]) -> None:
    a = np.arange(12, dtype=np.float16).reshape(3, 4)
    b = np.arange(5, dtype=np.uint64)
    region = create(made, 128)
    cuda_shm.set_shared_memory_region_from_dlpack(region, [a, b], offset=4)
    assert np.array_equal(cuda_shm.get_contents_as_numpy(region, np.float16, [3, 4], 4), a)
    assert np.array_equal(cuda_shm.get_contents_as_numpy(region, np.uint64, [5], 28), b)


def test_another_process_opens_the_raw_handle(made: list[object]) -> None:
    value = np.arange(256, dtype=np.float32)
    region = create(made, value.nbytes)
    cuda_shm.set_shared_memory_region(region, [value])
    raw = cuda_shm.get_raw_handle(region)
    result = run_python(
        """
        import base64, ctypes, sys
        import numpy as np
        from cuda.bindings import runtime as cudart
        raw = base64.b64decode(sys.argv[1])
        assert len(raw) == 64
        assert int(cudart.cudaSetDevice(0)[0]) == 0
        handle = cudart.cudaIpcMemHandle_t()
        ctypes.memmove(handle.getPtr(), raw, 64)
        error, pointer = cudart.cudaIpcOpenMemHandle(handle, cudart.cudaIpcMemLazyEnablePeerAccess)
        assert int(error) == 0, error
        host = np.empty(256, np.float32)
        kind = cudart.cudaMemcpyKind.cudaMemcpyDefault
        assert int(cudart.cudaMemcpy(host.ctypes.data, pointer, host.nbytes, kind)[0]) == 0
        print(float(host.sum()))
        host[:] = -1  # write back, as Triton writes outputs
        assert int(cudart.cudaMemcpy(pointer, host.ctypes.data, host.nbytes, kind)[0]) == 0
        assert int(cudart.cudaIpcCloseMemHandle(pointer)[0]) == 0
        """,
        raw.decode(),
    )
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == float(value.sum())
    assert (cuda_shm.get_contents_as_numpy(region, np.float32, [256]) == -1).all()


def test_repeated_create_destroy_returns_the_memory(made: list[object]) -> None:
    start = free_memory(0)
    for _ in range(100):
        region = cuda_shm.create_shared_memory_region("cycle", 64 * MiB, 0)
        cuda_shm.set_shared_memory_region(region, [np.ones(16)])
        view = cuda_shm.as_shared_memory_tensor(region, "FP64", [16])
        view.__dlpack__()  # an unconsumed capsule, dropped at once
        cuda_shm.destroy_shared_memory_region(region)
        del view
    assert free_memory(0) > start - 32 * MiB
    assert cuda_shm.allocated_shared_memory_regions() == []


@pytest.mark.real_triton
def test_real_triton_reads_and_writes_our_cuda_regions(made: list[object], real_triton) -> None:
    import tritonclient.http as tc_http

    value = np.linspace(-1, 1, 64).astype(np.float32)
    source, target = create(made, value.nbytes), create(made, value.nbytes)
    cuda_shm.set_shared_memory_region(source, [value])
    client = tc_http.InferenceServerClient(real_triton.url)
    try:
        for region in (source, target):
            client.register_cuda_shared_memory(
                region.triton_shm_name, cuda_shm.get_raw_handle(region), 0, value.nbytes
            )
        inp = tc_http.InferInput("IN_FP32", [64], "FP32")
        inp.set_shared_memory(source.triton_shm_name, value.nbytes)
        out = tc_http.InferRequestedOutput("OUT_FP32")
        out.set_shared_memory(target.triton_shm_name, value.nbytes)
        client.infer("identity_all", [inp], outputs=[out])
        assert np.array_equal(cuda_shm.get_contents_as_numpy(target, np.float32, [64]), value)
    finally:
        client.unregister_cuda_shared_memory()
        client.close()
