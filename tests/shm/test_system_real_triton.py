"""System shared memory end to end against REAL Triton 2.51.0, next to tritonclient's utils.

Regions are made with our utils (and, side by side, with tritonclient.utils.shared_memory),
registered with the real server through tritonclient.http (the reference client), and
inference reads its inputs from and writes its outputs into them.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tritonclient.http as tc_http
import tritonclient.utils.shared_memory as tc_shm
from shm_helpers import KeyFactory, new_key, region

from tritonhttp.testing import _real_triton as rt
from tritonhttp.utils import serialize_byte_tensor
from tritonhttp.utils import shared_memory as shm

pytestmark = pytest.mark.real_triton

IDENTITY_CASES: list[tuple[str, Any]] = [
    ("BOOL", np.array([True, False, True])),
    ("UINT8", np.arange(7, dtype=np.uint8)),
    ("UINT16", np.arange(5, dtype=np.uint16) * 1000),
    ("UINT32", np.arange(5, dtype=np.uint32) << 20),
    ("UINT64", np.arange(5, dtype=np.uint64) << 40),
    ("INT8", np.arange(-3, 4, dtype=np.int8)),
    ("INT16", np.arange(-3, 4, dtype=np.int16) * 300),
    ("INT32", np.arange(-3, 4, dtype=np.int32) << 20),
    ("INT64", np.arange(-3, 4, dtype=np.int64) << 40),
    ("FP16", np.linspace(-2, 2, 9).astype(np.float16)),
    ("FP32", np.linspace(-2, 2, 9).astype(np.float32)),
    ("FP64", np.linspace(-2, 2, 9)),
    ("BF16", np.linspace(-2, 2, 9).astype(ml_dtypes.bfloat16)),
    ("STRING", np.array([b"alpha", b"", "\u00fcml\u00e4ut".encode(), b"\x00\xff"], dtype=object)),
]


def tensor_bytes(value: np.ndarray) -> int:
    if value.dtype == object:
        return len(serialize_byte_tensor(value).item())
    return value.nbytes


def triton_type(case: str) -> str:
    return "BYTES" if case == "STRING" else case


@pytest.fixture
def client(real_triton: rt.RealTriton) -> Iterator[tc_http.InferenceServerClient]:
    c = tc_http.InferenceServerClient(real_triton.url)
    try:
        yield c
    finally:
        c.unregister_system_shared_memory()
        c.close()


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def registered(
    client: tc_http.InferenceServerClient, name: str, key: str, byte_size: int
) -> Iterator[None]:
    client.register_system_shared_memory(name, key, byte_size)
    try:
        yield
    finally:
        client.unregister_system_shared_memory(name)


def identity_through_shm(
    client: tc_http.InferenceServerClient,
    case: str,
    value: np.ndarray,
    in_name: str,
    out_name: str,
    out_size: int,
    in_offset: int = 0,
    out_offset: int = 0,
) -> None:
    inp = tc_http.InferInput(f"IN_{case}", list(value.shape), triton_type(case))
    inp.set_shared_memory(in_name, tensor_bytes(value), offset=in_offset)
    out = tc_http.InferRequestedOutput(f"OUT_{case}")
    out.set_shared_memory(out_name, out_size - out_offset, offset=out_offset)
    result = client.infer("identity_all", [inp], outputs=[out])
    meta = result.get_output(f"OUT_{case}")
    # Real Triton answers a shared-memory output with its metadata only (no data).
    assert meta == {
        "name": f"OUT_{case}",
        "datatype": triton_type(case),
        "shape": list(value.shape),
    }


@pytest.mark.parametrize(("case", "value"), IDENTITY_CASES, ids=[c for c, _ in IDENTITY_CASES])
def test_identity_through_our_regions(
    client: tc_http.InferenceServerClient, key_factory: KeyFactory, case: str, value: np.ndarray
) -> None:
    size = tensor_bytes(value)
    in_name, out_name = unique("in"), unique("out")
    with (
        region(in_name, key_factory(), size + 64) as h_in,
        region(out_name, key_factory(), size + 64) as h_out,
        registered(client, in_name, h_in.shm_key, h_in.byte_size),
        registered(client, out_name, h_out.shm_key, h_out.byte_size),
    ):
        payload = serialize_byte_tensor(value) if value.dtype == object else value
        shm.set_shared_memory_region(h_in, [payload], offset=16)
        identity_through_shm(client, case, value, in_name, out_name, size + 64, 16, 32)
        dtype = np.object_ if value.dtype == object else value.dtype
        got = shm.get_contents_as_numpy(h_out, dtype, value.shape, offset=32)
        assert got.dtype == value.dtype
        assert got.tolist() == value.tolist()
        del got


def test_one_region_for_inputs_and_outputs_at_offsets(
    client: tc_http.InferenceServerClient, key_factory: KeyFactory
) -> None:
    a = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    b = np.array([0.5, 0.25, -1.0, 10.0], dtype=np.float32)
    name = unique("all")
    with (
        region(name, key_factory(), 64) as h,
        registered(client, name, h.shm_key, 64),
    ):
        shm.set_shared_memory_region(h, [a, b])
        inputs = [
            tc_http.InferInput("INPUT0", [4], "FP32").set_shared_memory(name, 16, offset=0),
            tc_http.InferInput("INPUT1", [4], "FP32").set_shared_memory(name, 16, offset=16),
        ]
        outputs = [tc_http.InferRequestedOutput("OUTPUT0"), tc_http.InferRequestedOutput("OUTPUT1")]
        outputs[0].set_shared_memory(name, 16, offset=32)
        outputs[1].set_shared_memory(name, 16, offset=48)
        client.infer("add_sub", inputs, outputs=outputs)
        got = shm.get_contents_as_numpy(h, np.float32, [2, 4], offset=32)
        assert np.array_equal(got[0], a + b) and np.array_equal(got[1], a - b)
        assert np.array_equal(shm.get_contents_as_numpy(h, np.float32, [4]), a)
        del got


def run_add_sub(
    client: tc_http.InferenceServerClient,
    make_region: Any,
    write: Any,
    read: Any,
    destroy: Any,
    a: np.ndarray,
    b: np.ndarray,
) -> np.ndarray:
    """add_sub through an input and an output region made by one of the two utils."""
    in_name, out_name = unique("in"), unique("out")
    key_in, key_out = new_key(), new_key()
    h_in, h_out = make_region(in_name, key_in, 32), make_region(out_name, key_out, 32)
    try:
        client.register_system_shared_memory(in_name, key_in, 32)
        client.register_system_shared_memory(out_name, key_out, 32)
        write(h_in, [a, b])
        inputs = [
            tc_http.InferInput("INPUT0", [4], "FP32").set_shared_memory(in_name, 16),
            tc_http.InferInput("INPUT1", [4], "FP32").set_shared_memory(in_name, 16, 16),
        ]
        outputs = [tc_http.InferRequestedOutput("OUTPUT0"), tc_http.InferRequestedOutput("OUTPUT1")]
        outputs[0].set_shared_memory(out_name, 16)
        outputs[1].set_shared_memory(out_name, 16, offset=16)
        client.infer("add_sub", inputs, outputs=outputs)
        return np.array(read(h_out, np.float32, [2, 4]))  # a copy: the region goes next
    finally:
        client.unregister_system_shared_memory(in_name)
        client.unregister_system_shared_memory(out_name)
        destroy(h_in)
        destroy(h_out)


def test_side_by_side_with_tritonclient_utils(client: tc_http.InferenceServerClient) -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    ours = run_add_sub(
        client,
        shm.create_shared_memory_region,
        shm.set_shared_memory_region,
        shm.get_contents_as_numpy,
        shm.destroy_shared_memory_region,
        a,
        b,
    )
    theirs = run_add_sub(
        client,
        tc_shm.create_shared_memory_region,
        tc_shm.set_shared_memory_region,
        tc_shm.get_contents_as_numpy,
        tc_shm.destroy_shared_memory_region,
        a,
        b,
    )
    assert np.array_equal(ours, theirs)
    assert np.array_equal(ours, np.stack([a + b, a - b]))


def test_status_reports_our_key_and_size(
    client: tc_http.InferenceServerClient, key_factory: KeyFactory
) -> None:
    name = unique("status")
    with region(name, key_factory(), 4096) as h, registered(client, name, h.shm_key, 4096):
        status = client.get_system_shared_memory_status(name)
        assert status == [{"name": name, "key": h.shm_key, "offset": 0, "byte_size": 4096}]


def test_server_refuses_a_registration_past_our_region(
    client: tc_http.InferenceServerClient, key_factory: KeyFactory
) -> None:
    name = unique("big")
    with region(name, key_factory(), 64) as h:
        with pytest.raises(tc_http.InferenceServerException, match="invalid args"):
            client.register_system_shared_memory(name, h.shm_key, 128)
        assert client.get_system_shared_memory_status() == []


def test_server_refuses_a_destroyed_key(client: tc_http.InferenceServerClient) -> None:
    key = new_key()
    h = shm.create_shared_memory_region("gone", key, 64)
    shm.destroy_shared_memory_region(h)
    with pytest.raises(tc_http.InferenceServerException, match="Unable to open shared memory"):
        client.register_system_shared_memory(unique("gone"), key, 64)


def test_destroying_a_registered_region_keeps_the_server_working(
    client: tc_http.InferenceServerClient,
) -> None:
    name, key = unique("early"), new_key()
    h = shm.create_shared_memory_region(name, key, 32)
    shm.set_shared_memory_region(h, [np.ones(4, np.float32), np.ones(4, np.float32)])
    client.register_system_shared_memory(name, key, 32)
    shm.destroy_shared_memory_region(h)  # the server keeps its own mapping
    inputs = [
        tc_http.InferInput("INPUT0", [4], "FP32").set_shared_memory(name, 16),
        tc_http.InferInput("INPUT1", [4], "FP32").set_shared_memory(name, 16, 16),
    ]
    result = client.infer("add_sub", inputs)
    assert result.as_numpy("OUTPUT0").tolist() == [2.0] * 4
    client.unregister_system_shared_memory(name)
    assert client.get_system_shared_memory_status() == []


def test_concurrent_clients_with_their_own_regions(real_triton: rt.RealTriton) -> None:
    def worker(index: int) -> bool:
        c = tc_http.InferenceServerClient(real_triton.url)
        name, key = unique(f"t{index}"), new_key()
        h = shm.create_shared_memory_region(name, key, 64)
        try:
            c.register_system_shared_memory(name, key, 64)
            for round_ in range(10):
                a = np.full(4, index, np.float32)
                b = np.full(4, round_, np.float32)
                shm.set_shared_memory_region(h, [a, b])
                inputs = [
                    tc_http.InferInput("INPUT0", [4], "FP32").set_shared_memory(name, 16),
                    tc_http.InferInput("INPUT1", [4], "FP32").set_shared_memory(name, 16, 16),
                ]
                outs = [tc_http.InferRequestedOutput("OUTPUT0")]
                outs[0].set_shared_memory(name, 16, offset=32)
                c.infer("add_sub", inputs, outputs=outs)
                got = shm.get_contents_as_numpy(h, np.float32, [4], offset=32)
                if got.tolist() != [index + round_] * 4:
                    return False
                del got
            return True
        finally:
            c.unregister_system_shared_memory(name)
            c.close()
            shm.destroy_shared_memory_region(h)

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(worker, range(4)))
