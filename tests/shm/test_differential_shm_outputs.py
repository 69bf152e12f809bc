"""Outputs into system shared memory, side by side with real Triton 2.51 on
``tests/repos/shm_worker_out`` (ours with worker processes and in-process): several
outputs into regions where one does not fit, a BYTES output into a region, an output
written over its own input's bytes, an answer from the response cache, and a decoupled
model. Each case compares the status, the body and what every region holds afterwards."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _repos import materialise
from server._wire import exchange
from shm_helpers import new_key, region

from tritonhttp.testing import _real_triton as rt
from tritonhttp.utils import shared_memory as shm

pytestmark = pytest.mark.real_triton

SYS = "/v2/systemsharedmemory"
#: floats of an input large enough for the worker to write its output itself (1 MiB+)
N = (1 << 20) // 4 + 1000
#: what a region holds before a request (a byte no output here starts with)
FILL = 0x55
#: a decoupled model (any request is refused by the HTTP /infer endpoint)
_DEC_CONFIG = """backend: "python"
model_transaction_policy { decoupled: true }
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""
_DEC_MODEL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x + 1)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""


def j(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory,
    real_triton_factory: Callable[..., Any],
    bundled_server_factory: Callable[..., Any],
) -> dict[str, str]:
    """URLs of real Triton and ours (worker processes, in-process) serving
    ``shm_worker_out`` plus ``cached`` (``place`` with the response cache) and ``dec``."""
    repo = materialise("shm_worker_out", tmp_path_factory.mktemp("shmout"))
    shutil.copytree(repo / "place", repo / "cached")
    config = (repo / "place/config.pbtxt").read_text().replace('"place"', '"cached"')
    (repo / "cached/config.pbtxt").write_text(config + "response_cache { enable: true }\n")
    (repo / "dec/1").mkdir(parents=True)
    (repo / "dec/config.pbtxt").write_text(_DEC_CONFIG)
    (repo / "dec/1/model.py").write_text(_DEC_MODEL)
    caches = rt.ensure_installed().server_dir / "caches"
    flags = (f"--cache-directory={caches}", "--cache-config=local,size=16777216")
    return {
        "real": real_triton_factory(repo, *flags).url,
        "process": bundled_server_factory(repo, *flags, "--python-isolation=process").url,
        "in-process": bundled_server_factory(repo, *flags, "--python-isolation=in-process").url,
    }


def into(name: str, byte_size: int, offset: int = 0) -> dict[str, Any]:
    return {"shared_memory_region": name, "shared_memory_byte_size": byte_size,
            "shared_memory_offset": offset}  # fmt: skip


def infer(url: str, model: str, data: np.ndarray[Any, Any], outputs: list[Any],
          inputs: list[Any] | None = None, **params: Any) -> tuple[int, bytes]:  # fmt: skip
    """``model`` with IN (``data`` as binary data unless ``inputs`` names it)."""
    tail = b""
    if inputs is None:
        inputs = [{"name": "IN", "datatype": "FP32", "shape": [data.size],
                   "parameters": {"binary_data_size": data.nbytes}}]  # fmt: skip
        tail = data.tobytes()
    doc: dict[str, Any] = {"inputs": inputs, "outputs": outputs}
    if params:
        doc["parameters"] = params
    header = j(doc).encode()
    head = {"Inference-Header-Content-Length": str(len(header))}
    reply = exchange(url, "POST", f"/v2/models/{model}/infer", header + tail, head)
    return reply.status, reply.body


Case = Callable[[str, dict[str, shm.SharedMemoryRegion], np.ndarray[Any, Any]], Any]


def run_case(servers: dict[str, str], sizes: dict[str, int], case: Case,
             prepare: Callable[[shm.SharedMemoryRegion], None] | None = None) -> None:  # fmt: skip
    """``case(url, regions, data)`` on every server with fresh regions ``sizes`` (name ->
    byte size, filled with FILL, registered whole): its answers and the regions' bytes
    afterwards are the same as real Triton's."""
    data = np.random.default_rng(3).random(N, dtype=np.float32)
    seen = {}
    for server, url in servers.items():
        handles: dict[str, shm.SharedMemoryRegion] = {}
        try:
            for name, size in sizes.items():
                handles[name] = shm.create_shared_memory_region(name, new_key(), size)
                shm.set_shared_memory_region(handles[name], [np.full(size, FILL, np.uint8)])
                if prepare is not None:
                    prepare(handles[name])
                body = j({"key": handles[name].shm_key, "offset": 0, "byte_size": size})
                reply = exchange(url, "POST", f"{SYS}/region/{name}/register", body)
                assert reply.status == 200, reply
            answers = case(url, handles, data)
            held = {n: shm.get_contents_as_numpy(h, np.uint8, [sizes[n]]).tobytes()
                    for n, h in handles.items()}  # fmt: skip
            seen[server] = (answers, held)
        finally:
            exchange(url, "POST", f"{SYS}/unregister")
            for h in handles.values():
                shm.destroy_shared_memory_region(h)
    real = seen.pop("real")
    for server, (answers, held) in seen.items():
        assert answers == real[0], server
        for name in held:
            assert held[name] == real[1][name], (server, name)


@pytest.mark.parametrize("n", [4, N], ids=["small", "large"])
@pytest.mark.parametrize("fits", [(True, False), (False, True)], ids=["second", "first"])
def test_two_outputs_into_regions_one_does_not_fit(
    servers: dict[str, str], n: int, fits: tuple[bool, bool]
) -> None:
    """HALF then OUT (the response's order), each into its own region, one 2 or 4 bytes
    short: Triton's error names it, and the other output's region is written exactly
    when Triton writes it (HALF before a failing OUT; OUT not after a failing HALF)."""

    def case(url: str, _: Any, data: np.ndarray[Any, Any]) -> Any:
        half = {"name": "HALF", "parameters": into("a", 2 if fits[0] else 1)}
        out = {"name": "OUT", "parameters": into("b", n * 4 if fits[1] else n * 4 - 4)}
        return [infer(url, "place", data[:n], order, mode="half")
                for order in ([half, out], [out, half])]  # fmt: skip

    run_case(servers, {"a": 8, "b": n * 4}, case)


@pytest.mark.parametrize("n", [4, N], ids=["small", "large"])
def test_bytes_output_into_a_region(servers: dict[str, str], n: int) -> None:
    """TXT (BYTES, 13 bytes serialised) into a region that fits it or is a byte short,
    with OUT as binary data, as JSON, or into a region of its own (fitting or not)."""

    def case(url: str, _: Any, data: np.ndarray[Any, Any]) -> Any:
        answers = []
        outs: list[dict[str, Any]] = [
            {"binary_data": True}, {"binary_data": False}, into("b", n * 4),
            into("b", n * 4 - 4)]  # fmt: skip
        for txt_size in (13, 12):
            for out in outs:
                outputs = [{"name": "TXT", "parameters": into("a", txt_size, 3)},
                           {"name": "OUT", "parameters": out}]  # fmt: skip
                answers.append(infer(url, "pair", data[:n], outputs))
        return answers

    run_case(servers, {"a": 32, "b": n * 4}, case)


@pytest.mark.parametrize("shift", [0, -4, 4096])
def test_large_output_written_over_its_own_input(servers: dict[str, str], shift: int) -> None:
    """IN read from a region and OUT (IN + 1) asked into the same region, at IN's own
    bytes, 4 bytes before them or past them: the region holds OUT there afterwards."""
    at = 8192

    def prepare(h: shm.SharedMemoryRegion) -> None:
        ramp = np.arange(N, dtype=np.float32)
        shm.set_shared_memory_region(h, [ramp], offset=at)

    def case(url: str, _: Any, data: np.ndarray[Any, Any]) -> Any:
        inputs = [{"name": "IN", "datatype": "FP32", "shape": [N],
                   "parameters": into("r", N * 4, at)}]  # fmt: skip
        outputs = [{"name": "OUT", "parameters": into("r", N * 4, at + shift)}]
        return [infer(url, "place", data, outputs, inputs) for _ in range(2)]

    run_case(servers, {"r": 2 * at + N * 4}, case, prepare)


@pytest.mark.parametrize("n", [4, N], ids=["small", "large"])
def test_answer_from_the_response_cache_writes_the_region(servers: dict[str, str], n: int) -> None:
    """The same request three times to a model with the response cache, OUT into a
    different region each time: the answers from the cache write their regions too."""

    def case(url: str, _: Any, data: np.ndarray[Any, Any]) -> Any:
        return [infer(url, "cached", data[:n], [{"name": "OUT", "parameters": into(r, n * 4, 4)}])
                for r in ("a", "b", "c")]  # fmt: skip

    run_case(servers, {r: n * 4 + 8 for r in "abc"}, case)


def test_decoupled_model_with_an_output_into_a_region_is_refused(
    servers: dict[str, str],
) -> None:
    """/infer to a decoupled model: Triton's 501, the region untouched."""

    def case(url: str, _: Any, data: np.ndarray[Any, Any]) -> Any:
        return infer(url, "dec", data[:4], [{"name": "OUT", "parameters": into("a", 16)}])

    run_case(servers, {"a": 16}, case)


def test_answer_from_the_cache_with_an_output_too_large_for_its_region(
    servers: dict[str, str],
) -> None:
    """A cached answer whose OUT does not fit the region asked: the region is not
    written on any server; ours answers the error a computed answer gets (Triton runs
    the model again and puts OUT in the body instead: see docs/shared-memory.md)."""
    data = np.arange(4, dtype=np.float32)
    expected = (
        "shared memory size specified with the request for output 'OUT' (12 bytes) "
        "should be at least 16 bytes to hold the results"
    )
    for server, url in servers.items():
        with region("z", new_key(), 16) as h:
            shm.set_shared_memory_region(h, [np.full(16, FILL, np.uint8)])
            body = j({"key": h.shm_key, "offset": 0, "byte_size": 16})
            assert exchange(url, "POST", f"{SYS}/region/z/register", body).status == 200
            try:
                fits = infer(url, "cached", data, [{"name": "OUT", "parameters": into("z", 16)}])
                assert fits[0] == 200, (server, fits)
                shm.set_shared_memory_region(h, [np.full(16, FILL, np.uint8)])
                status, text = infer(url, "cached", data,
                                     [{"name": "OUT", "parameters": into("z", 12)}])  # fmt: skip
            finally:
                exchange(url, "POST", f"{SYS}/unregister")
            assert (shm.get_contents_as_numpy(h, np.uint8, [16]) == FILL).all(), server
            if server != "real":
                assert (status, json.loads(text)) == (500, {"error": expected}), server
