"""Schedulers: how admitted requests of one model version reach its instances.

* :class:`FifoScheduler` (no ``dynamic_batching``): one request per ``execute``, in
  arrival order, on whichever instance is free. An instance that ``takes_ahead`` (a
  worker process running a quick model) may be sent one more request while busy when
  no instance is idle; it starts it the moment the first ends.
* :class:`DynamicBatcher`: Triton's dynamic batcher. Queued requests (see
  :mod:`._queue` for priorities and queue policies) are gathered into *payloads* of up
  to ``max_batch_size``, preferring the ``preferred_batch_size`` values and waiting up
  to ``max_queue_delay_microseconds`` for one. As in Triton, a payload that waits for a
  busy instance may keep growing until it reaches a preferred size; without queue
  policies up to two payloads per instance are formed ahead, with them requests stay
  queued until an instance is free (so ``max_queue_size`` counts them).

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
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..support._eager import resume
from ._errors import Code, CoreError
from ._queue import Pending, PriorityQueue
from ._rate_limit import Gate
from ._trace import trace_queued
from ._types import InferRequest, InferResponse
from .model_config_pb2 import ModelConfig

if TYPE_CHECKING:
    from ._backend_api import ModelInstance
    from ._stats import ModelStats

log = logging.getLogger("tritonhttp.server")

__all__ = [
    "DynamicBatcher",
    "Executor",
    "FifoScheduler",
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


class _Payload:
    """Requests bound for one ``execute`` (Triton's payload)."""

    __slots__ = ("executing", "items", "queued", "sealed", "size", "start_ns")

    def __init__(self) -> None:
        self.items: list[Pending] = []
        self.size = 0
        self.queued = False
        self.executing = False
        #: no request may join (inputs of the next request differ)
        self.sealed = False
        self.start_ns = 0

    def add(self, item: Pending) -> None:
        if not self.items:
            self.start_ns = item.enqueue_ns
        self.items.append(item)
        self.size += item.batch


@dataclass(frozen=True, slots=True)
class BatchingRules:
    """What shapes a dynamic batch (from ``dynamic_batching`` or sequence ``oldest``)."""

    max_batch_size: int
    preferred: tuple[int, ...]
    delay_ns: int
    #: inputs whose shapes must be equal inside a batch (variable dims, not ragged)
    equal_shape_inputs: frozenset[str] = frozenset()
    #: the model has optional inputs: a batch shares one set of input names
    optional_inputs: bool = False
    #: ``preserve_ordering``: answers go out in the order requests left the queue
    preserve_ordering: bool = False

    @classmethod
    def from_config(
        cls, config: ModelConfig, preferred: list[int] | None = None, delay_us: int | None = None
    ) -> BatchingRules:
        db = config.dynamic_batching
        sizes = list(db.preferred_batch_size) if preferred is None else preferred
        delay = db.max_queue_delay_microseconds if delay_us is None else delay_us
        equal = frozenset(
            i.name for i in config.input if not i.allow_ragged_batch and -1 in list(i.dims)
        )
        return cls(
            max(1, config.max_batch_size),
            tuple(sorted(set(sizes))),
            delay * 1000,
            equal,
            any(i.optional for i in config.input),
            preferred is None and delay_us is None and db.preserve_ordering,
        )


def _shape_signature(req: InferRequest, rules: BatchingRules) -> tuple[object, ...]:
    parts: list[object] = []
    if rules.optional_inputs:
        parts.append(frozenset(req.inputs))
    for name in sorted(rules.equal_shape_inputs):
        t = req.inputs.get(name)
        parts.append(tuple(t.shape[1:]) if t is not None else None)
    return tuple(parts)


class DynamicBatcher(Scheduler):
    """Triton's dynamic batcher over a set of instances."""

    def __init__(
        self,
        instances: list[ModelInstance],
        execute: Executor,
        stats: ModelStats,
        rules: BatchingRules,
        queue: PriorityQueue,
        on_done: Callable[[Pending, InferResponse], None] | None = None,
        gate: Gate | None = None,
    ) -> None:
        super().__init__(instances, execute, stats, gate)
        self.rules = rules
        self.queue = queue
        self._max_preferred = max(rules.preferred, default=0)
        self._check_inputs = bool(rules.equal_shape_inputs) or rules.optional_inputs
        self._payloads: collections.deque[_Payload] = collections.deque()
        self._curr: _Payload | None = None
        self._saturated = False
        self._next_preferred = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0
        self._pumping = False
        self._on_done = on_done
        #: (``preserve_ordering``) dispatched requests not answered yet, in dispatch
        #: order, each with its finished outcome once it has one
        self._in_order: collections.deque[Pending] = collections.deque()
        self._outcomes: dict[int, InferResponse | BaseException] = {}

    # ------------------------------------------------------------------ entry

    async def infer(self, req: InferRequest) -> InferResponse:
        if req.trace is not None:
            trace_queued(req)
        queue = self.queue
        level = queue.level_of(req.priority)
        if queue.full(level):
            raise CoreError(f"{req.log_prefix()}Exceeds maximum queue size", Code.UNAVAILABLE)
        if (
            self._idle
            and self._gate is None
            and not queue.size
            and not self._payloads
            and (self._curr is None or self._curr.executing or not self._curr.items)
            and not self.rules.delay_ns
            and not self.rules.preserve_ordering
            and not queue.expires_at_once(level, req)
        ):
            # the batch Triton would form is this request alone, on an idle instance
            # (a sequence batcher's lane, the one user of ``on_done``, only submits)
            inst = self._idle.popleft()
            free = self._freer(inst)
            try:
                response = (await self._execute(inst, [req], (), free))[0]
            finally:
                free()
            return reschedule_refused() if response.rescheduled else response
        fut: asyncio.Future[InferResponse] = asyncio.get_running_loop().create_future()
        item = Pending(req, fut, _now())
        self.submit(item, level)
        return await fut

    def submit(self, item: Pending, level: int | None = None) -> None:
        """Queue an item (the caller made sure its level is not full)."""
        queue = self.queue
        queue.push(
            item, queue.level_of(item.request.priority) if level is None else level, item.enqueue_ns
        )
        self._waiting[id(item.request)] = item
        if self._wake_on_arrival():
            self._pump()
        elif queue.has_timeouts:
            self._arm_expiry()

    def _wake_on_arrival(self) -> bool:
        if not self._slot_available():
            return False
        if self.rules.equal_shape_inputs:
            return True
        curr = self._curr
        return (
            self._saturated
            or curr is None
            or curr.executing
            or self.queue.batch_total >= self._next_preferred
        )

    def _dequeue(self, item: Pending) -> bool:
        if self.queue.remove(item):
            return True
        for payload in self._payloads:
            if item in payload.items:
                payload.items.remove(item)
                payload.size -= item.batch
                if not payload.items:
                    # (still the payload being formed: it queues again when one joins)
                    self._payloads.remove(payload)
                    payload.queued = False
                return True
        return False

    def close(self) -> None:
        super().close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ------------------------------------------------------------------ the batcher

    def _slot_available(self) -> bool:
        if self.queue.prefetching:
            return len(self._payloads) < 2 * len(self.instances)
        return len(self._idle) > len(self._payloads)

    def _pump(self) -> None:
        """Form and dispatch payloads until nothing more can happen now."""
        if self._pumping or self._closed:
            return
        self._pumping = True
        try:
            self._pump_loop()
        finally:
            self._pumping = False

    def _pump_loop(self) -> None:
        queue = self.queue
        self._dispatch()
        for _ in range(10_000):  # each round moves requests or stops
            curr = self._curr
            if curr is None or self._saturated or curr.executing:
                curr = self._curr = _Payload()
                self._saturated = False
                self._next_preferred = 0
            if not queue.size:
                return
            if not self._slot_available():
                if queue.has_timeouts:
                    queue.reject_expired(_now(), self._reject)
                    self._arm_expiry()
                return
            count, wait_ns = self._form(curr)
            if wait_ns > 0:
                self._arm(wait_ns)
                return
            if count == 0:
                if self._saturated:
                    continue  # Triton starts a new payload
                return
            for _ in range(count):
                curr.add(queue.pop())
            if not curr.queued:
                curr.queued = True
                self._payloads.append(curr)
            self._dispatch()

    def _form(self, curr: _Payload) -> tuple[int, int]:
        """Triton's batch search: how many queued requests join ``curr`` now, or how
        long to wait for a better batch (ns)."""
        rules = self.rules
        payload_size = curr.size
        max_pref = self._max_preferred
        preferred = rules.preferred
        now = _now()
        count = 0
        size = 0
        best_size = 0
        best_count = 0
        oldest = 0
        closest = 0
        send_now = False
        signature: tuple[object, ...] | None = None
        if self._check_inputs and curr.items:
            signature = _shape_signature(curr.items[0].request, rules)
        for item in self.queue.walk(now, self._reject, self._cancelled):
            batch = item.batch
            if payload_size == 0 and count == 0:
                if self._check_inputs:
                    signature = _shape_signature(item.request, rules)
            else:
                total = payload_size + size + batch
                if total > max_pref and best_size == 0:
                    best_size = size
                    best_count = count
                    self._saturated = True
                if total > rules.max_batch_size:
                    send_now = True
                    break
                if self._check_inputs and _shape_signature(item.request, rules) != signature:
                    curr.sealed = True
                    send_now = True
                    break
            size += batch
            count += 1
            if oldest == 0 or item.enqueue_ns < oldest:
                oldest = item.enqueue_ns
            if item.deadline_ns and (closest == 0 or item.deadline_ns < closest):
                closest = item.deadline_ns
            if size + payload_size in preferred:
                best_size = size
                best_count = count
        delay_ns = now - oldest if oldest else now
        exceeded = rules.delay_ns != 0 and delay_ns >= rules.delay_ns
        if best_size != 0 and not exceeded:
            if rules.delay_ns == 0:
                self._saturated = True
            return best_count, 0
        if count == 0:
            return 0, 0
        if send_now or payload_size + size >= max_pref:
            self._saturated = True
            return count, 0
        if exceeded or rules.delay_ns == 0:
            return count, 0
        nxt = [p for p in preferred if p > size + payload_size]
        self._next_preferred = nxt[0] if nxt else (preferred[0] if preferred else 0)
        if self._next_preferred:
            self._next_preferred -= payload_size
        if not self._saturated and payload_size != 0 and payload_size not in preferred:
            return count, 0
        wait = rules.delay_ns - delay_ns
        if closest:
            wait = min(wait, closest - now) if now <= closest else 1000
        return 0, max(wait, 1000)

    def _dispatch(self) -> None:
        """Idle instances take queued payloads (merging late small ones, as Triton)."""
        gate = self._gate
        while self._idle and self._payloads:
            inst = self._idle.popleft() if gate is None else gate.pick(self._idle)
            if inst is None:
                return  # (woken once resources are released)
            payload = self._payloads.popleft()
            payload.executing = True
            rules = self.rules
            if rules.delay_ns and rules.max_batch_size > 1 and not payload.sealed:
                now = _now()
                while self._payloads:
                    nxt = self._payloads[0]
                    if (
                        nxt.sealed
                        or now - nxt.start_ns <= rules.delay_ns
                        or payload.size + nxt.size > rules.max_batch_size
                    ):
                        break
                    self._payloads.popleft()
                    nxt.executing = True
                    for item in nxt.items:
                        payload.add(item)
            waiting = self._waiting
            for item in payload.items:
                waiting.pop(id(item.request), None)
            if rules.preserve_ordering:
                self._in_order.extend(payload.items)
            self._start_now(self._run(inst, payload))

    async def _run(self, inst: ModelInstance, payload: _Payload) -> None:
        items = [p for p in payload.items if not p.future.done()]
        free = self._freer(inst)
        try:
            if items:
                on_done = self._on_done
                early = free if on_done is None else None  # (see _freer)
                responses = await self._execute(inst, [p.request for p in items], (), early)
                if on_done is None:
                    free()
                for item, response in zip(items, responses, strict=False):
                    if on_done is not None:
                        on_done(item, response)  # (it may queue the request again first)
                    else:
                        self._settle(
                            item, reschedule_refused() if response.rescheduled else response
                        )
        except BaseException as e:  # never leave a waiter hanging
            for item in items:
                self._settle(item, e)
            if not isinstance(e, Exception):
                raise
        finally:
            free()

    def _settle(self, item: Pending, outcome: InferResponse | BaseException) -> None:
        """Answer ``item``; under ``preserve_ordering`` only once every request
        dispatched before it is answered (its outcome waits until then)."""
        if not self.rules.preserve_ordering:
            if isinstance(outcome, BaseException):
                self._fail([item], outcome)
            else:
                self._answer(item, outcome)
            return
        if not item.future.done():  # (one whose client left was passed over, or will be)
            self._outcomes[id(item)] = outcome
        order = self._in_order
        while order:
            head = order[0]
            done = self._outcomes.pop(id(head), None)
            if done is None and not head.future.done():
                return  # (still running)
            order.popleft()
            if isinstance(done, BaseException):
                self._fail([head], done)
            elif done is not None:
                self._answer(head, done)

    @property
    def is_idle(self) -> bool:
        """Whether nothing is queued or running."""
        return not self._waiting and not self._payloads and len(self._idle) == len(self.instances)

    def _back_to_idle(self, inst: ModelInstance) -> None:
        if not (self._leaving and self._let_go(inst)):
            self._idle.append(inst)

    def _freer(self, inst: ModelInstance) -> Callable[[], None]:
        """What frees ``inst`` after an execution, once however often it is called: the
        execution's ``on_free`` and the end of its task. The instance takes its next
        payload before the finished answers go out (a worker process would sit idle
        while they are encoded and sent); a worker process says it is free from its
        answer's callback, before its execute returns. An execute that ended at once,
        inside its own hand-over, frees the instance on the loop's next turn: the
        batcher finishes forming the next payload first. Under ``on_done`` (a sequence
        batcher's lane, which may queue a request again ahead of the others) only the
        end of the task frees it, once the answers are handled."""
        freed = False

        def free() -> None:
            nonlocal freed
            if not freed:
                freed = True
                if self._starting:
                    asyncio.get_running_loop().call_soon(self._free, inst)
                else:
                    self._free(inst)

        return free

    def _free(self, inst: ModelInstance) -> None:
        self._back_to_idle(inst)
        if self._gate is not None:
            self._gate.release(inst)  # (wakes this batcher, then grants what is free)
        else:
            self._pump()

    def _wake(self) -> None:
        self._pump()

    def _join(self, inst: ModelInstance) -> None:
        self._idle.append(inst)
        self._pump()

    # ------------------------------------------------------------------ timers and refusals

    def _reject(self, item: Pending) -> None:
        self._refuse(item, "REJECTED", CoreError("Request timeout expired", Code.UNAVAILABLE))

    def _cancelled(self, item: Pending) -> None:
        self._refuse(item, "CANCELED", CoreError("Request was cancelled", Code.CANCELLED))

    def _arm(self, wait_ns: int) -> None:
        at = _now() + wait_ns
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = asyncio.get_running_loop().call_later(wait_ns / 1e9, self._on_timer)

    def _arm_expiry(self) -> None:
        deadline = self.queue.closest_deadline()
        if deadline:
            self._arm(max(deadline - _now(), 0) + 1000)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = 0
        if self.queue.has_timeouts:
            self.queue.reject_expired(_now(), self._reject)
        self._pump()
        if self.queue.has_timeouts and self._timer is None:
            self._arm_expiry()
