"""The pb_utils API as model code sees it, compared with real Triton 2.51
(``tests/repos/hunt_pb_utils``): BLS request variants and the errors a BLS caller gets
(their texts; their codes differ deliberately, docs/python-models.md), tensors of every
dtype and layout, DLPack names, the type helpers, request accessors, ``initialize``
args, config helpers, the API's names, and what the HTTP client receives for each kind
of model error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import triton_python_backend_utils as pb
from tritonhttp.server import _launch

from ._http import exchange, infer, infer_body, mode_call, output, reference
from .conftest import REPOS

REPO = REPOS / "hunt_pb_utils"
ARGS: tuple[str, ...] = ()

# pbu_probe's modes, in its order (PLAIN, WITH_REQUEST, DLPACK)
MODES = [
    "bls_versions", "bls_output_order", "bls_missing_output", "bls_errors", "bls_ensemble",
    "bls_decoupled", "bls_timeout", "bls_params", "bls_preferred_memory", "bls_corr_kinds",
    "bls_async", "tensor_dtypes", "tensor_shapes", "tensor_aliasing", "tensor_dlpack",
    "type_helpers", "serialize_helpers",
    "request_fields", "init_args", "config_helpers", "api_surface", "errors_local",
    "import_time_names",
    "dl_zero_d", "dl_to_numpy", "dl_dunder", "dl_empty_name", "dl_ctor_empty_name",
    "dl_int_name", "dl_none_name", "dl_bytes_name", "dl_not_dlpack", "dl_strided",
]  # fmt: skip
REQUEST_FIELDS = MODES.index("request_fields")
#: the names of the module while it imports model.py: Triton 2.51's depend on how the
#: model was loaded (at startup or through the repository API): not compared
COMPARED = [m for m in range(len(MODES)) if MODES[m] != "import_time_names"]

# pbu_err: 0-8 an error response per code (8: none given), 20-25 raised or malformed
ERR_MODES = [*range(9), *range(20, 26)]


@pytest.fixture(scope="module")
def server() -> Iterator[_launch.BundledServer]:
    """Our server (worker processes, the default) for the whole module."""
    with _launch.running(REPO, *ARGS) as s:
        yield s


def _probe(url: str, mode: int) -> Any:
    if mode != REQUEST_FIELDS:
        return mode_call(url, "pbu_probe", mode)
    r = infer(url, "pbu_probe", ("MODE", "INT32", [1], [mode]), id="rid-1",
              parameters={"a": 1, "s": "x", "b": True, "f": 1.5},
              outputs=[{"name": "RESULT"}])  # fmt: skip
    return json.loads(output(r, "RESULT")[0]) if r.status == 200 else r.body.decode()


@pytest.mark.real_triton
@pytest.mark.parametrize("mode", COMPARED, ids=[MODES[m] for m in COMPARED])
def test_model_code_sees_what_it_sees_on_triton(real: Any, server: Any, mode: int) -> None:
    theirs = reference(_probe(real.url, mode), real)
    assert _probe(server.url, mode) == theirs


@pytest.mark.real_triton
@pytest.mark.parametrize("mode", ERR_MODES)
def test_model_errors_reach_the_client_as_on_triton(real: Any, server: Any, mode: int) -> None:
    def reply(url: str) -> tuple[int, str]:
        r = exchange(url, "POST", "/v2/models/pbu_err/infer",
                     infer_body(("MODE", "INT32", [1], [mode])))  # fmt: skip
        return r.status, r.body.decode()

    theirs = reference(reply(real.url), real)
    got = reply(server.url)
    if mode == 23:  # the constructor's words: another test's subject (response parameters)
        assert got[0] == theirs[0] == 500
        return
    assert got == theirs


def test_details(server: Any) -> None:
    """What the comparisons above pin down, spelt out."""

    def value(name: str) -> Any:
        return _probe(server.url, MODES.index(name))["value"]

    assert value("bls_errors")[4] == {"error": "code 2"}  # the callee's error response
    versions = value("bls_versions")  # -1, 1, 2, 0: only -1 and 1 exist
    assert ["error" in v["value"] for v in versions] == [False, False, True, True]
    assert value("bls_async")[0] == [["OUT", [3]]]  # asyncio.run inside a plain execute
    corr = value("bls_corr_kinds")
    assert corr[0]["type"] == corr[1]["type"] == "RuntimeError"  # -1, 2**64
    assert value("bls_preferred_memory")["attrs"] == []
    assert value("tensor_dtypes")["be_int"]["message"] == "NumPy dtype is not supported."


def test_local_rules() -> None:
    """The same rules in a plain Python session (no server)."""
    with pytest.raises(pb.TritonModelException, match="NumPy dtype is not supported"):
        pb.Tensor("t", np.arange(2, dtype=">i4"))
    source = pb.Tensor("s", np.arange(2, dtype=np.int32))
    assert pb.Tensor.from_dlpack(b"n", source).name() == "n"
    with pytest.raises(TypeError, match=r"^from_dlpack\(\): incompatible function arguments"):
        pb.Tensor.from_dlpack(None, source)  # type: ignore[arg-type]
    with pytest.raises(pb.TritonModelException, match="capsule         or have"):
        pb.Tensor.from_dlpack("u", [1])
    with pytest.raises(Exception, match="requires a buffer of at least 13 bytes"):
        pb.deserialize_bytes_tensor(b"\x09\x00\x00\x00ab")
    assert not [n for n in dir(pb.PreferredMemory(pb.TRITONSERVER_MEMORY_CPU)) if n[0] != "_"]
    assert "annotations" not in dir(pb)
    with pytest.raises(RuntimeError, match="Unable to cast Python instance to C\\+\\+ type"):
        pb.InferenceRequest(model_name="m", inputs=[], requested_output_names=[],
                            correlation_id=-1)  # fmt: skip
