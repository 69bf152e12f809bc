"""The objects an inference request and its response are made of, inside the core."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ._errors import CoreError

if TYPE_CHECKING:
    from ._trace import Trace

__all__ = [
    "ExecutionTimes",
    "InferRequest",
    "InferResponse",
    "InputTensor",
    "OutputTensor",
    "ParamValue",
    "ResponseStream",
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


class OutputTensor(NamedTuple):
    """One response output. BYTES outputs hold an object array of ``bytes``.

    (A tuple: answers are encoded from ``(name, datatype, shape, array)`` tuples.)"""

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
    #: outputs the client asked into shared-memory regions: name -> the part of a region
    #: it goes to (a ``core._shm.RegionSlice``, bounds checked); a backend may write them
    #: there itself when the front end's checks would pass. None: none, or some output
    #: asked with classification (which the front end alone computes)
    output_regions: dict[str, Any] | None = None
    #: monotonic ns when the core accepted the request
    start_ns: int = 0
    #: set by the core when the client went away or the request timed out; models see
    #: it through ``InferenceRequest.is_cancelled()``
    cancelled: bool = False
    #: decoupled models only: every response the model sends goes here as it is sent
    #: (the response ``ModelVersion.infer`` returns is then only a completion marker)
    response_stream: ResponseStream | None = None
    #: an optional capability of the front end, carried through the core untouched: the
    #: backend may write this request's successful answer to the client itself (what it
    #: looks like is between the front and the backend, e.g.
    #: ``tritonhttp.server.backends.python._direct.DirectReply``); None: it may not
    reply: object | None = None
    #: the request's trace when it is traced (``core._trace.Trace``), else None
    trace: Trace | None = None
    #: requests like it may arrive in the same pass of the event loop (the next steps of
    #: an ensemble's requests whose previous step ran as one batch): a dynamic batcher
    #: then forms its batch once the pass is over, as Triton's batcher thread wakes a
    #: moment after its queue fills, instead of running the first one alone on an idle
    #: instance
    gathered: bool = False

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
    #: the backend wrote this answer to the client itself (``InferRequest.reply``), all
    #: but ``rest``, which the front end still has to send
    answered: bool = False
    rest: bytes = b""
    #: answered by an execution of several requests (see ``InferRequest.gathered``)
    batched: bool = False
    #: the backend did not take a request handed to it unparsed (through its reply
    #: capability): it was not executed, and the front end parses and answers it itself
    declined: bool = False


@dataclass(slots=True)
class ExecutionTimes:
    """Nanoseconds one ``execute`` spent preparing inputs, in the model, and on outputs.

    ``on_free`` (set by the scheduler, or None) may be called once by the instance, the
    moment it can take its next batch, before this ``execute`` returns (the scheduler
    then starts the next batch from within that call); an instance that never calls it
    is free when ``execute`` returns.
    """

    input_ns: int = 0
    infer_ns: int = 0
    output_ns: int = 0
    #: time the batch, sent ahead to a busy instance, waited there (queue time)
    waited_ns: int = 0
    on_free: Callable[[], None] | None = None


class ResponseStream:
    """The responses of one request to a decoupled model, in the order they are sent.

    The backend :meth:`put` each response (``final`` on the last one; a bare FINAL is
    ``put(None, True)``) on the event loop's thread; the front end takes them with
    :meth:`get`. After the final item nothing more is accepted. A consumer that goes
    away calls :meth:`close`; later responses are dropped.
    """

    __slots__ = ("_items", "_waiter", "closed", "count", "finished")

    def __init__(self) -> None:
        self._items: collections.deque[tuple[InferResponse | None, bool]] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        #: the final item was put
        self.finished = False
        #: the consumer stopped listening
        self.closed = False
        #: responses put so far (bare FINALs not counted)
        self.count = 0

    def put(self, response: InferResponse | None, final: bool) -> None:
        """Deliver a response (and/or the final flag); call on the event loop thread."""
        if self.finished:
            return
        if response is not None:
            self.count += 1
        if final:
            self.finished = True
        if self.closed:
            return
        self._items.append((response, final))
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pending(self) -> bool:
        """Whether :meth:`get` would return at once."""
        return bool(self._items)

    async def get(self) -> tuple[InferResponse | None, bool]:
        """The next ``(response, final)``, waiting for it."""
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()

    def close(self) -> None:
        """The consumer is gone: drop what is queued and whatever comes later."""
        self.closed = True
        self._items.clear()
