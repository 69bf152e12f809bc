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


# ------------------------------------------------------------------ outputs into regions
#
# A large output the client asks into a system region is written there by the worker
# itself (no copy through its arena and then by the server). The ``place`` model shows
# when: in ``peek`` mode it sends its response and then reads the client's object while
# its ``execute`` still runs. Whatever the path, the answers, errors and what the regions
# hold afterwards are the server's as before: a region too small, or whose key names
# another object now, is never written by the worker; a model that fails writes nothing.


@pytest.fixture(scope="module")
def place_url(bundled_server_factory: Callable[..., Any], model_repo: Callable[[str], Path]) -> str:
    server = bundled_server_factory(model_repo("shm_worker_out"), "--python-isolation=process")
    return str(server.url)


def register_at(url: str, name: str, key: str, offset: int, byte_size: int) -> Reply:
    body = j({"key": key, "offset": offset, "byte_size": byte_size})
    return exchange(url, "POST", f"{SYS}/region/{name}/register", body)


def infer_place(
    url: str, data: np.ndarray[Any, Any], out: dict[str, Any] | None, **params: Any
) -> Reply:
    """``place`` with ``data`` as IN in the body; OUT with the parameters ``out`` (None:
    in the body)."""
    header = j({
        "parameters": params,
        "inputs": [{"name": "IN", "datatype": "FP32", "shape": [data.size],
                    "parameters": {"binary_data_size": data.nbytes}}],
        "outputs": [{"name": "OUT", "parameters": out or {"binary_data": True}}],
    }).encode()  # fmt: skip
    head = {"Inference-Header-Content-Length": str(len(header))}
    return exchange(url, "POST", "/v2/models/place/infer", header + data.tobytes(), head)


def seen(url: str) -> np.ndarray[Any, Any]:
    """What the client's object held while the last ``peek`` request ran."""
    reply = infer_place(url, np.zeros(1, np.float32), None, mode="seen")
    assert reply.status == 200, reply
    return out_array(reply)


def into(name: str, offset: int, byte_size: int = NBYTES) -> dict[str, Any]:
    return {"shared_memory_region": name, "shared_memory_offset": offset,
            "shared_memory_byte_size": byte_size}  # fmt: skip


def test_large_output_is_in_its_region_before_execute_returns(
    place_url: str, data: np.ndarray[Any, Any]
) -> None:
    """Registered at a page offset of its object, OUT at an offset that is not page
    aligned: the worker writes those very bytes of the object (the region holds them
    while the model still runs), and the answer is the server's as ever."""
    base = 2 * 4096
    size = base + AT + NBYTES
    key = new_key()
    with region("p", key, size) as h, registered_at(place_url, "p", key, base, AT + NBYTES):
        reply = infer_place(place_url, data, into("p", AT), mode="peek", key=key,
                            at=base + AT)  # fmt: skip
        assert reply.status == 200, reply
        outputs = json.loads(reply.body)["outputs"]
        assert outputs == [{"name": "OUT", "datatype": "FP32", "shape": [N]}]
        assert np.array_equal(contents(h, base + AT), data + 1)
        assert np.array_equal(seen(place_url), data + 1)
        # the bytes around it are the client's still
        assert not shm.get_contents_as_numpy(h, np.uint8, [base + AT]).any()


def test_output_too_large_for_its_region_gives_the_error_and_is_never_written(
    place_url: str, data: np.ndarray[Any, Any]
) -> None:
    """OUT is 4 bytes over the byte size the request gives (its object has room for it
    all): the server's error, and neither the worker nor the server writes it."""
    key = new_key()
    size = AT + NBYTES
    with region("t", key, size) as h, registered_at(place_url, "t", key, 0, size):
        reply = infer_place(place_url, data, into("t", AT, NBYTES - 4), mode="peek",
                            key=key, at=AT)  # fmt: skip
        expected = (
            "shared memory size specified with the request for output 'OUT' "
            f"({NBYTES - 4} bytes) should be at least {NBYTES} bytes to hold the results"
        )
        assert (reply.status, json.loads(reply.body)) == (500, {"error": expected}), reply
        assert not seen(place_url).any()
        assert not shm.get_contents_as_numpy(h, np.uint8, [size]).any()


def test_output_into_a_region_whose_object_was_recreated_goes_to_the_registered_one(
    place_url: str, data: np.ndarray[Any, Any]
) -> None:
    """The client re-creates the object under a registered key: the region still is the
    object registered (the server's mapping); the new object is never written."""
    key = new_key()
    size = AT + NBYTES
    with region("d", key, size):
        assert register_at(place_url, "d", key, 0, size).status == 200
    try:
        with region("d", key, size) as h2:
            put(h2, np.full(N, 9.0, np.float32))
            reply = infer_place(place_url, data, into("d", AT), mode="peek", key=key, at=AT)
            assert reply.status == 200, reply
            assert np.array_equal(seen(place_url), np.full(N, 9.0, np.float32))
            assert np.array_equal(contents(h2), np.full(N, 9.0, np.float32))
    finally:
        exchange(place_url, "POST", f"{SYS}/unregister")


@pytest.mark.parametrize("mode", ["raise", "error"])
def test_model_failing_leaves_the_output_region_as_it_was(
    mode: str,
    place_url: str,
    data: np.ndarray[Any, Any],
    real_triton_factory: Callable[..., Any],
    model_repo: Callable[[str], Path],
) -> None:
    """A model that raises, or answers an error with its outputs: Triton's answer, and
    the region keeps what the client put there (on both servers)."""
    real = real_triton_factory(model_repo("shm_worker_out"))
    size = AT + NBYTES
    before = np.full(N, 7.0, np.float32)
    replies = []
    for server_url in (real.url, place_url):
        key = new_key()
        with region("f", key, size) as h, registered_at(server_url, "f", key, 0, size):
            put(h, before)
            replies.append(infer_place(server_url, data, into("f", AT), mode=mode))
            assert np.array_equal(contents(h), before)
    theirs, ours = replies
    assert (ours.status, ours.body) == (theirs.status, theirs.body)
    assert ours.status != 200


def test_response_refused_for_another_output_has_written_the_region_as_triton(
    place_url: str,
    data: np.ndarray[Any, Any],
    real_triton_factory: Callable[..., Any],
    bundled_server_factory: Callable[..., Any],
    model_repo: Callable[[str], Path],
) -> None:
    """The model returns HALF (FP16, asked as JSON, which the front end refuses) and OUT
    (IN + 1, into a region): Triton's error, and OUT's region holds OUT all the same, as
    Triton's backend has filled it before its front end encodes the JSON (on every
    server: ours writes it from the worker, or in-process from the front end; HALF asked
    before and after OUT)."""
    real = real_triton_factory(model_repo("shm_worker_out"))
    in_process = bundled_server_factory(
        model_repo("shm_worker_out"), "--python-isolation=in-process"
    )
    expected = (
        "sending FP16 data via JSON is not supported. Please use the binary data format for output"
    )
    half = {"name": "HALF", "parameters": {"binary_data": False}}
    for server_url in (real.url, place_url, in_process.url):
        for half_first in (True, False):
            key = new_key()
            with region("h", key, NBYTES) as h, registered_at(server_url, "h", key, 0, NBYTES):
                outputs = [{"name": "OUT", "parameters": into("h", 0)}]
                outputs.insert(0 if half_first else 1, half)
                header = j({
                    "parameters": {"mode": "half"},
                    "inputs": [{"name": "IN", "datatype": "FP32", "shape": [N],
                                "parameters": {"binary_data_size": NBYTES}}],
                    "outputs": outputs,
                }).encode()  # fmt: skip
                head = {"Inference-Header-Content-Length": str(len(header))}
                reply = exchange(server_url, "POST", "/v2/models/place/infer",
                                 header + data.tobytes(), head)  # fmt: skip
                assert (reply.status, json.loads(reply.body)) == (400, {"error": expected})
                assert np.array_equal(contents(h, 0), data + 1), (server_url, half_first)


@contextlib.contextmanager
def registered_at(url: str, name: str, key: str, offset: int, byte_size: int) -> Iterator[None]:
    """Region ``name`` registered at ``offset`` of ``key``; every region unregistered after."""
    assert register_at(url, name, key, offset, byte_size).status == 200
    try:
        yield
    finally:
        exchange(url, "POST", f"{SYS}/unregister")


def test_output_onto_its_own_input_shifted_is_the_input_as_given(
    url: str, data: np.ndarray[Any, Any]
) -> None:
    """OUT (the model's input array itself) goes into the input's own region, 4 bytes
    past the input: the region ends up holding the input as the model got it, not one
    smeared by a write running over the pages the model's array still shares."""
    size = AT + NBYTES + 4096
    with region("s", new_key(), size) as h:
        put(h, data)
        with registered(url, "s", h.shm_key, size):
            doc = {
                "inputs": [{"name": "IN", "datatype": "FP32", "shape": [N], "parameters": {
                    "shared_memory_region": "s", "shared_memory_byte_size": NBYTES,
                    "shared_memory_offset": AT}}],
                "outputs": [{"name": "OUT", "parameters": {
                    "shared_memory_region": "s", "shared_memory_byte_size": NBYTES,
                    "shared_memory_offset": AT + 4}}],
            }  # fmt: skip
            reply = exchange(url, "POST", "/v2/models/probe/infer", j(doc))
            assert reply.status == 200, reply
            assert np.array_equal(contents(h, AT + 4), data)
