"""System shared memory with process isolation (a worker process per model instance): a
large input in a client's region reaches the model mapped copy-on-write from the region's
object, not copied through the worker's arena. What must hold whatever the path: the
model's array is its own (its writes never reach the client's region, and it does not
follow later writes of the client once the request is answered), a key opened again
names the object registered (a re-created object under the same key is not read through
an old registration), and a region unregistered is gone (Triton's error).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from server._wire import Reply, exchange
from shm_helpers import new_key, region

from tritonhttp.utils import shared_memory as shm

SYS = "/v2/systemsharedmemory"
#: floats of an input large enough to be mapped (``_ipc.MAPPED_MIN``, 1 MiB; not a whole
#: number of pages)
N = (1 << 20) // 4 + 1000
NBYTES = N * 4
#: where the input starts in its region (not page aligned)
AT = 4100


def j(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


def register(url: str, name: str, key: str, byte_size: int) -> Reply:
    body = j({"key": key, "offset": 0, "byte_size": byte_size})
    return exchange(url, "POST", f"{SYS}/region/{name}/register", body)


@contextlib.contextmanager
def registered(url: str, name: str, key: str, byte_size: int) -> Iterator[None]:
    """Region ``name`` registered for the block; every region unregistered after it."""
    assert register(url, name, key, byte_size).status == 200
    try:
        yield
    finally:
        exchange(url, "POST", f"{SYS}/unregister")


def infer(url: str, mode: str, src: str, out: str | None = None, at: int = AT) -> Reply:
    """``probe`` with N floats at ``at`` of region ``src``; OUT into ``out`` (at 0) or in
    the body."""
    out_params: dict[str, Any] = {"binary_data": True}
    if out is not None:
        out_params = {"shared_memory_region": out, "shared_memory_byte_size": NBYTES}
    doc = {
        "parameters": {"mode": mode},
        "inputs": [{"name": "IN", "datatype": "FP32", "shape": [N], "parameters": {
            "shared_memory_region": src, "shared_memory_byte_size": NBYTES,
            "shared_memory_offset": at}}],
        "outputs": [{"name": "OUT", "parameters": out_params},
                    {"name": "WHERE", "parameters": {"binary_data": False}}],
    }  # fmt: skip
    return exchange(url, "POST", "/v2/models/probe/infer", j(doc))


def _header(reply: Reply) -> dict[str, Any]:
    n = int(reply.headers.get("inference-header-content-length", len(reply.body)))
    doc: dict[str, Any] = json.loads(reply.body[:n])
    return doc


def out_array(reply: Reply) -> np.ndarray[Any, Any]:
    n = int(reply.headers["inference-header-content-length"])
    return np.frombuffer(bytes(reply.body[n:]), np.float32)


def where(reply: Reply) -> str:
    """The file backing the model's input array in the worker."""
    (out,) = [o for o in _header(reply)["outputs"] if o["name"] == "WHERE"]
    return str(out["data"][0])


def put(h: shm.SharedMemoryRegion, data: np.ndarray[Any, Any], at: int = AT) -> None:
    shm.set_shared_memory_region(h, [data], offset=at)


def contents(h: shm.SharedMemoryRegion, at: int = AT) -> np.ndarray[Any, Any]:
    return shm.get_contents_as_numpy(h, np.float32, [N], offset=at).copy()


@pytest.fixture(scope="module")
def url(bundled_server_factory: Callable[..., Any], model_repo: Callable[[str], Path]) -> str:
    server = bundled_server_factory(model_repo("shm_worker"), "--python-isolation=process")
    return str(server.url)


@pytest.fixture
def data() -> np.ndarray[Any, Any]:
    return np.random.default_rng(7).random(N, dtype=np.float32)


def test_large_input_is_mapped_from_the_region_and_output_lands_in_its_region(
    url: str, data: np.ndarray[Any, Any]
) -> None:
    size = AT + NBYTES
    with region("i", new_key(), size) as i, region("o", new_key(), NBYTES) as o:
        put(i, data)
        assert register(url, "i", i.shm_key, size).status == 200
        with registered(url, "o", o.shm_key, NBYTES):  # (both unregistered after it)
            reply = infer(url, "", "i", out="o")
            assert reply.status == 200, reply
            # the model's memory is the client's object (no copy through the arena)
            assert where(reply) == "/dev/shm" + i.shm_key
            got = shm.get_contents_as_numpy(o, np.float32, [N])
            assert np.array_equal(got, data)
            del got


def test_model_writing_its_input_leaves_the_region_unchanged(
    url: str, data: np.ndarray[Any, Any]
) -> None:
    size = AT + NBYTES
    with region("w", new_key(), size) as h:
        put(h, data)
        with registered(url, "w", h.shm_key, size):
            for _ in range(2):  # (the second request sees the region as the first left it)
                reply = infer(url, "add", "w")
                assert reply.status == 200, reply
                assert np.array_equal(out_array(reply), data + 1)
                assert np.array_equal(contents(h), data)


def test_kept_input_does_not_follow_later_writes_to_the_region(
    url: str, data: np.ndarray[Any, Any]
) -> None:
    """A model that keeps its input array past the request keeps what it was given."""
    size = AT + NBYTES
    with region("k", new_key(), size) as h:
        put(h, data)
        with registered(url, "k", h.shm_key, size):
            assert infer(url, "keep", "k").status == 200
            put(h, np.full(N, -5.0, np.float32))  # the client reuses its region
            reply = infer(url, "kept", "k")
            assert reply.status == 200, reply
            assert np.array_equal(out_array(reply), data)


def test_key_registered_again_with_another_object_gives_its_data(
    url: str, data: np.ndarray[Any, Any]
) -> None:
    key = new_key()
    size = AT + NBYTES
    with region("r", key, size) as h:
        put(h, data)
        assert register(url, "r", key, size).status == 200
        assert np.array_equal(out_array(infer(url, "", "r")), data)
        assert exchange(url, "POST", f"{SYS}/region/r/unregister").status == 200
    bigger = size + 3 * 4096
    other = data[::-1].copy()
    with region("r", key, bigger) as h:
        put(h, other, at=AT + 8192)
        with registered(url, "r", key, bigger):
            reply = infer(url, "", "r", at=AT + 8192)
            assert reply.status == 200, reply
            assert np.array_equal(out_array(reply), other)


def test_object_recreated_under_a_registered_key_is_not_read(
    url: str, data: np.ndarray[Any, Any]
) -> None:
    """The client destroys its object and makes a new one under the same key while the
    region stays registered: the region still is the old object (the server's mapping),
    as in Triton; the new object under that key is never read through it."""
    key = new_key()
    size = AT + NBYTES
    with region("d", key, size) as h:
        put(h, data)
        assert register(url, "d", key, size).status == 200
    try:
        with region("d", key, size) as h2:
            put(h2, np.full(N, 9.0, np.float32))
            reply = infer(url, "", "d")
            assert reply.status == 200, reply
            assert np.array_equal(out_array(reply), data)
    finally:
        exchange(url, "POST", f"{SYS}/unregister")


def test_unregistered_region_gives_tritons_error(
    url: str,
    data: np.ndarray[Any, Any],
    real_triton_factory: Callable[..., Any],
    model_repo: Callable[[str], Path],
) -> None:
    """Unregistered while idle, then named by a request: the same answer as Triton's."""
    real = real_triton_factory(model_repo("shm_worker"))
    size = AT + NBYTES
    with region("u", new_key(), size) as h:
        put(h, data)
        replies = []
        for server_url in (real.url, url):
            assert register(server_url, "u", h.shm_key, size).status == 200
            assert infer(server_url, "", "u").status == 200
            assert exchange(server_url, "POST", f"{SYS}/region/u/unregister").status == 200
            replies.append(infer(server_url, "", "u"))
        theirs, ours = replies
        assert (ours.status, json.loads(ours.body)) == (theirs.status, json.loads(theirs.body))
        assert ours.status == 404
