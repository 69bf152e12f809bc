"""System shared memory on the server side: REAL Triton 2.51.0 and the bundled server, side by
side.

Both servers map the same POSIX objects (made with our utils). Every step of a script goes
to real Triton, then to ours, with the regions reset before each; the status line,
content type, body and the bytes left in the regions must be the same. What 2.51 gets wrong
on purpose-built inputs (double offset, key reuse) is checked against the intended
semantics in ``test_server_shm_semantics.py`` instead.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from server._wire import Reply, exchange
from shm_helpers import DEV_SHM, KEY_PREFIX, new_key

from tritonhttp.utils import serialize_byte_tensor
from tritonhttp.utils import shared_memory as shm

pytestmark = pytest.mark.real_triton

Step = tuple[str, str, str]
SYS = "/v2/systemsharedmemory"
CUDA = "/v2/cudasharedmemory"


def j(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


@dataclass
class Objects:
    """The POSIX objects of one test, with their baseline contents."""

    keys: dict[str, str]
    handles: dict[str, shm.SharedMemoryRegion]
    baseline: dict[str, bytes]
    special: dict[str, str]  # a directory, a symbolic link and a FIFO in /dev/shm

    def reset(self) -> None:
        for name, data in self.baseline.items():
            shm.set_shared_memory_region(self.handles[name], [np.frombuffer(data, dtype=np.uint8)])

    def snapshot(self) -> dict[str, bytes]:
        return {
            name: shm.get_contents_as_numpy(h, np.uint8, [h.byte_size]).tobytes()
            for name, h in self.handles.items()
        }


def _bytes_region() -> bytes:
    good = serialize_byte_tensor(np.array([b"ab", b"cde"], dtype=object)).item()
    data = bytearray(4096)
    data[: len(good)] = good
    return bytes(data)


@pytest.fixture
def objects() -> Iterator[Objects]:
    contents = {
        "a": np.arange(1024, dtype=np.float32).tobytes(),
        "b": bytes(4096),
        "c": (np.arange(2048, dtype=np.float32) * 2).tobytes(),
        "d": _bytes_region(),
        "e": bytes(4096),
    }
    keys = {name: new_key() for name in contents}
    handles = {
        name: shm.create_shared_memory_region(name, keys[name], len(data))
        for name, data in contents.items()
    }
    special = {
        "dir": f"{KEY_PREFIX}dir",
        "link": f"{KEY_PREFIX}link",
        "fifo": f"{KEY_PREFIX}fifo",
    }
    os.mkdir(DEV_SHM / special["dir"])
    os.symlink(DEV_SHM / keys["a"].lstrip("/"), DEV_SHM / special["link"])
    os.mkfifo(DEV_SHM / special["fifo"])
    objs = Objects(keys, handles, contents, special)
    try:
        objs.reset()
        yield objs
    finally:
        os.rmdir(DEV_SHM / special["dir"])
        os.unlink(DEV_SHM / special["link"])
        os.unlink(DEV_SHM / special["fifo"])
        for h in handles.values():
            shm.destroy_shared_memory_region(h)


@pytest.fixture
def servers(real_triton: Any, bundled_server: Any) -> Iterator[dict[str, str]]:
    urls = {"real": real_triton.url, "ours": bundled_server.url}
    yield urls
    for url in urls.values():  # never leave a region registered for the next test
        exchange(url, "POST", f"{SYS}/unregister")
        exchange(url, "POST", f"{CUDA}/unregister")


def register(name: str, key: str, byte_size: int, offset: int | None = None) -> Step:
    doc: dict[str, Any] = {"key": key, "byte_size": byte_size}
    if offset is not None:
        doc["offset"] = offset
    return ("POST", f"{SYS}/region/{name}/register", j(doc))


def shm_params(region: Any, size: Any = None, offset: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"shared_memory_region": region}
    if size is not None:
        params["shared_memory_byte_size"] = size
    if offset is not None:
        params["shared_memory_offset"] = offset
    return params


def shm_input(name: str, datatype: str, shape: list[int], **params: Any) -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": shape, "parameters": shm_params(**params)}


def shm_output(name: str, **params: Any) -> dict[str, Any]:
    extra = params.pop("extra", {})
    return {"name": name, "parameters": {**shm_params(**params), **extra}}


def infer(model: str, inputs: list[Any], outputs: list[Any] | None = None) -> Step:
    doc: dict[str, Any] = {"inputs": inputs}
    if outputs is not None:
        doc["outputs"] = outputs
    return ("POST", f"/v2/models/{model}/infer", j(doc))


def identity_fp32(source: dict[str, Any], **output: Any) -> Step:
    """identity_all on 16 FP32 values read from a region as ``source`` says, OUT_FP32 written
    to one as ``output`` says (when given)."""
    outputs = [shm_output("OUT_FP32", **output)] if output else None
    return infer("identity_all", [shm_input("IN_FP32", "FP32", [16], **source)], outputs)


def cuda_register(name: str, b64: Any = None, **fields: Any) -> Step:
    doc: dict[str, Any] = dict(fields)
    if b64 is not None:
        doc["raw_handle"] = {"b64": b64}
    return ("POST", f"{CUDA}/region/{name}/register", j(doc))


def compare(servers: dict[str, str], objs: Objects, steps: list[Step]) -> None:
    problems = []
    for i, (method, path, body) in enumerate(steps):
        answers: dict[str, tuple[Reply, dict[str, bytes]]] = {}
        for side, url in servers.items():
            objs.reset()
            reply = exchange(url, method, path, body)
            answers[side] = (reply, objs.snapshot())
        (real, real_mem), (ours, our_mem) = answers["real"], answers["ours"]
        if ours.key() != real.key():
            problems.append(f"#{i} {method} {path} {body[:200]}\n  ours {ours}\n  real {real}")
        for name in real_mem:
            if real_mem[name] != our_mem[name]:
                problems.append(f"#{i} {path} {body[:200]}: region {name} differs")
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------- the script


def test_registration_errors_and_key_tricks(servers: dict[str, str], objects: Objects) -> None:
    k = objects.keys
    sp = objects.special
    steps: list[Step] = [
        ("GET", f"{SYS}/status", ""),
        ("POST", f"{SYS}/register", j({"key": k["a"], "byte_size": 64})),
        ("POST", f"{SYS}/region/r/register", ""),
        ("POST", f"{SYS}/region/r/register", "{"),
        ("POST", f"{SYS}/region/r/register", "[]"),
        ("POST", f"{SYS}/region/r/register", j({"byte_size": 64})),
        ("POST", f"{SYS}/region/r/register", j({"key": 5, "byte_size": 64})),
        ("POST", f"{SYS}/region/r/register", j({"key": k["a"]})),
        ("POST", f"{SYS}/region/r/register", j({"key": k["a"], "byte_size": -1})),
        ("POST", f"{SYS}/region/r/register", j({"key": k["a"], "byte_size": "64"})),
        ("POST", f"{SYS}/region/r/register", j({"key": k["a"], "byte_size": 1.5})),
        ("POST", f"{SYS}/region/r/register", j({"key": k["a"], "byte_size": 64, "offset": None})),
        ("POST", f"{SYS}/region/r/register", j({"key": k["a"], "byte_size": 64, "offset": -1})),
        # keys naming other files, or nothing
        register("r", "/../etc/passwd", 64),
        register("r", "/../../dev/shm/" + k["a"].lstrip("/"), 64),
        register("r", "/..", 64),
        register("r", "/.", 64),
        register("r", "", 64),
        register("r", "/", 64),
        register("r", "/" + sp["dir"], 64),
        register("r", "/" + sp["link"], 64),
        register("r", "/" + sp["fifo"], 64),
        register("r", "/" + sp["fifo"], 0),
        register("r", f"/{KEY_PREFIX}missing", 64),
        register("r", f"/{KEY_PREFIX}nul\u0000x", 64),
        register("r", "/" + "x" * 300, 64),
        # sizes and offsets the object cannot hold, or mmap refuses
        register("r", k["e"], 4097),
        register("r", k["e"], 1, 4096),
        register("r", k["e"], 64, 4097),
        register("r", k["e"], 8, 3),
        register("r", k["e"], 0),
        register("r", k["e"], 0, 4096),
        register("r", k["e"], 2**64 - 1),
        register("r", k["e"], 4096, 2**64 - 4096),
        register("r", k["e"], 2**64 - 4096, 4096),
        register("r", k["e"], 2**63, 2**63),
        register("r", k["e"], 2**64 - 3, 3),
        ("GET", f"{SYS}/status", ""),
    ]
    compare(servers, objects, steps)


def test_status_register_and_inference_through_regions(
    servers: dict[str, str], objects: Objects
) -> None:
    k = objects.keys
    in0 = {"region": "in0", "size": 64}  # 16 FP32 values at the start of region in0
    handle = base64.b64encode(bytes(range(64))).decode()
    steps: list[Step] = [
        register("in0", k["a"], 4096),
        register("out0", k["b"], 4096),
        register("by", k["d"], 4096),
        register("in0", k["a"], 4096),  # already in manager (same key: name first)
        register("in0", k["e"], 64),
        ("GET", f"{SYS}/status", ""),
        ("GET", f"{SYS}/region/in0/status", ""),
        ("GET", f"{SYS}/region/nope/status", ""),
        ("GET", f"{CUDA}/region/in0/status", ""),
        ("GET", f"{CUDA}/region/nope/status", ""),
        ("GET", f"{CUDA}/status", ""),
        # CUDA registrations: the name space is shared, the handle cannot be opened here
        cuda_register("in0", handle, device_id=0, byte_size=64),
        cuda_register("cu", handle, device_id=0, byte_size=64),
        cuda_register("cu", "AAAA", device_id=0, byte_size=64),
        cuda_register("cu", "not base64!", device_id=0, byte_size=64),
        cuda_register("cu", handle, byte_size=64),
        cuda_register("cu", handle, device_id=0),
        cuda_register("cu", None, device_id=0, byte_size=64),
        ("POST", f"{CUDA}/region/cu/register", j({"raw_handle": {}, "device_id": 0})),
        ("POST", f"{CUDA}/register", j({})),
        # inputs and outputs in regions
        identity_fp32(in0),
        identity_fp32(
            {"region": "in0", "size": 64, "offset": 128}, region="out0", size=64, offset=256
        ),
        identity_fp32(in0, region="out0", size=4096, extra={"binary_data": False}),
        identity_fp32(in0, region="out0", size=64, extra={"binary_data": True}),
        identity_fp32(in0, region="out0", size=64, extra={"classification": 2}),
        # bounds of inputs
        identity_fp32({"region": "in0", "size": 64, "offset": 4096}),
        identity_fp32({"region": "in0", "size": 64, "offset": 4090}),
        identity_fp32({"region": "in0", "size": 64, "offset": 4032}),
        identity_fp32({"region": "in0", "size": 4097}),
        identity_fp32({"region": "in0"}),
        identity_fp32({"region": "in0", "size": 0}),
        infer("identity_all", [shm_input("IN_FP32", "FP32", [0], region="in0", size=0)]),
        identity_fp32({"region": "in0", "size": 64, "offset": -1}),
        identity_fp32({"region": "in0", "size": "64"}),
        identity_fp32({"region": "in0", "size": 2**64}),
        identity_fp32({"region": 5, "size": 64}),
        identity_fp32({"region": "nope", "size": 64}),
        identity_fp32({"region": "in0\u0000", "size": 64}),
        # sizes that do not match the tensor
        identity_fp32({"region": "in0", "size": 60}),
        infer("identity_all", [shm_input("IN_FP32", "FP32", [15], region="in0", size=64)]),
        infer("identity_all", [shm_input("IN_INT64", "INT64", [7], region="in0", size=60)]),
        infer("identity_all", [shm_input("IN_FP16", "FP16", [33], region="in0", size=64)]),
        # outputs: bounds, too small, unknown
        identity_fp32(in0, region="out0", size=32),
        identity_fp32(in0, region="out0", size=64, offset=4064),
        identity_fp32(in0, region="out0", size=64, offset=4096),
        identity_fp32(in0, region="out0"),
        identity_fp32(in0, region="gone", size=64),
        identity_fp32(in0, region="out0\u0000x", size=64),
        # one region for inputs and outputs, overlapping: outputs overwrite in place
        identity_fp32(in0, region="in0", size=64, offset=32),
        identity_fp32(
            {"region": "in0", "size": 64, "offset": 64}, region="in0", size=64, offset=32
        ),
        identity_fp32(in0, region="in0", size=64),
        # two inputs from one region; shm next to JSON inputs; both outputs to regions
        infer(
            "add_sub",
            [
                shm_input("INPUT0", "FP32", [4], region="in0", size=16),
                shm_input("INPUT1", "FP32", [4], region="in0", size=16, offset=16),
            ],
            [
                shm_output("OUTPUT0", region="out0", size=16),
                shm_output("OUTPUT1", region="out0", size=16, offset=16),
            ],
        ),
        infer(
            "add_sub",
            [
                shm_input("INPUT0", "FP32", [4], region="in0", size=16, offset=48),
                {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
            ],
            [shm_output("OUTPUT1", region="out0", size=16), {"name": "OUTPUT0"}],
        ),
        # BYTES framed inside a region
        infer("identity_all", [shm_input("IN_STRING", "BYTES", [2], region="by", size=13)]),
        infer(
            "identity_all",
            [shm_input("IN_STRING", "BYTES", [2], region="by", size=13)],
            [shm_output("OUT_STRING", region="out0", size=13, offset=8)],
        ),
        infer(
            "identity_all",
            [shm_input("IN_STRING", "BYTES", [2], region="by", size=13)],
            [shm_output("OUT_STRING", region="out0", size=12)],
        ),
        infer("identity_all", [shm_input("IN_STRING", "BYTES", [3], region="by", size=13)]),
        infer("identity_all", [shm_input("IN_STRING", "BYTES", [1], region="by", size=13)]),
        infer("identity_all", [shm_input("IN_STRING", "BYTES", [2], region="by", size=12)]),
        infer("identity_all", [shm_input("IN_STRING", "BYTES", [2], region="by", size=6)]),
        infer(
            "identity_all",
            [shm_input("IN_STRING", "BYTES", [1], region="by", size=3, offset=100)],
        ),
        # unregister: unknown names, the other kind, one, all
        ("POST", f"{SYS}/region/nope/unregister", ""),
        ("POST", f"{CUDA}/region/out0/unregister", ""),
        ("GET", f"{SYS}/region/out0/status", ""),
        ("POST", f"{SYS}/region/in0/unregister", ""),
        ("GET", f"{SYS}/region/in0/status", ""),
        identity_fp32(in0),
        ("POST", f"{CUDA}/unregister", ""),
        ("GET", f"{SYS}/status", ""),
        ("POST", f"{SYS}/unregister", ""),
        ("GET", f"{SYS}/status", ""),
    ]
    compare(servers, objects, steps)


# ----------------------------------------------------------------------------- lifetimes


def test_destroyed_while_registered(servers: dict[str, str], objects: Objects) -> None:
    """The client unlinks a registered object: both servers keep their mapping."""
    key = new_key()
    h = shm.create_shared_memory_region("early", key, 64)
    shm.set_shared_memory_region(h, [np.arange(16, dtype=np.float32)])
    for url in servers.values():
        assert exchange(url, *register("early", key, 64)).status == 200
    shm.destroy_shared_memory_region(h)  # unlinked: gone from /dev/shm
    assert not (DEV_SHM / key.lstrip("/")).exists()
    steps: list[Step] = [
        register("out0", objects.keys["b"], 4096),
        infer(
            "identity_all",
            [shm_input("IN_FP32", "FP32", [16], region="early", size=64)],
            [shm_output("OUT_FP32", region="out0", size=64)],
        ),
        ("GET", f"{SYS}/region/early/status", ""),
        ("POST", f"{SYS}/region/early/unregister", ""),
        register("again", key, 64),  # the key names nothing any more
        ("GET", f"{SYS}/status", ""),
    ]
    compare(servers, objects, steps)


def test_unregister_while_in_use(servers: dict[str, str], objects: Objects) -> None:
    """A request reads one region and writes another: neither can go until it is done."""
    k = objects.keys
    shm.set_shared_memory_region(objects.handles["e"], [np.array([600], np.int32)])
    objects.baseline["e"] = shm.get_contents_as_numpy(
        objects.handles["e"], np.uint8, [4096]
    ).tobytes()
    slow = infer(
        "slow_model",
        [shm_input("DELAY_MS", "INT32", [1], region="qin", size=4)],
        [shm_output("OUTPUT0", region="qout", size=4, offset=8)],
    )
    answers = {}
    for side, url in servers.items():
        objects.reset()
        for step in (register("qin", k["e"], 4096), register("qout", k["b"], 4096),
                     register("idle", k["c"], 4096)):  # fmt: skip
            assert exchange(url, *step).status == 200
        done: list[Reply] = []
        worker = threading.Thread(target=lambda u=url, d=done: d.append(exchange(u, *slow)))
        worker.start()
        time.sleep(0.25)
        during = [
            exchange(url, "POST", f"{SYS}/region/qout/unregister"),
            exchange(url, "POST", f"{SYS}/region/qin/unregister"),
            exchange(url, "POST", f"{SYS}/unregister"),
            exchange(url, "GET", f"{SYS}/status"),
        ]
        worker.join(30)
        after = [
            exchange(url, "POST", f"{SYS}/unregister"),
            exchange(url, "GET", f"{SYS}/status"),
        ]
        out = shm.get_contents_as_numpy(objects.handles["b"], np.int32, [1], offset=8)
        answers[side] = [r.key() for r in (*during, done[0], *after)] + [int(out[0])]
        del out
    assert answers["ours"] == answers["real"]
    assert answers["ours"][2][0] == 500 and b"qin ,qout ," in answers["ours"][2][2]
    assert answers["ours"][-1] == 600


# ----------------------------------------------------------------------------- concurrency


@pytest.mark.parametrize("side", ["real", "ours"])
def test_threads_and_clients_share_regions(
    servers: dict[str, str], objects: Objects, side: str
) -> None:
    """Six clients (four sync threads, two asyncio tasks) read one input region and write
    disjoint slots of one output region, while regions come and go beside them."""
    import asyncio

    import tritonhttp as httpclient
    import tritonhttp.aio as aioclient

    url = servers[side]
    k = objects.keys
    rounds = 15
    for step in (register("in0", k["a"], 4096), register("out0", k["b"], 4096)):
        assert exchange(url, *step).status == 200

    def request_parts(index: int, r: int, module: Any) -> tuple[list[Any], list[Any]]:
        offset = ((index * rounds + r) % 60) * 64  # any 16 floats of the input
        inp = module.InferInput("IN_FP32", [16], "FP32")
        inp.set_shared_memory("in0", 64, offset=offset)
        out = module.InferRequestedOutput("OUT_FP32")
        out.set_shared_memory("out0", 64, offset=index * 64)
        return [inp], [out]

    def expected(index: int, r: int) -> list[float]:
        start = ((index * rounds + r) % 60) * 16
        return [float(x) for x in range(start, start + 16)]

    failures: list[str] = []
    lock = threading.Lock()

    def check(index: int, r: int) -> None:
        got = shm.get_contents_as_numpy(
            objects.handles["b"], np.float32, [16], offset=index * 64
        ).tolist()
        if got != expected(index, r):
            with lock:
                failures.append(f"client {index} round {r}: {got[:4]}...")

    def sync_client(index: int) -> None:
        with httpclient.InferenceServerClient(url) as client:
            for r in range(rounds):
                inputs, outputs = request_parts(index, r, httpclient)
                client.infer("identity_all", inputs, outputs=outputs)
                check(index, r)

    async def aio_client(index: int) -> None:
        async with aioclient.InferenceServerClient(url) as client:
            for r in range(rounds):
                inputs, outputs = request_parts(index, r, aioclient)
                await client.infer("identity_all", inputs, outputs=outputs)
                check(index, r)

    async def aio_both() -> None:
        await asyncio.gather(aio_client(4), aio_client(5))

    stop = threading.Event()

    def churn() -> None:  # registrations of other names meanwhile
        i = 0
        while not stop.is_set():
            name = f"churn{i % 3}"
            exchange(url, *register(name, k["c"], 4096, 4096 if i % 2 else 0))
            exchange(url, "GET", f"{SYS}/status")
            exchange(url, "POST", f"{SYS}/region/{name}/unregister")
            i += 1

    threads = [threading.Thread(target=sync_client, args=(i,)) for i in range(4)]
    threads.append(threading.Thread(target=lambda: asyncio.run(aio_both())))
    churner = threading.Thread(target=churn)
    churner.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    churner.join(30)
    assert not failures, failures
    exchange(url, "POST", f"{SYS}/unregister")
    status = exchange(url, "GET", f"{SYS}/status")
    assert (status.status, status.body) == (200, b"[]")


# ----------------------------------------------------------------------------- both clients


def _as_numpy(result: Any) -> Any:
    try:
        return result.as_numpy("OUT_FP32")
    except KeyError as e:
        return f"KeyError: {e}"


def _refused_calls(client: Any, keys: dict[str, str]) -> list[Callable[[], Any]]:
    """Calls that fail on both servers (an aio client's return awaitables)."""
    return [
        lambda: client.register_system_shared_memory("in0", keys["a"], 64),
        lambda: client.get_system_shared_memory_status("nope"),
        lambda: client.register_system_shared_memory("x", "/../etc/passwd", 64),
        lambda: client.register_cuda_shared_memory("cu", base64.b64encode(bytes(64)), 0, 64),
        lambda: client.get_cuda_shared_memory_status("in0"),
    ]


def _sync_calls(url: str, keys: dict[str, str]) -> list[Any]:
    import tritonhttp as httpclient
    from tritonhttp import InferenceServerException

    seen: list[Any] = []
    with httpclient.InferenceServerClient(url) as client:
        client.register_system_shared_memory("in0", keys["a"], 4096)
        client.register_system_shared_memory("out0", keys["b"], 128, offset=0)
        seen.append(client.get_system_shared_memory_status())
        seen.append(client.get_system_shared_memory_status("in0"))
        for call in _refused_calls(client, keys):
            try:
                call()
                seen.append("no error")
            except InferenceServerException as e:
                seen.append((e.status(), e.message()))
        seen.append(client.get_cuda_shared_memory_status())
        inp = httpclient.InferInput("IN_FP32", [16], "FP32").set_shared_memory("in0", 64, 64)
        out = httpclient.InferRequestedOutput("OUT_FP32")
        out.set_shared_memory("out0", 64, offset=64)
        result = client.infer("identity_all", [inp], outputs=[out])
        seen.append(result.get_output("OUT_FP32"))
        seen.append(_as_numpy(result))
        client.unregister_system_shared_memory("in0")
        client.unregister_cuda_shared_memory()
        seen.append(client.get_system_shared_memory_status())
        client.unregister_system_shared_memory()
        seen.append(client.get_system_shared_memory_status())
    return seen


async def _aio_calls(url: str, keys: dict[str, str]) -> list[Any]:
    import tritonhttp.aio as aioclient
    from tritonhttp import InferenceServerException

    seen: list[Any] = []
    async with aioclient.InferenceServerClient(url) as client:
        await client.register_system_shared_memory("in0", keys["a"], 4096)
        await client.register_system_shared_memory("out0", keys["b"], 128, offset=0)
        seen.append(await client.get_system_shared_memory_status())
        seen.append(await client.get_system_shared_memory_status("in0"))
        for call in _refused_calls(client, keys):
            try:
                await call()
                seen.append("no error")
            except InferenceServerException as e:
                seen.append((e.status(), e.message()))
        seen.append(await client.get_cuda_shared_memory_status())
        inp = aioclient.InferInput("IN_FP32", [16], "FP32").set_shared_memory("in0", 64, 64)
        out = aioclient.InferRequestedOutput("OUT_FP32")
        out.set_shared_memory("out0", 64, offset=64)
        result = await client.infer("identity_all", [inp], outputs=[out])
        seen.append(result.get_output("OUT_FP32"))
        seen.append(_as_numpy(result))
        await client.unregister_system_shared_memory("in0")
        await client.unregister_cuda_shared_memory()
        seen.append(await client.get_system_shared_memory_status())
        await client.unregister_system_shared_memory()
        seen.append(await client.get_system_shared_memory_status())
    return seen


@pytest.mark.parametrize("flavour", ["sync", "aio"])
def test_client_calls_on_both_servers(
    servers: dict[str, str], objects: Objects, flavour: str
) -> None:
    import asyncio

    results = {}
    written = {}
    for side, url in servers.items():
        objects.reset()
        if flavour == "sync":
            results[side] = _sync_calls(url, objects.keys)
        else:
            results[side] = asyncio.run(_aio_calls(url, objects.keys))
        written[side] = objects.snapshot()["b"][:256]
    assert results["ours"] == results["real"]
    assert written["ours"] == written["real"]
    assert np.frombuffer(written["ours"][64:128], np.float32).tolist() == list(range(16, 32))
    statuses = results["ours"]
    assert statuses[0] == [
        {"name": "in0", "key": objects.keys["a"], "offset": 0, "byte_size": 4096},
        {"name": "out0", "key": objects.keys["b"], "offset": 0, "byte_size": 128},
    ]
    assert statuses[-1] == []
    # a shared-memory output carries no data: as_numpy fails as tritonclient's does
    assert statuses[-4] == {"name": "OUT_FP32", "datatype": "FP32", "shape": [16]}
    assert statuses[-3] == "KeyError: 'data'"


# ----------------------------------------------------------------------------- properties

PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(scope="module")
def three_pages() -> Iterator[shm.SharedMemoryRegion]:
    h = shm.create_shared_memory_region("prop", new_key(), 3 * PAGE)
    yield h
    shm.destroy_shared_memory_region(h)


@settings(max_examples=60, deadline=None)
@given(
    offset=st.one_of(
        st.sampled_from([0, PAGE, 2 * PAGE, 3 * PAGE, 2**63, 2**64 - PAGE]),
        st.integers(0, 2**64 - 1),
    ),
    byte_size=st.one_of(st.integers(0, 4 * PAGE), st.integers(0, 2**64 - 1)),
    wrap=st.booleans(),
)
def test_registration_answers_match(
    real_triton: Any,
    bundled_server: Any,
    three_pages: shm.SharedMemoryRegion,
    offset: int,
    byte_size: int,
    wrap: bool,
) -> None:
    """Any offset and size, including sums that wrap past 2**64 in Triton's size_t."""
    if wrap:  # make offset + byte_size wrap to something the object could hold
        byte_size = (2**64 - offset + byte_size % (3 * PAGE + 1)) % 2**64
    replies = []
    for url in (real_triton.url, bundled_server.url):
        replies.append(exchange(url, *register("prop", three_pages.shm_key, byte_size, offset)))
        exchange(url, "POST", f"{SYS}/region/prop/unregister")
    assert replies[1].key() == replies[0].key(), (offset, byte_size)


# ----------------------------------------------------------------------------- every type

TYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
         "FP16", "FP32", "FP64", "BF16", "BYTES"]  # fmt: skip


@pytest.mark.parametrize(
    ("datatype", "at"), [(t, 40) for t in TYPES] + [(t, 41) for t in ("INT32", "FP64", "BF16")]
)
def test_identity_of_every_type_through_regions(
    servers: dict[str, str], objects: Objects, datatype: str, at: int
) -> None:
    """Input at an offset of one region (also a misaligned one), output at an offset of
    another (BF16 goes through DLPack inside the model, so the zero-copy input must export
    as DLPack too)."""
    k = objects.keys
    if datatype == "BYTES":
        suffix, count, size = "STRING", 2, 13
        source, at = "d", 0  # the framed strings are at the start of their region
    else:
        suffix, count = datatype, 8
        itemsize = (
            2
            if datatype == "BF16"
            else np.dtype(
                {"BOOL": "bool"}.get(datatype, datatype.lower().replace("fp", "float"))
            ).itemsize
        )
        size, source = count * itemsize, "a"
    steps: list[Step] = [
        register("src", k[source], 4096),
        register("dst", k["b"], 4096),
        infer(
            "identity_all",
            [shm_input(f"IN_{suffix}", datatype, [count], region="src", size=size, offset=at)],
            [shm_output(f"OUT_{suffix}", region="dst", size=size + 8, offset=24)],
        ),
        infer(
            "identity_all",
            [shm_input(f"IN_{suffix}", datatype, [count], region="src", size=size, offset=at)],
            [{"name": f"OUT_{suffix}", "parameters": {"binary_data": True}}],
        ),
    ]
    compare(servers, objects, steps)
