"""pb_utils' trace context: what ``request.trace()`` gives a model and what a BLS
request built with ``trace=`` carries (the server's end-to-end tests are in
``tests/server/test_trace_*.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import triton_python_backend_utils as pb_utils
from triton_python_backend_utils._request import InferenceRequest, InferenceTrace

CONTEXT = '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'


def _received(handle: tuple[int, str | None] | None) -> InferenceRequest:
    return InferenceRequest._server_side("r", 0, [], set(), 0, 0, "{}", None, handle)  # type: ignore[arg-type]


def _bls(**kw: object) -> InferenceRequest:
    tensor = pb_utils.Tensor("IN", np.zeros(1, np.int32))
    return pb_utils.InferenceRequest(
        model_name="m", inputs=[tensor], requested_output_names=["OUT"], **kw
    )


def test_a_traced_request_gives_its_context() -> None:
    trace = _received((7, CONTEXT)).trace()
    assert trace.get_context() == CONTEXT
    assert trace._handle() == (7, CONTEXT)


@pytest.mark.parametrize("handle", [None, (7, None)])
def test_no_context_untraced_or_in_triton_mode(handle: tuple[int, str | None] | None) -> None:
    assert _received(handle).trace().get_context() is None


def test_a_bls_request_carries_the_trace_it_is_given() -> None:
    parent = _received((7, CONTEXT)).trace()
    assert _bls(trace=parent)._trace._id == 7
    assert _bls()._trace._id == 0  # (not traced)
    assert isinstance(_bls()._trace, InferenceTrace)


def test_trace_must_be_a_trace() -> None:
    with pytest.raises(TypeError):
        _bls(trace="00-abc")
