"""System shared memory in the bundled server, where no side-by-side comparison applies:
the intended semantics where Triton 2.51 has bugs, zero-copy inputs, objects shrunk under
the server, leaks (mappings and descriptors of the server process), and property tests of
the bounds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from server._wire import exchange
from shm_helpers import DEV_SHM, KEY_PREFIX, new_key, region

from tritonhttp.server import _launch
from tritonhttp.server.core._errors import CoreError
from tritonhttp.server.core._shm import SharedMemoryRegistry
from tritonhttp.utils import serialize_byte_tensor
from tritonhttp.utils import shared_memory as shm

TESTS = Path(__file__).resolve().parent.parent
MODELS = TESTS / "models"
SYS = "/v2/systemsharedmemory"
PAGE = os.sysconf("SC_PAGE_SIZE")


def j(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


def register(url: str, name: str, key: str, byte_size: int, offset: int = 0) -> Any:
    body = j({"key": key, "offset": offset, "byte_size": byte_size})
    return exchange(url, "POST", f"{SYS}/region/{name}/register", body)


def identity(
    url: str,
    datatype: str,
    count: int,
    region_name: str,
    byte_size: int,
    offset: int = 0,
    out: tuple[str, int, int] | None = None,
) -> Any:
    suffix = "STRING" if datatype == "BYTES" else datatype
    inp = {
        "name": f"IN_{suffix}",
        "datatype": datatype,
        "shape": [count],
        "parameters": {
            "shared_memory_region": region_name,
            "shared_memory_byte_size": byte_size,
            "shared_memory_offset": offset,
        },
    }
    doc: dict[str, Any] = {"inputs": [inp]}
    if out is None:
        doc["outputs"] = [{"name": f"OUT_{suffix}", "parameters": {"binary_data": True}}]
    else:
        doc["outputs"] = [
            {
                "name": f"OUT_{suffix}",
                "parameters": {
                    "shared_memory_region": out[0],
                    "shared_memory_byte_size": out[1],
                    "shared_memory_offset": out[2],
                },
            }
        ]
    return exchange(url, "POST", "/v2/models/identity_all/infer", j(doc))


def binary_output(reply: Any) -> bytes:
    n = int(reply.headers["inference-header-content-length"])
    return bytes(reply.body[n:])


@pytest.fixture
def url(bundled_server: Any) -> Iterator[str]:
    yield bundled_server.url
    exchange(bundled_server.url, "POST", f"{SYS}/unregister")


def test_a_region_is_no_longer_in_use_once_its_answer_arrived(url: str) -> None:
    """Once the client has the answer of a request that read a region, the region is free:
    unregistering it at once succeeds. (A worker process used to write such an answer to
    the client itself, before the server had counted the request out of the region: the
    unregister could come first and find the region in use.)"""
    with region("r", new_key(), PAGE) as r:
        shm.set_shared_memory_region(r, [np.arange(16, dtype=np.float32)])
        for _ in range(60):
            assert register(url, "r", r.shm_key, PAGE).status == 200
            answer = identity(url, "FP32", 16, "r", 64)  # (a binary output, not in a region)
            assert answer.status == 200
            assert np.array_equal(np.frombuffer(binary_output(answer), np.float32), np.arange(16))
            reply = exchange(url, "POST", f"{SYS}/region/r/unregister")
            assert reply.status == 200, reply.body


# ----------------------------------------------------------------------------- 2.51's bugs


def test_region_offsets_are_relative_to_the_registered_offset(url: str) -> None:
    """2.51 bounded requests by offset + byte_size and added the offset twice."""
    values = np.arange(3 * PAGE // 4, dtype=np.float32)
    with region("pg", new_key(), values.nbytes) as h, region("o", new_key(), 2 * PAGE) as o:
        shm.set_shared_memory_region(h, [values])
        assert register(url, "pg", h.shm_key, PAGE, offset=PAGE).status == 200
        assert register(url, "out", o.shm_key, PAGE, offset=PAGE).status == 200
        reply = identity(url, "FP32", 4, "pg", 16, offset=8, out=("out", 16, 32))
        assert reply.status == 200, reply
        first = PAGE // 4 + 2  # element at byte PAGE + 8 of the object
        got = shm.get_contents_as_numpy(o, np.float32, [4], offset=PAGE + 32)
        assert got.tolist() == [float(first + i) for i in range(4)]
        del got
        reply = identity(url, "FP32", 4, "pg", 16, offset=PAGE - 8)
        assert reply.body == (
            b'{"error":"Invalid offset + byte size for shared memory region: \'pg\'"}'
        )
        reply = identity(url, "FP32", 4, "pg", 16, offset=PAGE)
        assert reply.body == b'{"error":"Invalid offset for shared memory region: \'pg\'"}'


def test_one_key_backs_several_regions(url: str) -> None:
    """2.51 answered 'Invalid shared memory region' for a key already registered."""
    values = np.arange(2 * PAGE // 4, dtype=np.float32)
    with region("k", new_key(), values.nbytes) as h:
        shm.set_shared_memory_region(h, [values])
        key = h.shm_key
        for name, k, offset in (
            ("first", key, 0),
            ("second", key, PAGE),
            ("bare", key.lstrip("/"), 0),
            ("slashes", "//" + key.lstrip("/"), PAGE),
        ):
            assert register(url, name, k, PAGE, offset).status == 200, name
        assert exchange(url, "POST", f"{SYS}/region/first/unregister").status == 200
        for name, start in (("second", PAGE // 4), ("bare", 0), ("slashes", PAGE // 4)):
            reply = identity(url, "FP32", 4, name, 16)
            assert reply.status == 200, reply
            got = np.frombuffer(binary_output(reply), np.float32).tolist()
            assert got == [float(start + i) for i in range(4)], name


# ----------------------------------------------------------------------------- safety


def test_an_object_shrunk_under_the_server_is_refused_not_a_crash(url: str) -> None:
    with region("t", new_key(), 2 * PAGE) as h, region("o", new_key(), PAGE) as o:
        assert register(url, "t", h.shm_key, 2 * PAGE).status == 200
        assert register(url, "o", o.shm_key, PAGE).status == 200
        assert identity(url, "UINT8", 16, "t", 16, offset=PAGE + 16).status == 200
        os.truncate(DEV_SHM / h.shm_key.lstrip("/"), PAGE)  # pages past PAGE are gone
        reply = identity(url, "UINT8", 16, "t", 16, offset=PAGE + 16)
        expected = (
            f"shared memory region 't' is no longer usable: its object '{h.shm_key}' was "
            f"truncated to {PAGE} bytes after registration"
        )
        assert (reply.status, json.loads(reply.body)) == (500, {"error": expected})
        # even the pages still there are refused (the region as registered is broken) ...
        assert identity(url, "UINT8", 16, "t", 16).status == 500
        # ... and so is an output into it
        assert register(url, "ok", o.shm_key, PAGE).status == 200
        reply = identity(url, "UINT8", 16, "ok", 16, out=("t", 16, 0))
        assert (reply.status, json.loads(reply.body)) == (500, {"error": expected})
        assert exchange(url, "GET", "/v2/health/live").status == 200
        assert exchange(url, "POST", f"{SYS}/unregister").status == 200


@pytest.mark.parametrize("isolation", ["in-process", "process"])
def test_inputs_are_views_of_the_region(bundled_server_factory: Any, isolation: str) -> None:
    """In-process, no copy: a model that changes its input in place changes the region.
    With process isolation the worker gets its own copy, as real Triton's stub does."""
    server = bundled_server_factory(
        TESTS / "repos" / "shm_in_place", f"--python-isolation={isolation}"
    )
    with region("v", new_key(), 64) as h:
        shm.set_shared_memory_region(h, [np.zeros(16, np.float32)])
        assert register(server.url, "v", h.shm_key, 64).status == 200
        doc = {
            "inputs": [{"name": "IN", "datatype": "FP32", "shape": [16], "parameters": {
                "shared_memory_region": "v", "shared_memory_byte_size": 64}}],
            "outputs": [{"name": "OUT", "parameters": {"binary_data": True}}],
        }  # fmt: skip
        reply = exchange(server.url, "POST", "/v2/models/in_place/infer", j(doc))
        assert reply.status == 200, reply
        assert np.frombuffer(binary_output(reply), np.float32).tolist() == [1.0] * 16
        got = shm.get_contents_as_numpy(h, np.float32, [16])
        assert got.tolist() == ([1.0] * 16 if isolation == "in-process" else [0.0] * 16)
        del got
        assert exchange(server.url, "POST", f"{SYS}/unregister").status == 200


# ----------------------------------------------------------------------------- leaks


def _shm_mappings(pid: int) -> list[str]:
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return [line for line in lines if KEY_PREFIX in line]


def _shm_descriptors(pid: int) -> list[str]:
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if KEY_PREFIX in target:
            found.append(f"{fd} -> {target}")
    return found


def _fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
def test_unregister_leaves_no_mapping_or_descriptor_in_the_server() -> None:
    strings = np.array([b"alpha", b"", b"\xff" * 300], dtype=object)
    framed = serialize_byte_tensor(strings).item()
    with _launch.running(MODELS) as server:
        url, pid = server.url, server.process.pid
        assert _shm_mappings(pid) == [] and _shm_descriptors(pid) == []
        before = _fd_count(pid)
        for cycle in range(12):
            with region("a", new_key(), 4 * PAGE) as a, region("b", new_key(), PAGE) as b:
                shm.set_shared_memory_region(a, [np.arange(PAGE, dtype=np.float32)])
                shm.set_shared_memory_region(b, [np.frombuffer(framed, np.uint8)])
                assert register(url, "a0", a.shm_key, 2 * PAGE).status == 200
                assert register(url, "a1", a.shm_key, 2 * PAGE, offset=2 * PAGE).status == 200
                assert register(url, "b", b.shm_key, PAGE).status == 200
                # refused registrations open and close the object too
                assert register(url, "x", a.shm_key, 8 * PAGE).status == 400
                assert register(url, "y", a.shm_key, 8, offset=3).status == 400
                assert len(_shm_mappings(pid)) == 3, _shm_mappings(pid)
                # Python's mmap keeps a duplicate descriptor per mapping (it also tells
                # the server when a client shrinks the object); unregister closes it
                assert len(_shm_descriptors(pid)) == 3, _shm_descriptors(pid)
                big = identity(url, "FP32", 2 * PAGE // 4, "a0", 2 * PAGE)  # binary out
                assert big.status == 200
                assert identity(url, "FP32", 16, "a1", 64, out=("a0", 64, 128)).status == 200
                assert (
                    identity(url, "BYTES", 3, "b", len(framed), out=("a1", PAGE, 0)).status == 200
                )
                if cycle % 3 == 0:
                    shm.destroy_shared_memory_region(a)  # the server's mapping stays valid
                    assert identity(url, "FP32", 16, "a0", 64).status == 200
                if cycle % 2:
                    for name in ("a0", "a1", "b"):
                        assert (
                            exchange(url, "POST", f"{SYS}/region/{name}/unregister").status == 200
                        )
                else:
                    assert exchange(url, "POST", f"{SYS}/unregister").status == 200
                assert _shm_mappings(pid) == [], _shm_mappings(pid)
                assert _shm_descriptors(pid) == [], _shm_descriptors(pid)
        assert _shm_descriptors(pid) == []
        assert _fd_count(pid) <= before + 2  # keep-alive sockets may come and go


# ----------------------------------------------------------------------------- properties

OBJECT_PAGES = 3


@pytest.fixture(scope="module")
def shared_object() -> Iterator[shm.SharedMemoryRegion]:
    h = shm.create_shared_memory_region("prop", new_key(), OBJECT_PAGES * PAGE)
    pattern = (np.arange(OBJECT_PAGES * PAGE) % 251).astype(np.uint8)
    shm.set_shared_memory_region(h, [pattern])
    yield h
    shm.destroy_shared_memory_region(h)


offsets = st.one_of(
    st.sampled_from([0, PAGE, 2 * PAGE, 3 * PAGE]),
    st.integers(0, 4 * PAGE),
    st.integers(2**63 - PAGE, 2**64 - 1),
)
sizes = st.one_of(st.integers(0, 4 * PAGE), st.integers(2**63, 2**64 - 1))
#: registrations that fit the object
fitting = st.sampled_from([0, PAGE, 2 * PAGE]).flatmap(
    lambda off: st.tuples(st.just(off), st.integers(1, OBJECT_PAGES * PAGE - off))
)
#: offset + byte_size wraps past 2**64 to a sum that fits (Triton adds them as size_t)
wrapping = st.tuples(
    st.one_of(st.sampled_from([PAGE, 2**62, 2**63]), st.integers(1, 2**64 - 1)),
    st.integers(0, OBJECT_PAGES * PAGE),
).map(lambda ab: (2**64 - ab[0], ab[0] + ab[1]))
registrations = st.one_of(fitting, fitting, wrapping, st.tuples(offsets, sizes))


def expected_registration(object_size: int, offset: int, byte_size: int, name: str) -> str | None:
    """What Triton answers for a registration (None: it succeeds)."""
    prefix = f"failed to register shared memory region '{name}': "
    if (offset + byte_size) % 2**64 > object_size:
        return prefix + "invalid args"
    if byte_size == 0 or offset % PAGE:
        return prefix + "unable to process address spaceInvalid argument"
    if byte_size > (1 << 47) - PAGE:
        return prefix + "unable to process address spaceCannot allocate memory"
    if offset + byte_size >= 1 << 63:
        return prefix + "unable to process address spaceValue too large for defined data type"
    return None


@settings(max_examples=300, deadline=None)
@given(
    registration=registrations,
    requests=st.lists(st.tuples(st.integers(0, 4 * PAGE), st.integers(0, 4 * PAGE)), max_size=6),
    payload=st.binary(min_size=1, max_size=64),
)
def test_registry_bounds(
    shared_object: shm.SharedMemoryRegion,
    registration: tuple[int, int],
    requests: list[tuple[int, int]],
    payload: bytes,
) -> None:
    """Registration succeeds exactly when Triton's would; every lookup inside the region
    reads and writes the object at registered offset + requested offset, every other one
    is refused with Triton's message."""
    offset, byte_size = registration
    registry = SharedMemoryRegistry()
    whole = shm.get_contents_as_numpy(shared_object, np.uint8, [OBJECT_PAGES * PAGE])
    original = whole.copy()
    try:
        expected = expected_registration(whole.size, offset, byte_size, "p")
        if expected is not None:
            with pytest.raises(CoreError) as caught:
                registry.register("p", shared_object.shm_key, offset, byte_size)
            assert caught.value.message == expected
            assert registry.status() == []
            return
        registry.register("p", shared_object.shm_key, offset, byte_size)
        for at, size in requests:
            if at >= byte_size:
                with pytest.raises(CoreError, match=r"^Invalid offset for"):
                    registry.lookup("p", at, size)
            elif at + size == 0 or at + size > byte_size:
                with pytest.raises(CoreError, match=r"^Invalid offset \+ byte size for"):
                    registry.lookup("p", at, size)
            else:
                part = registry.lookup("p", at, size)
                start = offset + at
                assert part.read().tobytes() == original[start : start + size].tobytes()
                data = payload[:size]
                part.write(data)
                assert whole[start : start + len(data)].tobytes() == data
                assert np.array_equal(whole[:start], original[:start])
                assert np.array_equal(whole[start + len(data) :], original[start + len(data) :])
                whole[:] = original
    finally:
        registry.close()
        whole[:] = original
        del whole


@settings(max_examples=40, deadline=None)
@given(
    registered_offset=st.sampled_from([0, PAGE]),
    registered_size=st.integers(1, 2 * PAGE),
    offset=st.integers(0, 2 * PAGE + 8),
    size=st.integers(0, 2 * PAGE + 8),
)
def test_server_bounds_over_http(
    bundled_server: Any,
    shared_object: shm.SharedMemoryRegion,
    registered_offset: int,
    registered_size: int,
    offset: int,
    size: int,
) -> None:
    """UINT8 identity of [offset, offset+size) of a region: the object's bytes come back,
    or Triton's bounds message does."""
    url = bundled_server.url
    assert (
        register(url, "hp", shared_object.shm_key, registered_size, registered_offset).status == 200
    )
    try:
        reply = identity(url, "UINT8", max(size, 1), "hp", size, offset=offset)
        if offset >= registered_size:
            assert reply.status == 400
            assert json.loads(reply.body) == {
                "error": "Invalid offset for shared memory region: 'hp'"
            }
        elif offset + size == 0 or offset + size > registered_size:
            assert reply.status == 400
            assert json.loads(reply.body) == {
                "error": "Invalid offset + byte size for shared memory region: 'hp'"
            }
        elif size == 0:  # an empty extent inside the region, one element asked
            assert json.loads(reply.body)["error"].endswith("Expected 1, got 0")
        else:
            assert reply.status == 200, reply
            start = registered_offset + offset
            expected = ((np.arange(start, start + size)) % 251).astype(np.uint8).tobytes()
            assert binary_output(reply) == expected
    finally:
        exchange(url, "POST", f"{SYS}/region/hp/unregister")
