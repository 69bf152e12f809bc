"""CUDA shared memory in the bundled server, without a GPU.

* Without cuda-python or a GPU the server answers as a CPU-only Triton 2.51 does (the
  side-by-side script in ``test_server_shm.py`` compares it with real Triton).
* Everything between the HTTP front and the device -- the shared namespace, status,
  bounds, copies in and out, in-use rules, closing handles -- runs here in-process with
  :class:`HostMemoryDevice`, a stand-in for the GPU whose "device memory" is host memory
  and whose "IPC handles" carry an address. The real device calls (cuda-python) are
  exercised by ``test_server_cuda_gpu.py`` on a GPU machine (``scripts/gpu-check.sh``).
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import json
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from shm_helpers import WITHOUT_CUDA_PYTHON, new_key, region, run_python

from tritonhttp.server import Server, parse_args
from tritonhttp.server.core._cuda_shm import CudaPythonDevice, CudaUnavailable
from tritonhttp.server.core._shm import SharedMemoryRegistry
from tritonhttp.utils import serialize_byte_tensor
from tritonhttp.utils import shared_memory as shm

MODELS = Path(__file__).resolve().parent.parent / "models"
CUDA = "/v2/cudasharedmemory"
SYS = "/v2/systemsharedmemory"
MAGIC = b"HOSTMEM\0"


class HostMemoryDevice:
    """A CudaDevice whose memory is host memory: a handle names an address and a size."""

    def __init__(self) -> None:
        self.opened: list[int] = []
        self.closed: list[int] = []
        self.fail_close = False
        self.fail_copy = False

    @staticmethod
    def handle(buffer: np.ndarray) -> bytes:
        packed = MAGIC + struct.pack("<QQ", buffer.ctypes.data, buffer.nbytes)
        return packed + bytes(64 - len(packed))

    def open(self, raw_handle: bytes, device_id: int) -> tuple[int, int]:
        if raw_handle[:8] != MAGIC:
            raise CudaUnavailable("cudaIpcOpenMemHandle failed: cudaErrorInvalidValue")
        if device_id != 0:
            raise CudaUnavailable("cudaSetDevice failed: cudaErrorInvalidDevice")
        address, size = struct.unpack_from("<QQ", raw_handle, 8)
        self.opened.append(address)
        return address, size

    def close(self, address: int, device_id: int) -> None:
        if self.fail_close:
            raise CudaUnavailable("cudaIpcCloseMemHandle failed: cudaErrorInvalidValue")
        self.closed.append(address)

    def to_host(self, address: int, device_id: int, nbytes: int) -> np.ndarray:
        if self.fail_copy:
            raise CudaUnavailable("cudaMemcpy failed: cudaErrorIllegalAddress")
        return np.frombuffer(ctypes.string_at(address, nbytes), np.uint8).copy()

    def from_host(self, address: int, device_id: int, data: memoryview) -> None:
        if self.fail_copy:
            raise CudaUnavailable("cudaMemcpy failed: cudaErrorIllegalAddress")
        source = np.frombuffer(data, np.uint8)
        ctypes.memmove(address, source.ctypes.data, source.nbytes)


def j(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def in_process(
    test: Callable[[httpx.AsyncClient, HostMemoryDevice, Server], Awaitable[None]],
) -> None:
    """Run ``test`` against our server in-process, its CUDA device the host stand-in."""

    async def go() -> None:
        server = Server(parse_args([f"--model-repository={MODELS}"]))
        await server.load_models()
        device = HostMemoryDevice()
        server.core.shm = SharedMemoryRegistry(cuda=device)
        try:
            transport = httpx.ASGITransport(app=server.http)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                await test(c, device, server)
        finally:
            await server.stop()

    asyncio.run(go())


async def cuda_register(
    c: httpx.AsyncClient, name: str, raw: bytes, byte_size: int, device_id: int = 0
) -> httpx.Response:
    body = {"raw_handle": {"b64": b64(raw)}, "device_id": device_id, "byte_size": byte_size}
    return await c.post(f"{CUDA}/region/{name}/register", content=j(body))


def tensor(
    name: str, datatype: str, shape: list[int], region_name: str, size: int, offset: int = 0
) -> dict[str, Any]:
    return {
        "name": name,
        "datatype": datatype,
        "shape": shape,
        "parameters": {
            "shared_memory_region": region_name,
            "shared_memory_byte_size": size,
            "shared_memory_offset": offset,
        },
    }


def output(name: str, region_name: str, size: int, offset: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "parameters": {
            "shared_memory_region": region_name,
            "shared_memory_byte_size": size,
            "shared_memory_offset": offset,
        },
    }


def error(r: httpx.Response) -> tuple[int, str]:
    return r.status_code, r.json()["error"]


# ----------------------------------------------------------------------------- no GPU


def test_without_a_gpu_registration_fails_as_on_a_cpu_only_triton() -> None:
    """cuda-python is installed here, but there is no driver or GPU."""
    device = CudaPythonDevice()
    with pytest.raises(CudaUnavailable) as caught:
        device.open(bytes(64), 0)
    assert "GPU" in str(caught.value) or "device" in str(caught.value)

    async def test(c: httpx.AsyncClient, _: HostMemoryDevice, server: Server) -> None:
        server.core.shm = SharedMemoryRegistry()  # the real device
        r = await cuda_register(c, "cu", bytes(64), 64)
        assert error(r) == (400, "failed to register shared memory region: invalid args")
        assert (await c.get(f"{CUDA}/status")).json() == []

    in_process(test)


def test_without_cuda_python_registration_fails_the_same_way() -> None:
    result = run_python(
        """
        from tritonhttp.server.core._errors import CoreError
        from tritonhttp.server.core._shm import SharedMemoryRegistry
        registry = SharedMemoryRegistry()
        try:
            registry.register_cuda("cu", bytes(64), 0, 64)
        except CoreError as e:
            print(e.code.http_status, e.message)
        print(registry.status(kind="cuda"))
        """,
        prelude=WITHOUT_CUDA_PYTHON,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "400 failed to register shared memory region: invalid args",
        "[]",
    ]


# ----------------------------------------------------------------------------- stand-in GPU


def test_namespace_status_and_registration_errors() -> None:
    memory = np.zeros(256, np.uint8)
    other = np.zeros(64, np.uint8)

    async def test(c: httpx.AsyncClient, device: HostMemoryDevice, _: Server) -> None:
        handle = device.handle(memory)
        assert (await cuda_register(c, "zeta", handle, 256)).status_code == 200
        assert (await cuda_register(c, "alpha", device.handle(other), 64)).status_code == 200
        assert (await c.get(f"{CUDA}/status")).json() == [
            {"name": "alpha", "device_id": 0, "byte_size": 64},
            {"name": "zeta", "device_id": 0, "byte_size": 256},
        ]
        assert (await c.get(f"{CUDA}/region/zeta/status")).json() == [
            {"name": "zeta", "device_id": 0, "byte_size": 256}
        ]
        assert (await c.get(f"{SYS}/status")).json() == []
        assert error(await c.get(f"{SYS}/region/zeta/status")) == (
            404,
            "The region named 'zeta' is registered as CUDA shared memory, not system shared memory",
        )
        assert error(await c.get(f"{CUDA}/region/nope/status")) == (
            404,
            "Unable to find cuda shared memory region: 'nope'",
        )
        assert error(await cuda_register(c, "zeta", handle, 256)) == (
            400,
            "shared memory region 'zeta' already in manager",
        )
        # one namespace: a system region cannot take a CUDA region's name, nor the reverse
        with region("sys", new_key(), 64) as h:
            body = j({"key": h.shm_key, "byte_size": 64})
            r = await c.post(f"{SYS}/region/zeta/register", content=body)
            assert error(r) == (400, "shared memory region 'zeta' already in manager")
            assert (await c.post(f"{SYS}/region/sys/register", content=body)).status_code == 200
            assert error(await cuda_register(c, "sys", handle, 8)) == (
                400,
                "shared memory region 'sys' already in manager",
            )
            assert error(await c.get(f"{CUDA}/region/sys/status")) == (
                404,
                "The region named 'sys' is registered as system shared memory, not CUDA "
                "shared memory",
            )
            # unregistering through the other kind's endpoint does nothing
            assert (await c.post(f"{CUDA}/region/sys/unregister")).status_code == 200
            assert (await c.post(f"{SYS}/region/zeta/unregister")).status_code == 200
            assert (await c.post(f"{CUDA}/unregister")).status_code == 200
            assert (await c.get(f"{SYS}/status")).json()[0]["name"] == "sys"
            assert (await c.post(f"{SYS}/unregister")).status_code == 200
        assert sorted(device.closed) == sorted(device.opened)
        # failures to open, and a size larger than the allocation (the handle is closed)
        assert error(await cuda_register(c, "bad", bytes(64), 64)) == (
            400,
            "failed to register shared memory region: invalid args",
        )
        assert error(await cuda_register(c, "dev1", handle, 64, device_id=1)) == (
            400,
            "failed to register shared memory region: invalid args",
        )
        opened = len(device.opened)
        assert error(await cuda_register(c, "big", handle, 257)) == (
            400,
            "failed to register shared memory region 'big': invalid args",
        )
        assert len(device.opened) == opened + 1 and device.closed[-1] == memory.ctypes.data
        assert (await c.get(f"{CUDA}/status")).json() == []

    in_process(test)


def test_inputs_and_outputs_through_cuda_regions() -> None:
    values = np.linspace(-4, 4, 32).astype(np.float32)
    source = np.zeros(256, np.uint8)
    source[16 : 16 + values.nbytes] = np.frombuffer(values.tobytes(), np.uint8)
    target = np.zeros(256, np.uint8)
    strings = serialize_byte_tensor(np.array([b"gpu", b"", b"\xff\x00"], dtype=object)).item()
    framed = np.frombuffer(strings, np.uint8).copy()

    async def test(c: httpx.AsyncClient, device: HostMemoryDevice, _: Server) -> None:
        assert (await cuda_register(c, "src", device.handle(source), 256)).status_code == 200
        assert (await cuda_register(c, "dst", device.handle(target), 256)).status_code == 200
        assert (
            await cuda_register(c, "str", device.handle(framed), framed.nbytes)
        ).status_code == 200
        # CUDA in -> CUDA out
        doc = {
            "inputs": [tensor("IN_FP32", "FP32", [32], "src", 128, 16)],
            "outputs": [output("OUT_FP32", "dst", 128, 64)],
        }
        r = await c.post("/v2/models/identity_all/infer", content=j(doc))
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        assert r.json()["outputs"] == [{"name": "OUT_FP32", "datatype": "FP32", "shape": [32]}]
        assert np.frombuffer(target[64:192].tobytes(), np.float32).tolist() == values.tolist()
        assert not target[:64].any() and not target[192:].any()
        # CUDA in -> JSON out; system in -> CUDA out
        doc = {"inputs": [tensor("IN_FP32", "FP32", [4], "src", 16, 16)]}
        r = await c.post("/v2/models/identity_all/infer", content=j(doc))
        assert r.json()["outputs"][0]["data"] == values[:4].tolist()
        with region("sys", new_key(), 64) as h:
            shm.set_shared_memory_region(h, [np.arange(16, dtype=np.float32)])
            body = j({"key": h.shm_key, "byte_size": 64})
            assert (await c.post(f"{SYS}/region/sys/register", content=body)).status_code == 200
            doc = {
                "inputs": [tensor("IN_FP32", "FP32", [16], "sys", 64)],
                "outputs": [output("OUT_FP32", "dst", 64)],
            }
            r = await c.post("/v2/models/identity_all/infer", content=j(doc))
            assert r.status_code == 200, r.text
            assert np.frombuffer(target[:64].tobytes(), np.float32).tolist() == list(range(16))
            assert (await c.post(f"{SYS}/unregister")).status_code == 200
        # BYTES framed in a CUDA region, out to another
        doc = {
            "inputs": [tensor("IN_STRING", "BYTES", [3], "str", framed.nbytes)],
            "outputs": [output("OUT_STRING", "dst", 156, 100)],
        }
        r = await c.post("/v2/models/identity_all/infer", content=j(doc))
        assert r.status_code == 200, r.text
        assert target[100 : 100 + len(strings)].tobytes() == strings
        # bounds and sizes: Triton's messages
        cases = [
            (tensor("IN_FP32", "FP32", [4], "src", 16, 256), None,
             (400, "Invalid offset for shared memory region: 'src'")),
            (tensor("IN_FP32", "FP32", [4], "src", 16, 248), None,
             (400, "Invalid offset + byte size for shared memory region: 'src'")),
            (tensor("IN_FP32", "FP32", [4], "src", 0), None,
             (400, "Invalid offset + byte size for shared memory region: 'src'")),
            (tensor("IN_FP32", "FP32", [4], "src", 12), None,
             (400, "[request id: <id_unknown>] input byte size mismatch for input 'IN_FP32' "
                   "for model 'identity_all'. Expected 16, got 12")),
            (tensor("IN_FP32", "FP32", [4], "src", 16), output("OUT_FP32", "dst", 8),
             (500, "shared memory size specified with the request for output 'OUT_FP32' "
                   "(8 bytes) should be at least 16 bytes to hold the results")),
            (tensor("IN_FP32", "FP32", [4], "src", 16), output("OUT_FP32", "dst", 16, 256),
             (400, "Invalid offset for shared memory region: 'dst'")),
        ]  # fmt: skip
        for inp, out, expected in cases:
            doc = {"inputs": [inp]} if out is None else {"inputs": [inp], "outputs": [out]}
            r = await c.post("/v2/models/identity_all/infer", content=j(doc))
            assert error(r) == expected, doc
        # a failing copy is an error answer, not a crash
        device.fail_copy = True
        doc = {"inputs": [tensor("IN_FP32", "FP32", [4], "src", 16)]}
        r = await c.post("/v2/models/identity_all/infer", content=j(doc))
        assert error(r) == (
            500,
            "failed to copy from cuda shared memory region 'src': cudaMemcpy failed: "
            "cudaErrorIllegalAddress",
        )
        device.fail_copy = False
        assert (await c.post(f"{CUDA}/unregister")).status_code == 200
        assert sorted(device.closed) == sorted(device.opened)

    in_process(test)


def test_in_use_regions_and_closing_handles() -> None:
    delay = np.array([400], np.int32).view(np.uint8).copy()
    result = np.zeros(8, np.uint8)
    idle = np.zeros(8, np.uint8)

    async def test(c: httpx.AsyncClient, device: HostMemoryDevice, server: Server) -> None:
        for name, memory in (("qin", delay), ("qout", result), ("idle", idle)):
            r = await cuda_register(c, name, device.handle(memory), memory.nbytes)
            assert r.status_code == 200
        doc = {
            "inputs": [tensor("DELAY_MS", "INT32", [1], "qin", 4)],
            "outputs": [output("OUTPUT0", "qout", 4)],
        }
        slow = asyncio.create_task(c.post("/v2/models/slow_model/infer", content=j(doc)))
        await asyncio.sleep(0.15)
        assert error(await c.post(f"{CUDA}/region/qout/unregister")) == (
            500,
            "Cannot unregister shared memory region 'qout', it is currently in use.",
        )
        assert error(await c.post(f"{CUDA}/unregister")) == (
            500,
            "Failed to unregister the following cuda shared memory regions: qin ,qout ,",
        )
        assert [s["name"] for s in (await c.get(f"{CUDA}/status")).json()] == ["qin", "qout"]
        assert device.closed == [idle.ctypes.data]
        r = await slow
        assert r.status_code == 200, r.text
        assert result[:4].view(np.int32)[0] == 400
        # CUDA refuses to close: the region stays, with Triton's message
        device.fail_close = True
        assert error(await c.post(f"{CUDA}/region/qin/unregister")) == (
            500,
            "failed to close CUDA IPC handle: cudaIpcCloseMemHandle failed: cudaErrorInvalidValue",
        )
        assert error(await c.post(f"{CUDA}/unregister")) == (
            500,
            "Failed to unregister the following cuda shared memory regions: qin ,qout ,",
        )
        device.fail_close = False
        assert (await c.post(f"{CUDA}/region/qin/unregister")).status_code == 200
        # what is left is closed when the server stops
        assert [s["name"] for s in (await c.get(f"{CUDA}/status")).json()] == ["qout"]
        server.core.shm.close()
        assert sorted(device.closed) == sorted(device.opened)

    in_process(test)


def test_the_aio_client_registers_cuda_regions(caplog: pytest.LogCaptureFixture) -> None:
    import tritonhttp.aio as aio

    caplog.set_level(5, logger="tritonhttp.server")  # VERBOSE: opening and closing handles

    memory = np.arange(16, dtype=np.float32)

    async def test(c: httpx.AsyncClient, device: HostMemoryDevice, _: Server) -> None:
        async with aio.InferenceServerClient("inprocess:8000", http_client=c) as client:
            raw = base64.b64encode(device.handle(memory))
            await client.register_cuda_shared_memory("m", raw, 0, memory.nbytes)
            assert await client.get_cuda_shared_memory_status("m") == [
                {"name": "m", "device_id": 0, "byte_size": 64}
            ]
            inp = aio.InferInput("IN_FP32", [8], "FP32").set_shared_memory("m", 32, 32)
            result = await client.infer("identity_all", [inp])
            assert result.as_numpy("OUT_FP32").tolist() == memory[8:].tolist()
            await client.unregister_cuda_shared_memory("m")
            assert await client.get_cuda_shared_memory_status() == []
        assert device.closed == [memory.ctypes.data]

    in_process(test)
    messages = [r.getMessage() for r in caplog.records]
    assert "opened the CUDA IPC handle of region 'm' on device 0 (64 of 64 bytes)" in messages
    assert "closed the CUDA IPC handle of region 'm'" in messages
