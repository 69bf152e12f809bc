"""Where a request's responses gather on their way back to the core, in either isolation mode.

A :class:`Collector` per request, used on the event loop's thread: the in-process
instance and the worker-process instance both :meth:`~Collector.put` what the model
sends, and :func:`collect` turns a finished batch into the core's responses. The rules
are Triton's:

* a request released with RESCHEDULE is answered by nobody: the scheduler queues it again;
* a non-decoupled request has exactly one final response (the model's, or an error);
* a decoupled request's responses go on its ``ResponseStream`` as they come; without a
  stream (a warm-up request) the first error is kept, as Triton reports a failed
  warm-up with its first error;
* a request whose execution failed is counted as a failure (``InferResponse.failed``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

from ...core._types import InferRequest, InferResponse

__all__ = ["Collector", "collect"]


class Collector:
    """One request's responses. ``lock``: given when responses may come from another
    thread, which then sets :attr:`result` itself while the loop does not wait yet."""

    __slots__ = ("decoupled", "failed", "lock", "req", "result", "waiter")

    def __init__(
        self, req: InferRequest, decoupled: bool, lock: threading.Lock | None = None
    ) -> None:
        self.req = req
        self.decoupled = decoupled
        self.lock = lock
        self.result: InferResponse | None = None
        self.waiter: asyncio.Future[InferResponse] | None = None
        self.failed = False

    def put(self, response: InferResponse | None, final: bool, failed: bool = False) -> None:
        """A response of the model (None: a bare final flag); on the event loop's thread."""
        if failed:
            self.failed = True
        if self.decoupled:
            stream = self.req.response_stream
            if stream is not None:
                stream.put(response, final)
            elif response is not None and response.error is not None and self.result is None:
                self.result = response
            return
        if response is None:
            return
        waiter = self.waiter
        if waiter is None:
            self.result = response
        elif not waiter.done():
            waiter.set_result(response)

    def fail_all(self, error: InferResponse) -> None:
        """The model is gone: ``error`` (marked failed) ends the request."""
        self.put(error, True, True)


async def collect(
    collectors: Sequence[Collector], rescheduled: list[bool] | None
) -> list[InferResponse]:
    """The core's response to each request of a batch whose ``execute`` returned
    (``rescheduled``: the RESCHEDULE flag per request, None: none was)."""
    out: list[InferResponse] = []
    for i, c in enumerate(collectors):
        if rescheduled is not None and rescheduled[i]:
            out.append(InferResponse(rescheduled=True))
        elif c.decoupled:
            out.append(c.result or InferResponse(failed=c.failed))
        else:
            out.append(c.result or await _final(c))
    return out


async def _final(c: Collector) -> InferResponse:
    """A non-decoupled request's response, waiting for it (sent by another thread or
    still on its way from a worker)."""
    waiter = asyncio.get_running_loop().create_future()
    if c.lock is not None:
        with c.lock:
            if c.result is not None:
                return c.result
            c.waiter = waiter
    else:
        c.waiter = waiter
    c.result = await waiter
    return c.result
