"""The words of what a model meets when it calls the response sender, ``InferenceResponse``
or ``Tensor`` with arguments of the wrong kind, compared with real Triton 2.51
(``tests/repos/hunt_sender``): pybind11's ``TypeError`` texts, each ending with the
``Invoked with: ...`` line that names the call's arguments (the sender itself first), and
the flag values pybind11 takes as a C ``uint32_t``."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

import triton_python_backend_utils as pb_utils
from triton_python_backend_utils._request import InferenceResponseSender

from ._http import exchange
from .conftest import REPOS

REPO = REPOS / "hunt_sender"
ARGS = ()
SEND_ARGS = (
    "send(): incompatible function arguments. The following argument types are supported:\n"
    "    1. (self: c_python_backend_utils.InferenceResponseSender, response: "
    "c_python_backend_utils.InferenceResponse = None, flags: int = 0) -> None\n\n"
    "Invoked with: <c_python_backend_utils.InferenceResponseSender object at 0x?>"
)


def _outcomes(url: str) -> list[str]:
    """What each call of the model's ``_calls`` raised or returned, as the model says it."""
    out = []
    for index in range(100):
        body = json.dumps({"IN": [index]})
        r = exchange(url, "POST", "/v2/models/sender_types/generate_stream", body)
        assert r.status == 200, r.body
        events = r.events()
        # (a one-element output reads as its element)
        texts = [str(e.get("TEXT", "<sent>")) for e in events]
        if texts == ["END"]:
            return out
        out.append(" | ".join(texts))
    raise AssertionError("no END")


def _comparable(text: str) -> str:
    text = re.sub("0x[0-9a-f]+", "0x?", text)
    # (numpy 2 shows a scalar as np.int32(5); the real server's numpy 1 as 5)
    text = re.sub(r"np\.\w+\(([^()]*)\)", r"\1", text)
    # (InferenceResponse takes parameters, a Triton 2.52 feature, and lists them)
    return text.replace(", parameters: object = None)", ")")


@pytest.mark.real_triton
def test_wrong_arguments_read_as_on_triton(real: Any, server: Any) -> None:
    theirs = [_comparable(t) for t in _outcomes(real.url)]
    ours = [_comparable(t) for t in _outcomes(server.url)]
    assert len(ours) == len(theirs)
    for index, (o, t) in enumerate(zip(ours, theirs, strict=True)):
        assert o == t, index


def test_outcomes(server: Any) -> None:
    """What the comparison above pins down, spelt out for a few calls."""
    out = [re.sub("0x[0-9a-f]+", "0x?", t) for t in _outcomes(server.url)]
    assert out[0] == f"TypeError: {SEND_ARGS}, 'nope'"
    assert out[1] == f"TypeError: {SEND_ARGS}; kwargs: response='nope'"
    assert out[2].endswith("Invoked with: <c_python_backend_utils.InferenceResponseSender "
                           "object at 0x?>, <c_python_backend_utils.InferenceResponse object "
                           "at 0x?>, 'x'")  # fmt: skip
    assert out[19].endswith("\n\nInvoked with: 'x'")
    assert out[27] == "no error: 'x'"  # (a bytes name is taken)
    assert out[33] == "<sent>"  # flags=np.float32(1) is FINAL


def _sender() -> InferenceResponseSender:
    return InferenceResponseSender(None)


@pytest.mark.parametrize(
    ("args", "kwargs", "shown"),
    [
        (("nope",), {}, ", 'nope'"),
        ((), {"response": "nope"}, "; kwargs: response='nope'"),
        ((None, "1"), {}, ", None, '1'"),
        ((None,), {"flags": 1.5}, ", None; kwargs: flags=1.5"),
        ((None,), {"flags": -1}, ", None; kwargs: flags=-1"),
        ((None, 2**32), {}, ", None, 4294967296"),
        ((None, 0, 3), {}, ", None, 0, 3"),
        ((), {"bogus": 1}, "; kwargs: bogus=1"),
    ],
)
def test_send_type_errors(args: tuple[Any, ...], kwargs: dict[str, Any], shown: str) -> None:
    sender = _sender()
    with pytest.raises(TypeError) as info:
        sender.send(*args, **kwargs)
    assert re.sub("0x[0-9a-f]+", "0x?", str(info.value)) == SEND_ARGS + shown


@pytest.mark.parametrize("flags", [np.int64(1), np.float32(1), True, 1])
def test_send_takes_flags_as_pybind11(flags: Any) -> None:
    """Flags pybind11 reads as 1 (FINAL): the sender goes on to its own checks."""
    with pytest.raises(pb_utils.TritonModelException, match="no reference to the decoupled"):
        _sender().send(None, flags)


@pytest.mark.parametrize(
    ("args", "kwargs", "shown"),
    [
        (("x",), {}, "'x'"),
        ((), {}, ""),
        ((1, np.zeros(1)), {}, "1, array([0.])"),
        (("x", np.zeros(1), 3), {}, "'x', array([0.]), 3"),
        ((), {"name": "x", "array": [1]}, "kwargs: name='x', array=[1]"),
        (("x",), {"array": [1]}, "'x'; kwargs: array=[1]"),
        ((b"\xff", np.zeros(1)), {}, "b'\\xff', array([0.])"),
    ],
)
def test_tensor_type_errors(args: tuple[Any, ...], kwargs: dict[str, Any], shown: str) -> None:
    with pytest.raises(TypeError) as info:
        pb_utils.Tensor(*args, **kwargs)
    assert str(info.value) == (
        "__init__(): incompatible constructor arguments. The following argument types are "
        "supported:\n    1. c_python_backend_utils.Tensor(arg0: str, arg1: numpy.ndarray)\n"
        f"\nInvoked with: {shown}"
    )


def test_tensor_name_as_bytes() -> None:
    assert pb_utils.Tensor(b"x", np.zeros(1)).name() == "x"
    assert pb_utils.Tensor(bytearray(b"y"), np.zeros(1)).name() == "y"
