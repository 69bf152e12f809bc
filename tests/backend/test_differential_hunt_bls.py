"""The arguments of a BLS request as a model passes them, compared with real Triton 2.51
(``tests/repos/hunt_bls``): ``InferenceRequest(...)`` takes what pybind11 converts for
the stub's C++ types (bytes for strings, NumPy integers and number-like objects for
integers in the C type's range, any sequence for lists, not an explicit None for
``preferred_memory``/``trace``), ``exec``/``async_exec`` refuse what is no bool with
pybind11's words, and an integer parameter outside int64 makes the call answer an error
response."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import triton_python_backend_utils as pb

from ._http import instance_agnostic, mode_call, reference
from .conftest import Start

# hb_probe's groups, in its order
GROUPS = ["ctor", "positional", "exec_args", "edges", "exec_bools", "async_args"]


@pytest.fixture(scope="module")
def repo(model_repo: Any) -> Path:
    """``tests/repos/hunt_bls``, materialised."""
    return Path(model_repo("hunt_bls"))


@pytest.mark.real_triton
@pytest.mark.parametrize("group", GROUPS)
def test_bls_arguments_match_triton(
    real_triton_factory: Any, ours: Start, repo: Path, group: str
) -> None:
    real = real_triton_factory(repo)
    mode = GROUPS.index(group)
    got = mode_call(ours(repo).url, "hb_probe", mode)
    theirs = reference(mode_call(real.url, "hb_probe", mode), real)
    assert instance_agnostic(got) == instance_agnostic(theirs)


def _request(**kw: Any) -> pb.InferenceRequest:
    args: dict[str, Any] = {"model_name": "m", "inputs": [], "requested_output_names": ["O"]}
    args.update(kw)
    return pb.InferenceRequest(**args)


def test_constructor_conversions() -> None:
    """What the constructor keeps of arguments pybind11 converts (no server needed)."""
    r = _request(request_id=b"rid", correlation_id=True, flags=np.int32(3),
                 timeout=np.float32(4), model_version=np.int64(2),
                 requested_output_names=collections.deque([b"A", "B"]))  # fmt: skip
    assert (r.request_id(), r.correlation_id(), r.flags(), r.timeout()) == ("rid", 1, 3, 4)
    assert type(r.correlation_id()) is int and type(r.flags()) is int
    assert r.requested_output_names() == {"A", "B"}
    assert _request(inputs=np.array([], dtype=object)).inputs() == []
    for bad in ({"flags": -1}, {"flags": 2**32}, {"timeout": -1}, {"timeout": 2**64},
                {"model_version": 2**63}, {"requested_output_names": {"O"}},
                {"preferred_memory": None}, {"trace": None}):  # fmt: skip
        with pytest.raises(TypeError, match=r"^__init__\(\): incompatible constructor"):
            _request(**bad)


def test_exec_arguments() -> None:
    """``exec``/``async_exec`` check their arguments before anything runs."""
    r = _request()
    for call, args, kwargs in ((r.exec, ("yes",), {}), (r.exec, (None,), {}),
                               (r.async_exec, ([],), {}),
                               (r.exec, (), {"decoupled": False, "timeout": 5})):  # fmt: skip
        name = call.__name__
        with pytest.raises(TypeError) as info:
            call(*args, **kwargs)
        assert str(info.value).startswith(
            f"{name}(): incompatible function arguments. The following argument types are "
            "supported:\n    1. (self: c_python_backend_utils.InferenceRequest, decoupled: "
            "bool = False) -> object\n\nInvoked with: <c_python_backend_utils.InferenceRequest "
            "object at 0x"
        )
    with pytest.raises(TypeError, match=r"Invoked with: 5$"):
        pb.InferenceRequest.exec(5)  # type: ignore[arg-type, unused-ignore]
