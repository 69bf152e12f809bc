"""The objects an inference request and its response are made of, inside the core."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._errors import CoreError

__all__ = [
    "ExecutionTimes",
    "InferRequest",
    "InferResponse",
    "InputTensor",
    "OutputTensor",
    "ParamValue",
]

ParamValue = str | int | bool | float


@dataclass(slots=True)
class InputTensor:
    """One request input: decoded data (``array``) or undecoded bytes (``raw``)."""

    name: str
    datatype: str
    shape: list[int]
    array: np.ndarray[Any, Any] | None = None
    raw: memoryview | None = None

    @property
    def byte_size(self) -> int:
        if self.raw is not None:
            return self.raw.nbytes
        assert self.array is not None
        return int(self.array.nbytes)


@dataclass(slots=True)
class OutputTensor:
    """One response output. BYTES outputs hold an object array of ``bytes``."""

    name: str
    datatype: str
    shape: list[int]
    array: np.ndarray[Any, Any]


@dataclass(slots=True)
class InferRequest:
    """A request as the core and the backends see it (after the HTTP layer parsed it)."""

    id: str
    inputs: dict[str, InputTensor]
    requested_outputs: list[str] | None = None
    parameters: dict[str, ParamValue] = field(default_factory=dict)
    correlation_id: int | str = 0
    flags: int = 0
    priority: int = 0
    timeout_us: int = 0
    raw: bool = False
    #: set by admission: the batch size (1 for non-batching models)
    batch_size: int = 1
    #: shared-memory regions this request reads or writes (released when it ends)
    regions: list[Any] = field(default_factory=list)
    #: monotonic ns when the core accepted the request
    start_ns: int = 0
    #: set by the core when the client went away or the request timed out; models see
    #: it through ``InferenceRequest.is_cancelled()``
    cancelled: bool = False

    def log_prefix(self) -> str:
        return f"[request id: {self.id or '<id_unknown>'}] "


@dataclass(slots=True)
class InferResponse:
    """A model's answer to one request: outputs, or an error."""

    outputs: list[OutputTensor] = field(default_factory=list)
    error: CoreError | None = None
    parameters: dict[str, ParamValue] | None = None
    #: the backend failed (exception, bad return): counted as a failure in statistics
    failed: bool = False
    #: the model released the request with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
    #: the scheduler must queue it again instead of answering (sequence/iterative models)
    rescheduled: bool = False


@dataclass(slots=True)
class ExecutionTimes:
    """Nanoseconds one ``execute`` spent preparing inputs, in the model, and on outputs."""

    input_ns: int = 0
    infer_ns: int = 0
    output_ns: int = 0
