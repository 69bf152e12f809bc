"""pb_utils objects <-> the core's request and response types (in the server process)."""

from __future__ import annotations

from typing import Any

import numpy as np

from triton_python_backend_utils._errors import ErrorCode, TritonError
from triton_python_backend_utils._request import InferenceRequest, InferenceResponse, RequestLink
from triton_python_backend_utils._tensor import Tensor, bytes_items

from ....utils._dtypes import BF16
from ...core._errors import Code, CoreError
from ...core._types import InferRequest, InferResponse, InputTensor, OutputTensor, ParamValue
from ...support import _json

__all__ = [
    "core_error",
    "core_request",
    "core_response",
    "params_json",
    "pb_request",
    "pb_response",
    "pb_tensor",
    "requested_names",
    "tensor_data",
]


def params_json(req: InferRequest) -> str:
    """The request parameters as the model sees them (compact JSON, client order)."""
    return _json.dumps(req.parameters).decode("utf-8") if req.parameters else "{}"


def requested_names(req: InferRequest, output_names: set[str]) -> set[str]:
    """What the model is told the client asked for (all config outputs when nothing)."""
    return set(req.requested_outputs) if req.requested_outputs else set(output_names)


def pb_request(
    req: InferRequest, inputs: list[Tensor], wanted: set[str], link: RequestLink
) -> InferenceRequest:
    """The pb_utils request ``execute`` receives for the core's ``req``, over ``inputs``,
    answering through ``link``."""
    return InferenceRequest._server_side(
        req.id, req.correlation_id, inputs, wanted, req.flags, req.timeout_us,
        params_json(req), link, None if req.trace is None else req.trace.handle(),
    )  # fmt: skip


def pb_tensor(name: str, datatype: str, array: np.ndarray[Any, Any]) -> Tensor:
    """A pb_utils tensor over a core array (no copy)."""
    return Tensor._wrap(name, datatype, array)


def tensor_data(tensor: Tensor) -> tuple[str, np.ndarray[Any, Any]]:
    """A tensor's (datatype, array) as the core holds them: BYTES as an object array of
    ``bytes``, BF16 with the bfloat16 dtype."""
    wire = tensor._wire
    array = tensor._array
    if wire == "BYTES":
        items = tensor._items if tensor._items is not None else bytes_items(array)
        out = np.empty(len(items), dtype=np.object_)
        out[:] = items
        return wire, out.reshape(array.shape)
    if wire == "BF16":
        return wire, array.view(BF16)
    return wire, array


def core_error(message: str, code: Code = Code.INTERNAL, failed: bool = True) -> InferResponse:
    return InferResponse(error=CoreError(message, code), failed=failed)


def core_response(response: InferenceResponse, wanted: set[str] | None) -> InferResponse:
    """A model's response for the client: its error, or its outputs pruned to ``wanted``."""
    error = response._error
    if error is not None:
        return InferResponse(error=CoreError(error.message(), Code(error.code().value)))
    outputs: list[OutputTensor] = []
    for tensor in response._outputs:
        if wanted is not None and tensor._name not in wanted:
            continue
        wire, array = tensor_data(tensor)
        outputs.append(OutputTensor(tensor._name, wire, list(array.shape), array))
    params: dict[str, ParamValue] | None = dict(response._parameters) or None
    return InferResponse(outputs=outputs, parameters=params)


def core_request(request: InferenceRequest) -> InferRequest:
    """A BLS request as the core takes it."""
    inputs: dict[str, InputTensor] = {}
    for tensor in request._inputs:
        wire, array = tensor_data(tensor)
        inputs[tensor._name] = InputTensor(tensor._name, wire, list(array.shape), array=array)
    return InferRequest(
        id=request._request_id,
        inputs=inputs,
        requested_outputs=sorted(request._requested) or None,
        parameters=dict(request._param_dict),
        correlation_id=request._correlation_id,
        flags=request._flags,
        timeout_us=request._timeout,
    )


def pb_response(response: InferResponse) -> InferenceResponse:
    """A core response as a BLS caller receives it."""
    if response.error is not None:
        return InferenceResponse(
            error=TritonError(response.error.message, ErrorCode(int(response.error.code)))
        )
    out = InferenceResponse([pb_tensor(o.name, o.datatype, o.array) for o in response.outputs])
    if response.parameters:
        out._parameters = {
            k: v for k, v in response.parameters.items() if isinstance(v, (bool, int, str))
        }
    return out
