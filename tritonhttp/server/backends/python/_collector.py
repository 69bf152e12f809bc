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
* a request whose execution failed is counted as a failure (``InferResponse.failed``);
  when a decoupled model's ``execute`` fails as a whole (it raised, say), every request of
  the batch counts as failed, those that had their FINAL response already included.

:class:`SharedCheck` is the readiness rule both modes share: concurrent ``is_ready``
checks of one instance share one call of the model's ``is_ready()``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence

from ...core._types import InferRequest, InferResponse

__all__ = ["Collector", "SharedCheck", "collect", "collected"]


class Collector:
    """One request's responses. ``lock``: given when responses may come from another
    thread, which then sets :attr:`result` itself while the loop does not wait yet;
    ``token``: what names the request to the process that runs it, if another does."""

    __slots__ = ("decoupled", "failed", "lock", "req", "result", "token", "waiter")

    def __init__(
        self,
        req: InferRequest,
        decoupled: bool,
        lock: threading.Lock | None = None,
        token: int = 0,
    ) -> None:
        self.req = req
        self.decoupled = decoupled
        self.lock = lock
        self.token = token
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


def _ready(c: Collector, rescheduled: list[bool] | None, i: int) -> InferResponse | None:
    """The core's response to ``c``'s request, the ``i``-th of its batch, if it is there
    (None: still on its way)."""
    if rescheduled is not None and rescheduled[i]:
        return InferResponse(rescheduled=True)
    if c.decoupled:
        return c.result or InferResponse(failed=c.failed or rescheduled is None)
    return c.result


def collected(
    collectors: Sequence[Collector], rescheduled: list[bool] | None
) -> list[InferResponse] | None:
    """:func:`collect`'s answer when every response is there already (the usual case: no
    coroutine to run); None when one is still on its way."""
    out: list[InferResponse] = []
    for i, c in enumerate(collectors):
        r = _ready(c, rescheduled, i)
        if r is None:
            return None
        out.append(r)
    return out


async def collect(
    collectors: Sequence[Collector], rescheduled: list[bool] | None
) -> list[InferResponse]:
    """The core's response to each request of a batch whose ``execute`` returned
    (``rescheduled``: the RESCHEDULE flag per request; None: the execute failed as a
    whole, nothing was rescheduled)."""
    out: list[InferResponse] = []
    for i, c in enumerate(collectors):
        r = _ready(c, rescheduled, i)
        out.append(r if r is not None else await _final(c))
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


class SharedCheck:
    """One readiness check of an instance at a time; callers meanwhile share its answer."""

    __slots__ = ("_running",)

    def __init__(self) -> None:
        self._running: asyncio.Future[bool | None] | None = None

    async def run(self, check: Callable[[], Awaitable[bool | None]]) -> bool | None:
        """``check()``'s answer, from the call under way if there is one."""
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(check())
        return await asyncio.shield(self._running)
