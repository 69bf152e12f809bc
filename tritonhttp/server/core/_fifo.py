"""The FIFO scheduler (no ``dynamic_batching``): one request per ``execute``, in
arrival order, on whichever instance is free.

An instance that ``takes_ahead`` (a worker process running a quick model) may be sent
one more request while busy when no instance is idle; it starts it the moment the first
ends. A lone request meeting an idle instance executes at once; one that had to queue is
started on the freed instance by the hand-over itself (:meth:`Scheduler._start_now`).
What it shares with the dynamic batcher is in :mod:`._scheduler`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import TYPE_CHECKING

from ._queue import Pending
from ._rate_limit import Gate
from ._scheduler import Executor, Scheduler, _now, reschedule_refused
from ._trace import trace_queued
from ._types import InferRequest, InferResponse

if TYPE_CHECKING:
    from ._backend_api import ModelInstance
    from ._stats import ModelStats

__all__ = ["FifoScheduler"]


class FifoScheduler(Scheduler):
    """No dynamic batching: each request executes alone, first come first served."""

    def __init__(
        self,
        instances: list[ModelInstance],
        execute: Executor,
        stats: ModelStats,
        gate: Gate | None = None,
    ) -> None:
        super().__init__(instances, execute, stats, gate)
        self._queue: collections.deque[Pending] = collections.deque()
        #: executions each busy instance has (by ``id``); an instance that ``takes_ahead``
        #: and has one may be sent a second, which it starts when the first ends
        self._load: dict[int, int] = {}
        #: busy instances with room for one execution ahead, oldest first
        self._ahead: collections.deque[ModelInstance] = collections.deque()

    async def infer(self, req: InferRequest) -> InferResponse:
        if req.trace is not None:
            trace_queued(req)
        if not self._queue and self._gate is None:
            if self._idle:
                return await self._run_on(self._idle.popleft(), req)
            if self._ahead:
                inst = self._take_ahead()
                if inst is not None:
                    return await self._run_on(inst, req)
        fut: asyncio.Future[InferResponse] = asyncio.get_running_loop().create_future()
        item = Pending(req, fut, _now())
        self._queue.append(item)
        self._waiting[id(req)] = item
        if self._gate is not None:
            self._wake()
        try:
            return await fut  # (the answer, or a refusal while queued)
        except BaseException:  # (the waiting task was cancelled)
            if item.instance is None and self._dequeue(item):
                self._waiting.pop(id(req), None)
            raise  # (once its turn came, its execution goes on and frees the instance)

    async def _run_on(self, inst: ModelInstance, req: InferRequest) -> InferResponse:
        key = id(inst)
        load = self._load.get(key, 0) + 1
        self._load[key] = load
        if load == 1 and self._gate is None and _can_take_ahead(inst):
            self._ahead.append(inst)
        freed = False

        def free() -> None:
            # (the instance may say it is free before its execute returns: a worker
            # process has finished; its next request starts at once, from that callback)
            nonlocal freed
            if not freed:
                freed = True
                self._release(inst)

        try:
            response = (await self._execute(inst, [req], (), free))[0]
        finally:
            free()
        return reschedule_refused() if response.rescheduled else response

    async def _run_item(self, inst: ModelInstance, item: Pending) -> None:
        """Execute a queued request on the instance handed to it; its answer (or error)
        goes to its future."""
        try:
            response = await self._run_on(inst, item.request)
        except BaseException as e:
            if not item.future.done():
                item.future.set_exception(e)
            if not isinstance(e, Exception):
                raise
            return
        if not item.future.done():
            item.future.set_result(response)

    def _start(self, inst: ModelInstance, item: Pending) -> None:
        """Start ``item`` on ``inst`` now (:meth:`_start_now`)."""
        self._start_now(self._run_item(inst, item))

    def _dequeue(self, item: Pending) -> bool:
        try:
            self._queue.remove(item)
        except ValueError:
            return False
        return True

    def _join(self, inst: ModelInstance) -> None:
        if self._gate is not None:
            self._idle.append(inst)
            self._wake()
        elif not self._start_next(inst):
            self._idle.append(inst)

    def _wake(self) -> None:
        """(rate limiter) Start queued requests on the idle instances the gate picks."""
        gate = self._gate
        queue = self._queue
        while gate is not None and self._idle and not self._closed:
            while queue and queue[0].future.done():
                self._waiting.pop(id(queue.popleft().request), None)
            if not queue:
                return
            inst = gate.pick(self._idle)
            if inst is None:
                return
            self._start_next(inst)

    def _release_gated(self, inst: ModelInstance, gate: Gate) -> None:
        """(rate limiter) ``inst`` ended its execution: it is idle again (or leaves
        service), and its resources go back to the waiting schedulers, this one among
        them when it has queued work (:meth:`Gate.release`)."""
        self._load.pop(id(inst), None)
        if not (self._leaving and self._let_go(inst)):
            self._idle.append(inst)
        gate.release(inst)

    def _drop_idle(self, inst: ModelInstance) -> bool:
        with contextlib.suppress(ValueError):
            self._ahead.remove(inst)  # (busy: it takes nothing ahead any more)
        return super()._drop_idle(inst)

    def _take_ahead(self) -> ModelInstance | None:
        """The oldest busy instance that takes a request ahead now (out of ``_ahead``)."""
        ahead = self._ahead
        for i, inst in enumerate(ahead):
            if inst.takes_ahead:  # type: ignore[attr-defined]
                del ahead[i]
                return inst
        return None

    def _start_next(self, inst: ModelInstance) -> bool:
        """Start the first queued request still waiting on ``inst`` (False: none was)."""
        queue = self._queue
        while queue:
            item = queue.popleft()
            self._waiting.pop(id(item.request), None)
            if not item.future.done():
                item.instance = inst
                self._start(inst, item)
                return True
        return False

    def _release(self, inst: ModelInstance) -> None:
        """One execution of ``inst`` ended: the first queued request still waiting
        starts on it; else it goes idle (or, still busy, may take one ahead again)."""
        if self._gate is not None:
            self._release_gated(inst, self._gate)
            return
        key = id(inst)
        load = self._load.pop(key) - 1
        if self._leaving and key in self._leaving:
            if load:
                self._load[key] = load  # (the one sent ahead runs now, the last one)
            else:
                self._let_go(inst)
            return
        if load:  # (the one sent ahead runs now)
            self._load[key] = load
            if not _can_take_ahead(inst):
                return
            if not inst.takes_ahead:  # type: ignore[attr-defined]
                self._ahead.append(inst)  # (it may take one later)
                return
        elif self._ahead:
            # (it had room for one ahead and none came: it is idle now, not busy)
            with contextlib.suppress(ValueError):
                self._ahead.remove(inst)
        if not self._start_next(inst):
            (self._ahead if load else self._idle).append(inst)
            return
        if not load and self._queue and self._ahead and self._ahead[-1] is inst:
            # an idle instance that takes one ahead gets the next queued too
            ahead = self._take_ahead() if inst.takes_ahead else None  # type: ignore[attr-defined]
            if ahead is not None and not self._start_next(ahead):
                self._ahead.append(ahead)


def _can_take_ahead(inst: ModelInstance) -> bool:
    """Whether ``inst`` is of a kind that may be sent a request while busy."""
    return getattr(type(inst), "takes_ahead", None) is not None
