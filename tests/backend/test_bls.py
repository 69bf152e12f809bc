"""BLS and model control from a model (python-backend spec §2.13, §3.16), on real Triton
2.51 and on our server in both isolation modes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from ._http import instance_agnostic, mode_call, reference
from .conftest import Start

EXPLICIT = ("--model-control-mode=explicit", "--load-model=caller", "--load-model=echo_params",
            "--load-model=dec_square")  # fmt: skip

# caller: 0 add_sub, 1 unknown model, 2 missing input, 3 wrong dtype, 4 wrong shape,
# 5 unknown output, 6 callee error response, 7 callee raises, 8 decoupled callee without
# decoupled=True, 9 decoupled iterator (bare FINAL), 10 decoupled=True on a plain callee,
# 11 no requested outputs, 12 FINAL on the last data response, 13/14 request fields and
# parameters reach the callee, 15 zero responses, 16 missing version; 100+ model control
CALLER_MODES = [*range(17), 100, 104]

# Triton 2.51 answers these model-control errors, then aborts on the model's next call
# (python-backend spec §2.11, a bug not copied): compared with its recorded answers.
RECORDED = {
    101: "Failed to check model readiness: Failed to process the request for model "
    "'caller_0_N', message: failed to get model version from specified version string 'x' "
    "(details: stol), version should be an integral value > 0",
    102: "Failed to load model: Failed to process the request for model 'caller_0_N', "
    "message: explicit model load / unload is not allowed if polling is enabled",
    103: "Failed to unload model: Failed to process the request for model 'caller_0_N', "
    "message: explicit model load / unload is not allowed if polling is enabled",
}


@pytest.fixture(scope="module")
def repo(model_repo: Any) -> Path:
    """``tests/repos/backend_bls``, materialised."""
    return Path(model_repo("backend_bls"))


@pytest.fixture
def real(real_triton_factory: Any, repo: Path) -> Any:
    # per test: the pool starts real Triton again if ``reference`` stopped a hung one
    return real_triton_factory(repo)


@pytest.mark.real_triton
@pytest.mark.parametrize("mode", CALLER_MODES)
def test_exec_matches_triton(real: Any, ours: Start, repo: Path, mode: int) -> None:
    got = mode_call(ours(repo).url, "caller", mode)
    theirs = reference(mode_call(real.url, "caller", mode), real)
    assert instance_agnostic(got) == instance_agnostic(theirs)


@pytest.mark.parametrize("mode", sorted(RECORDED))
def test_model_control_errors_match_triton(ours: Start, repo: Path, mode: int) -> None:
    got = mode_call(ours(repo).url, "caller", mode)
    assert instance_agnostic(got) == {"exception": RECORDED[mode]}
    assert mode_call(ours(repo).url, "caller", 0)["outputs"]  # and the server carries on


@pytest.mark.real_triton
@pytest.mark.parametrize("mode", range(17))
def test_async_exec_matches_triton(real: Any, ours: Start, repo: Path, mode: int) -> None:
    got = mode_call(ours(repo).url, "caller_async", mode)
    assert got == reference(mode_call(real.url, "caller_async", mode), real)


@pytest.mark.real_triton
def test_bls_outside_execute_is_refused(real: Any, ours: Start, repo: Path) -> None:
    got = mode_call(ours(repo).url, "bls_in_init", 0)
    assert got == mode_call(real.url, "bls_in_init", 0)
    assert got == "BLS is only supported during the 'execute' function."


def test_results_in_detail(ours: Start, repo: Path) -> None:
    url = ours(repo).url
    assert mode_call(url, "caller", 0) == {
        "outputs": {"OUTPUT0": [0.0, 1.0, 2.0, 3.0], "OUTPUT1": [2.0, 3.0, 4.0, 5.0]}
    }
    assert mode_call(url, "caller", 9) == {
        "responses": [{"outputs": {"OUT": [i]}} for i in range(3)] + [{"outputs": {}}],
        "replayed": True,
    }
    assert mode_call(url, "caller", 13) == {"outputs": {"OUT": [
        '{"corr": 5, "flags": 3, "id": "bls-7", "params": {"a": 1, "b": true, "c": "s"}, '
        '"requested": ["OUT"], "timeout": 11000000000}'
    ]}}  # fmt: skip
    assert mode_call(url, "caller", 1) == {"error": "Model nope - Error when running inference: "
        "Failed for execute the inference request. Model 'nope' is not ready."}  # fmt: skip
    assert mode_call(url, "caller", 6) == {"error": "custom not found"}


@pytest.mark.real_triton
def test_model_control_in_explicit_mode(real_triton_factory: Any, ours: Start, repo: Path) -> None:
    """load_model / is_model_ready / unload_model from a model, and BLS into the model it
    loaded."""
    servers = [real_triton_factory(repo, *EXPLICIT), ours(repo, *EXPLICIT)]
    steps: list[list[Any]] = []
    for server in servers:
        seen = [mode_call(server.url, "caller", 100)]  # add_sub not loaded yet
        seen.append(mode_call(server.url, "caller", 0))  # BLS: not ready
        seen.append(mode_call(server.url, "caller", 102))  # load_model("add_sub")
        seen.append(mode_call(server.url, "caller", 100))
        seen.append(mode_call(server.url, "caller", 0))  # BLS works now
        seen.append(mode_call(server.url, "caller", 103))  # unload_model("add_sub")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ready = mode_call(server.url, "caller", 100)
            if not ready["ready"]:
                break
            time.sleep(0.05)
        seen.append(ready)
        steps.append(instance_agnostic(seen))
    assert steps[1] == steps[0]
    assert steps[1][2] == {"ok": True} and steps[1][3]["ready"] is True
    assert "outputs" in steps[1][4] and steps[1][6]["ready"] is False
