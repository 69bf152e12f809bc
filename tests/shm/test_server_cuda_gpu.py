"""CUDA shared memory end to end on a GPU: our client creates regions, the bundled server
(another process) opens them with cudaIpcOpenMemHandle, reads its inputs from them and
writes its outputs into them. Skipped without a GPU; ``scripts/gpu-check.sh`` runs them
(and, with ``GPU_CHECK_REAL_TRITON=1``, the side-by-side test against real Triton).
"""

from __future__ import annotations

import base64
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from shm_helpers import new_key, region

import tritonhttp as httpclient
from tritonhttp import InferenceServerException
from tritonhttp.utils import serialize_byte_tensor
from tritonhttp.utils import shared_memory as shm

cuda_shm = pytest.importorskip("tritonhttp.utils.cuda_shared_memory")
from tritonhttp.utils.cuda_shared_memory._runtime import cudart  # noqa: E402

pytestmark = pytest.mark.gpu

MODELS = Path(__file__).resolve().parent.parent / "models"
MiB = 1 << 20


@pytest.fixture(scope="module")
def server(gpu: int, bundled_server_factory: Any) -> Any:
    """Our server, verbose so that opening and closing handles shows in its log."""
    return bundled_server_factory(MODELS, "--log-verbose=1")


@pytest.fixture
def client(server: Any, made: list[Any]) -> Iterator[httpclient.InferenceServerClient]:
    """Unregisters everything before ``made`` frees the memory (freeing memory another
    process still has open is undefined behaviour)."""
    c = httpclient.InferenceServerClient(server.url)
    try:
        yield c
    finally:
        c.unregister_cuda_shared_memory()
        c.unregister_system_shared_memory()
        c.close()


@pytest.fixture
def made(gpu: int) -> Iterator[list[Any]]:
    regions: list[Any] = []
    yield regions
    for r in regions:
        if not r.destroyed:
            cuda_shm.destroy_shared_memory_region(r)
    assert cuda_shm.allocated_shared_memory_regions() == []


def create(made: list[Any], byte_size: int) -> Any:
    r = cuda_shm.create_shared_memory_region(f"g{uuid.uuid4().hex[:8]}", byte_size, 0)
    made.append(r)
    return r


def register(
    client: httpclient.InferenceServerClient, r: Any, byte_size: int | None = None
) -> None:
    client.register_cuda_shared_memory(
        r.triton_shm_name,
        cuda_shm.get_raw_handle(r),
        0,
        r.byte_size if byte_size is None else byte_size,
    )


def free_memory() -> int:
    error, free, _total = cudart.cudaMemGetInfo()
    assert int(error) == 0
    return int(free)


def message(call: Any) -> str:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return str(caught.value.message())


def test_identity_through_cuda_regions(
    client: httpclient.InferenceServerClient, made: list[Any]
) -> None:
    value = np.linspace(-1, 1, 1024).astype(np.float32)
    source, target = create(made, value.nbytes + 256), create(made, value.nbytes + 256)
    cuda_shm.set_shared_memory_region(source, [value], offset=128)
    register(client, source)
    register(client, target)
    assert client.get_cuda_shared_memory_status(source.triton_shm_name) == [
        {"name": source.triton_shm_name, "device_id": 0, "byte_size": value.nbytes + 256}
    ]
    inp = httpclient.InferInput("IN_FP32", [1024], "FP32")
    inp.set_shared_memory(source.triton_shm_name, value.nbytes, offset=128)
    out = httpclient.InferRequestedOutput("OUT_FP32")
    out.set_shared_memory(target.triton_shm_name, value.nbytes, offset=64)
    result = client.infer("identity_all", [inp], outputs=[out])
    assert result.get_output("OUT_FP32") == {
        "name": "OUT_FP32",
        "datatype": "FP32",
        "shape": [1024],
    }
    assert np.array_equal(
        cuda_shm.get_contents_as_numpy(target, np.float32, [1024], offset=64), value
    )
    # CUDA in, binary out
    result = client.infer("identity_all", [inp])
    assert np.array_equal(result.as_numpy("OUT_FP32"), value)


def test_cuda_and_system_regions_together(
    client: httpclient.InferenceServerClient, made: list[Any]
) -> None:
    value = np.arange(64, dtype=np.int64) * 3
    strings = np.array([b"on", b"the", b"gpu", b""], dtype=object)
    framed = serialize_byte_tensor(strings).item()
    device = create(made, 1024)
    cuda_shm.set_shared_memory_region(device, [value])
    cuda_shm.set_shared_memory_region(device, [serialize_byte_tensor(strings)], offset=512)
    register(client, device)
    with region("host", new_key(), 1024) as host:
        client.register_system_shared_memory("host", host.shm_key, 1024)
        # CUDA in -> system out
        inp = httpclient.InferInput("IN_INT64", [64], "INT64")
        inp.set_shared_memory(device.triton_shm_name, value.nbytes)
        out = httpclient.InferRequestedOutput("OUT_INT64")
        out.set_shared_memory("host", value.nbytes)
        client.infer("identity_all", [inp], outputs=[out])
        got = shm.get_contents_as_numpy(host, np.int64, [64])
        assert np.array_equal(got, value)
        del got
        # system in -> CUDA out (BYTES)
        shm.set_shared_memory_region(host, [serialize_byte_tensor(strings)], offset=600)
        inp = httpclient.InferInput("IN_STRING", [4], "BYTES")
        inp.set_shared_memory("host", len(framed), offset=600)
        out = httpclient.InferRequestedOutput("OUT_STRING")
        out.set_shared_memory(device.triton_shm_name, 256, offset=700)
        client.infer("identity_all", [inp], outputs=[out])
        got_strings = cuda_shm.get_contents_as_numpy(device, np.object_, [4], offset=700)
        assert got_strings.tolist() == strings.tolist()
        client.unregister_system_shared_memory("host")


def test_bounds_and_registration_errors(
    client: httpclient.InferenceServerClient, made: list[Any]
) -> None:
    r = create(made, 256)
    name = r.triton_shm_name
    # larger than the allocation (whatever granularity the driver rounds it up to)
    assert message(lambda: register(client, r, 256 + 64 * MiB)) == (
        f"failed to register shared memory region '{name}': invalid args"
    )
    assert (
        message(
            lambda: client.register_cuda_shared_memory(name, base64.b64encode(bytes(64)), 0, 64)
        )
        == "failed to register shared memory region: invalid args"
    )
    assert (
        message(
            lambda: client.register_cuda_shared_memory(name, cuda_shm.get_raw_handle(r), 4096, 64)
        )
        == "failed to register shared memory region: invalid args"
    )
    register(client, r)
    assert (
        message(lambda: register(client, r)) == f"shared memory region '{name}' already in manager"
    )
    for offset, size, expected in (
        (256, 16, f"Invalid offset for shared memory region: '{name}'"),
        (248, 16, f"Invalid offset + byte size for shared memory region: '{name}'"),
        (0, 0, f"Invalid offset + byte size for shared memory region: '{name}'"),
    ):
        inp = httpclient.InferInput("IN_FP32", [4], "FP32").set_shared_memory(name, size, offset)
        assert message(lambda i=inp: client.infer("identity_all", [i])) == expected
    inp = httpclient.InferInput("IN_FP32", [4], "FP32").set_shared_memory(name, 16)
    out = httpclient.InferRequestedOutput("OUT_FP32")
    out.set_shared_memory(name, 8, offset=32)
    assert message(lambda: client.infer("identity_all", [inp], outputs=[out])) == (
        "shared memory size specified with the request for output 'OUT_FP32' (8 bytes) should "
        "be at least 16 bytes to hold the results"
    )


def test_one_handle_under_two_names(
    client: httpclient.InferenceServerClient, made: list[Any]
) -> None:
    """cudaIpcOpenMemHandle counts opens of one handle: closing one name keeps the other."""
    value = np.arange(32, dtype=np.float32)
    r = create(made, value.nbytes)
    cuda_shm.set_shared_memory_region(r, [value])
    raw = cuda_shm.get_raw_handle(r)
    client.register_cuda_shared_memory("first", raw, 0, value.nbytes)
    client.register_cuda_shared_memory("second", raw, 0, value.nbytes)
    client.unregister_cuda_shared_memory("first")
    inp = httpclient.InferInput("IN_FP32", [32], "FP32").set_shared_memory("second", value.nbytes)
    assert np.array_equal(client.infer("identity_all", [inp]).as_numpy("OUT_FP32"), value)


def test_unregister_while_in_use(
    client: httpclient.InferenceServerClient, made: list[Any], server: Any
) -> None:
    r = create(made, 64)
    cuda_shm.set_shared_memory_region(r, [np.array([500], np.int32)])
    name = r.triton_shm_name
    register(client, r)
    inp = httpclient.InferInput("DELAY_MS", [1], "INT32").set_shared_memory(name, 4)
    out = httpclient.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory(name, 4, offset=32)
    done: list[Any] = []

    def slow() -> None:
        with httpclient.InferenceServerClient(server.url) as other:
            done.append(other.infer("slow_model", [inp], outputs=[out]))

    worker = threading.Thread(target=slow)
    worker.start()
    time.sleep(0.25)
    assert message(lambda: client.unregister_cuda_shared_memory(name)) == (
        f"Cannot unregister shared memory region '{name}', it is currently in use."
    )
    assert message(lambda: client.unregister_cuda_shared_memory()) == (
        f"Failed to unregister the following cuda shared memory regions: {name} ,"
    )
    worker.join(30)
    assert done
    assert cuda_shm.get_contents_as_numpy(r, np.int32, [1], offset=32).tolist() == [500]
    client.unregister_cuda_shared_memory(name)
    assert client.get_cuda_shared_memory_status() == []


def test_unregister_closes_the_handle(
    client: httpclient.InferenceServerClient, made: list[Any], server: Any
) -> None:
    """Many register / infer / unregister / free cycles of 256 MiB: the device memory comes
    back, so the server closed every handle it opened (its log says so too)."""
    size = 256 * MiB
    value = np.full(16, 7, np.float32)

    def cycle() -> None:
        r = cuda_shm.create_shared_memory_region("cycle", size, 0)
        try:
            cuda_shm.set_shared_memory_region(r, [value])
            register(client, r)
            inp = httpclient.InferInput("IN_FP32", [16], "FP32").set_shared_memory("cycle", 64)
            out = httpclient.InferRequestedOutput("OUT_FP32")
            out.set_shared_memory("cycle", 64, offset=size - 64)
            client.infer("identity_all", [inp], outputs=[out])
            got = cuda_shm.get_contents_as_numpy(r, np.float32, [16], offset=size - 64)
            assert np.array_equal(got, value)
            client.unregister_cuda_shared_memory("cycle")
        finally:
            cuda_shm.destroy_shared_memory_region(r)

    cycle()  # the server's CUDA context exists from now on
    baseline = free_memory()
    for _ in range(24):  # 6 GiB in all: a leak would show
        cycle()
    assert free_memory() > baseline - size
    log = server.log()
    opened = len(re.findall(r"opened the CUDA IPC handle of region 'cycle'", log))
    closed = len(re.findall(r"closed the CUDA IPC handle of region 'cycle'", log))
    assert opened == closed >= 25


@pytest.mark.real_triton
def test_same_answers_as_real_triton(made: list[Any], server: Any, real_triton: Any) -> None:
    """One script of CUDA-region requests, sent to real Triton and to ours."""
    value = np.linspace(-3, 3, 256).astype(np.float32)
    source, target = create(made, 2048), create(made, 2048)
    answers = {}
    for side, url in (("real", real_triton.url), ("ours", server.url)):
        cuda_shm.set_shared_memory_region(source, [value])
        cuda_shm.set_shared_memory_region(target, [np.zeros(512, np.float32)])
        seen: list[Any] = []
        with httpclient.InferenceServerClient(url) as c:
            for call in (
                lambda c=c: register(c, source),
                lambda c=c: register(c, target),
                lambda c=c: register(c, source),
                lambda c=c: c.register_cuda_shared_memory(
                    "big", cuda_shm.get_raw_handle(source), 0, 4096
                ),
                lambda c=c: c.get_cuda_shared_memory_status(),
                lambda c=c: c.get_system_shared_memory_status(source.triton_shm_name),
            ):
                try:
                    result = call()
                    seen.append(sorted(result, key=str) if isinstance(result, list) else result)
                except InferenceServerException as e:
                    seen.append(e.message())
            for offset, size, out_offset, out_size in ((0, 1024, 0, 1024), (1024, 1024, 512, 1536),
                                                       (2048, 16, 0, 64), (2040, 16, 0, 64),
                                                       (0, 1024, 0, 512)):  # fmt: skip
                inp = httpclient.InferInput("IN_FP32", [size // 4], "FP32")
                inp.set_shared_memory(source.triton_shm_name, size, offset)
                out = httpclient.InferRequestedOutput("OUT_FP32")
                out.set_shared_memory(target.triton_shm_name, out_size, out_offset)
                try:
                    seen.append(c.infer("identity_all", [inp], outputs=[out]).get_response())
                except InferenceServerException as e:
                    seen.append(e.message())
            seen.append(cuda_shm.get_contents_as_numpy(target, np.float32, [512]).tolist())
            c.unregister_cuda_shared_memory()
            seen.append(c.get_cuda_shared_memory_status())
        answers[side] = seen
    assert answers["ours"] == answers["real"]
