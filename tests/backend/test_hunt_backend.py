"""What model code meets in pb_utils and around execute, compared with real Triton 2.51
(``tests/repos/backend_hunt``): DLPack copies, BYTES tensors of strided arrays, BLS
requests Triton refuses, the words of its constructor errors, response iterators,
``sys.exit`` and ``KeyboardInterrupt`` in model code."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ._http import exchange, infer, load, mode_call
from .conftest import REPOS

REPO = REPOS / "backend_hunt"
ARGS = (
    "--model-control-mode=explicit",
    "--load-model=hunt_probe",
    "--load-model=hunt_callee",
    "--load-model=hunt_dec",
    "--load-model=hunt_exit",
)
PROBES = ["dlpack_copies", "bls_output_from_dlpack", "strided_strings", "duplicate_inputs",
          "bad_constructor_arguments", "partly_consumed_iterators", "shown_as"]  # fmt: skip


def _reply(url: str, model: str, mode: int) -> tuple[int, bytes]:
    r = infer(url, model, ("MODE", "INT32", [1], [mode]))
    return r.status, r.body


@pytest.mark.real_triton
@pytest.mark.parametrize("mode", range(len(PROBES)), ids=PROBES)
def test_model_code_sees_what_it_sees_on_triton(real: Any, server: Any, mode: int) -> None:
    assert mode_call(server.url, "hunt_probe", mode) == mode_call(real.url, "hunt_probe", mode)


def test_details(server: Any) -> None:
    """What the comparisons above pin down, spelt out."""
    dl = mode_call(server.url, "hunt_probe", 0)
    assert dl["capsule"]["writeable"] and dl["tensor"]["writeable"] and dl["fp16"]["writeable"]
    assert dl["after"] == [[0, 1, 30], [10, 1, 2], [0, 20, 2]]  # three independent arrays
    assert mode_call(server.url, "hunt_probe", 2)["c"] is True
    assert mode_call(server.url, "hunt_probe", 3) == [
        {"error": "Model hunt_callee - Error when running inference: [request id: "
                  "<id_unknown>] input 'IN' already exists in request"},
        {"error": "Model hunt_callee - Error when running inference: [request id: dup-7] "
                  "input 'IN' already exists in request"},
    ]  # fmt: skip
    errors = mode_call(server.url, "hunt_probe", 4)
    assert errors[0]["message"] == "Expect N8pybind114dictE, got <class 'str'>"
    assert errors[2]["message"].endswith(
        "\n\nInvoked with: kwargs: model_name='hunt_callee', model_version='1', "
        "inputs=[<c_python_backend_utils.Tensor object at 0x?>], requested_output_names=['OUT']"
    )
    assert "inputs: List[triton::backend::python::PbTensor]" in errors[2]["message"]
    it = mode_call(server.url, "hunt_probe", 5)
    assert [r["OUT"] for r in it["rest"][:2]] == [[1], [2]]
    assert it["again"] == [{"OUT": [0]}, {"OUT": [1]}, {"OUT": [2]}, {}]  # ended: replays


def test_an_error_only_stream_ends(server: Any) -> None:
    """A BLS ``exec(decoupled=True)`` whose callee sends only an error response and then
    FINAL: Triton 2.51 never returns from it (its defect, not copied)."""
    assert mode_call(server.url, "hunt_probe", 7) == [{"error": "negative"}, {}]


@pytest.mark.real_triton
@pytest.mark.parametrize(
    ("mode", "raised"), [(1, "SystemExit: 4"), (2, "KeyboardInterrupt: interrupted")]
)
def test_exit_and_interrupt_in_execute_are_errors(
    real: Any, server: Any, mode: int, raised: str
) -> None:
    theirs = _reply(real.url, "hunt_exit", mode)
    assert _reply(server.url, "hunt_exit", mode) == theirs
    assert theirs[0] == 500
    assert json.loads(theirs[1])["error"].startswith(
        f"Failed to process the request(s) for model 'hunt_exit_0', message: {raised}\n\nAt:\n"
    )
    assert _reply(server.url, "hunt_exit", 0) == _reply(real.url, "hunt_exit", 0)  # goes on


@pytest.mark.real_triton
def test_exit_in_initialize_is_a_load_error(real: Any, server: Any) -> None:
    theirs = load(real.url, "hunt_init_exit")
    assert load(server.url, "hunt_init_exit") == theirs
    assert theirs[0] == 400
    assert "Internal: SystemExit: 5\n\nAt:\n" in json.loads(theirs[1])["error"]
    assert exchange(server.url, "GET", "/v2/health/live").status == 200
