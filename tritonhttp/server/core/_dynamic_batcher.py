"""Triton's dynamic batcher, and the rules that shape its batches.

Queued requests (see :mod:`._queue` for priorities and queue policies) are gathered into
*payloads* of up to ``max_batch_size``, preferring the ``preferred_batch_size`` values
and waiting up to ``max_queue_delay_microseconds`` for one. As in Triton, a payload that
waits for a busy instance may keep growing until it reaches a preferred size; without
queue policies up to two payloads per instance are formed ahead, with them requests stay
queued until an instance is free (so ``max_queue_size`` counts them). A sequence
batcher's ``oldest`` strategy batches its lanes with it (:mod:`._sequence`). What it
shares with the FIFO scheduler is in :mod:`._scheduler`.

A request that meets an idle instance and an empty queue runs at once, alone, unless it
is *gathered* (``InferRequest.gathered``: the next step of ensemble requests whose
previous step ran as one batch, which all arrive in the same pass of the event loop):
then the batch is formed once that pass is over, so that they run as one batch, as
Triton's batcher thread, waking a moment after its queue fills, often does.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._errors import Code, CoreError
from ._queue import Pending, PriorityQueue
from ._rate_limit import Gate
from ._scheduler import Executor, Scheduler, _now, reschedule_refused
from ._trace import trace_queued
from ._types import InferRequest, InferResponse
from .model_config_pb2 import ModelConfig

if TYPE_CHECKING:
    from ._backend_api import ModelInstance
    from ._stats import ModelStats

__all__ = ["BatchingRules", "DynamicBatcher"]


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
        self._pump_due = False
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
            and not req.gathered
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
            if item.request.gathered:
                self._pump_after_pass()
            else:
                self._pump()
        elif queue.has_timeouts:
            self._arm_expiry()

    def _pump_after_pass(self) -> None:
        """Pump once the event loop's current pass is over (once, however many requests
        arrive in it): requests that arrive together are batched together."""
        if not self._pump_due:
            self._pump_due = True
            asyncio.get_running_loop().call_soon(self._due_pump)

    def _due_pump(self) -> None:
        self._pump_due = False
        self._pump()

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
                if len(items) > 1:
                    for response in responses:
                        response.batched = True
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
