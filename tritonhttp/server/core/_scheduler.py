"""Schedulers: how admitted requests of one model version reach its instances.

:class:`Scheduler` is what both schedulers share (instances, statistics, cancellation,
instance updates, the hand-over that starts an execution at once); the schedulers are:

* :class:`~._fifo.FifoScheduler` (:mod:`._fifo`; no ``dynamic_batching``): one request
  per ``execute``, in arrival order, on whichever instance is free.
* :class:`~._dynamic_batcher.DynamicBatcher` (:mod:`._dynamic_batcher`): Triton's
  dynamic batcher, which gathers queued requests into batches (*payloads*).

Both keep the fast path cheap: a lone request meeting an idle instance executes at
once, without futures or tasks; a FIFO request that had to queue, or a payload, is
started on the freed instance by the hand-over itself (the backend has it before the
loop runs anything else) and goes on in a task that answers its futures. Both give a
freed instance its next work before the finished requests' answers are encoded and
sent: a worker process says it is free from the callback that reads its answer.
Requests whose client went away are taken out of the queue (reason ``CANCELED``);
requests past a ``REJECT`` deadline are answered ``Request timeout expired`` (reason
``REJECTED``).

Under the rate limiter (``--rate-limit=execution_count``, :mod:`._rate_limit`) both
leave the fast paths: requests (payloads) wait queued, counted pending, until the gate
picks an idle instance whose resources are free, and an instance gives its resources
back as its execution ends.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..support._eager import resume
from ._errors import Code, CoreError
from ._queue import Pending
from ._rate_limit import Gate
from ._types import InferRequest, InferResponse
from .model_config_pb2 import ModelConfig

if TYPE_CHECKING:
    from ._backend_api import ModelInstance
    from ._stats import ModelStats

log = logging.getLogger("tritonhttp.server")

__all__ = [
    "Executor",
    "Refusal",
    "Scheduler",
    "reschedule_refused",
]


class Executor(Protocol):
    """Runs one batch on an instance and counts it: (instance, requests, positions of
    padding, and what the instance may call the moment it can take its next batch)."""

    def __call__(
        self,
        inst: ModelInstance,
        requests: list[InferRequest],
        nulls: tuple[int, ...] = (),
        on_free: Callable[[], None] | None = None,
    ) -> Awaitable[list[InferResponse]]: ...


@dataclass(slots=True)
class Refusal(InferResponse):
    """An answer the scheduler gave instead of the model (timeout, cancellation)."""


def _now() -> int:
    return time.monotonic_ns()


_RESCHEDULE_REFUSED = (
    "Request is released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, while the model "
    "is not configured to handle such a flag."
)


def reschedule_refused() -> InferResponse:
    """The answer to a request a model rescheduled without ``iterative_sequence``.

    Triton 2.51 logs this text and never answers the client; this server answers with it.
    """
    log.error("Failed to release request: %s", _RESCHEDULE_REFUSED)
    return InferResponse(error=CoreError(_RESCHEDULE_REFUSED, Code.INTERNAL))


class Scheduler:
    """Common plumbing: instances, statistics, cancellation bookkeeping."""

    def __init__(
        self,
        instances: list[ModelInstance],
        execute: Executor,
        stats: ModelStats,
        gate: Gate | None = None,
    ) -> None:
        self.instances = instances
        self._idle: collections.deque[ModelInstance] = collections.deque(instances)
        self._execute = execute
        self._stats = stats
        #: queued (not yet executing) requests by id(request), for cancellation
        self._waiting: dict[int, Pending] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        #: a hand-over is starting an execution (one that ends at once hands on in a task)
        self._starting = False
        #: busy instances an instance update left out, each with the future that ends
        #: once it is free
        self._leaving: dict[int, asyncio.Future[None]] = {}
        #: the rate limiter's view of the instances (None: no rate limiter is on)
        self._gate = gate
        if gate is not None:
            gate.attach(self._wake)

    @property
    def pending(self) -> int:
        """Requests accepted but not executing (``nv_inference_pending_request_count``)."""
        return len(self._waiting)

    async def infer(self, req: InferRequest) -> InferResponse:
        raise NotImplementedError

    def cancel(self, req: InferRequest) -> None:
        """The client went away: a queued request is dropped, a running one flagged."""
        req.cancelled = True
        item = self._waiting.get(id(req))
        if item is not None and self._dequeue(item):
            self._refuse(item, "CANCELED", CoreError("Request was cancelled", Code.CANCELLED))

    def _dequeue(self, item: Pending) -> bool:
        """Take a queued item out (False when it already left the queue)."""
        raise NotImplementedError

    def _wake(self) -> None:
        """Resources the instances wait for were released (rate limiter)."""

    def close(self) -> None:
        """Stop timers; nothing is queued any more (the version is unloading)."""
        self._closed = True
        if self._gate is not None:
            self._gate.close()
        for future in self._leaving.values():
            if not future.done():
                future.set_result(None)  # (nothing runs any more)
        self._leaving.clear()

    def update_instances(
        self, instances: list[ModelInstance], config: ModelConfig | None = None
    ) -> list[asyncio.Future[None]]:
        """Serve with ``instances`` from now on (Triton's in-place instance update).

        Instances new to the list take work at once. Each one left out takes no more
        and finishes what it runs: the returned futures end as each one is free.
        """
        staying = {id(inst) for inst in instances}
        serving = {id(inst) for inst in self.instances}
        loop = asyncio.get_running_loop()
        freed: list[asyncio.Future[None]] = []
        for inst in self.instances:
            if id(inst) in staying:
                continue
            future: asyncio.Future[None] = loop.create_future()
            freed.append(future)
            if self._drop_idle(inst):
                future.set_result(None)
            else:
                self._leaving[id(inst)] = future
        self.instances = list(instances)
        if self._gate is not None and config is not None:
            self._gate.set_instances(instances, config, check=False)
        for inst in instances:
            if id(inst) not in serving:
                self._join(inst)
        return freed

    def _drop_idle(self, inst: ModelInstance) -> bool:
        """Take ``inst`` out of service if it is idle (False: it is busy)."""
        try:
            self._idle.remove(inst)
        except ValueError:
            return False
        return True

    def _join(self, inst: ModelInstance) -> None:
        """A new instance takes work."""
        raise NotImplementedError

    def _let_go(self, inst: ModelInstance) -> bool:
        """Whether the now free ``inst`` leaves service (an instance update left it out)."""
        future = self._leaving.pop(id(inst), None)
        if future is None:
            return False
        if not future.done():
            future.set_result(None)
        return True

    # ------------------------------------------------------------------ helpers

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _start_now(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run the execution ``coro`` up to its first wait now, in this call: the backend
        gets its requests before anything else runs on the loop (a worker process would
        sit idle until then), ahead of the finished requests' answers; a task goes on
        with it."""
        if self._starting:  # (an execution that ended at once hands over: no recursion)
            self._spawn(coro)
            return
        self._starting = True
        try:
            yielded = coro.send(None)
        except StopIteration:
            return
        finally:
            self._starting = False
        self._spawn(resume(coro, yielded))

    def _refuse(self, item: Pending, reason: str, error: CoreError) -> None:
        self._waiting.pop(id(item.request), None)
        self._stats.record_failure(reason, _now() - item.request.start_ns)
        if not item.future.done():
            item.future.set_result(Refusal(error=error))

    def _answer(self, item: Pending, response: InferResponse) -> None:
        if not item.future.done():
            item.future.set_result(response)

    def _fail(self, items: Sequence[Pending], exc: BaseException) -> None:
        for item in items:
            if not item.future.done():
                item.future.set_exception(exc)
