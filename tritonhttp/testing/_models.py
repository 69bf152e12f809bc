"""Requests as ``execute`` receives them, for unit tests of model code without a server."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

import triton_python_backend_utils as pb_utils
from triton_python_backend_utils._request import InferenceRequest, InferenceResponse

__all__ = ["ResponseSink", "server_request"]


class ResponseSink:
    """Stands for the server behind one request: what the model sends through the
    request's response sender lands in :attr:`sent` as ``(response, final)``."""

    def __init__(self, decoupled: bool = False) -> None:
        self.decoupled = decoupled
        self.sent: list[tuple[InferenceResponse | None, bool]] = []
        self.errors: list[str] = []
        self.cancelled = False

    @property
    def responses(self) -> list[InferenceResponse]:
        """The responses sent so far (bare FINAL flags left out)."""
        return [r for r, _ in self.sent if r is not None]

    @property
    def finished(self) -> bool:
        """Whether the FINAL flag was sent."""
        return any(final for _, final in self.sent)

    def deliver(self, response: InferenceResponse | None, final: bool) -> None:
        self.sent.append((response, final))

    def fail(self, message: str) -> None:
        self.errors.append(message)

    def is_cancelled(self) -> bool:
        return self.cancelled


def server_request(
    inputs: Mapping[str, Any] | Iterable[pb_utils.Tensor],
    requested_output_names: Iterable[str] = (),
    *,
    request_id: str = "",
    correlation_id: int | str = 0,
    flags: int = 0,
    timeout: int = 0,
    parameters: Mapping[str, bool | int | str | float] | None = None,
    decoupled: bool = False,
) -> tuple[pb_utils.InferenceRequest, ResponseSink]:
    """A request as a model's ``execute`` gets it from the server, and its sink.

    ``inputs``: ``{name: numpy array}`` (object or ``S`` arrays are BYTES) or tensors.
    ``decoupled`` follows the model's transaction policy (it decides the response
    sender's rules).
    """
    if isinstance(inputs, Mapping):
        tensors = []
        for name, value in inputs.items():
            array = np.asarray(value)
            if array.dtype.kind in ("O", "S", "U"):
                items = [x if isinstance(x, bytes) else str(x).encode() for x in array.ravel()]
                data = np.empty(len(items), dtype=np.object_)
                data[:] = items
                tensors.append(pb_utils.Tensor._wrap(name, "BYTES", data.reshape(array.shape)))
            else:
                tensors.append(pb_utils.Tensor(name, array))
    else:
        tensors = list(inputs)
    sink = ResponseSink(decoupled)
    request = InferenceRequest._server_side(
        request_id,
        correlation_id,
        tensors,
        set(requested_output_names),
        flags,
        timeout,
        json.dumps(dict(parameters or {}), separators=(",", ":")),
        sink,
    )
    return request, sink
