"""The dynamic batcher's request queue: priority levels, each with its own queue policy.

Levels are served in ascending order (1 is the most urgent); inside a level, requests
wait in arrival order, and requests whose timeout expired under a ``DELAY`` policy wait
behind the others. A policy bounds the level's queue (``max_queue_size``) and gives each
request a deadline: the policy's ``default_timeout_microseconds``, or the request's own
``timeout`` when ``allow_timeout_override`` is set and it is shorter (a request cannot
extend the policy's timeout, and without a default timeout it has none).

Triton's batcher thread first looks at a request a few microseconds after it was queued,
even when an instance is idle: a ``REJECT`` deadline shorter than that (a request
``timeout`` of a few µs) has always passed by then, and the request is answered
``Request timeout expired`` instead of running. Such a request is queued here with its
deadline already past, so it never takes the idle-instance shortcut.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .model_config_pb2 import ModelDynamicBatching, ModelQueuePolicy

if TYPE_CHECKING:
    from ._backend_api import ModelInstance
    from ._types import InferRequest, InferResponse

__all__ = ["Pending", "PriorityQueue"]

#: how long after queueing a request Triton's batcher examines it at the earliest (ns):
#: Triton 2.51 always rejects a request timeout of 1-5 µs, rarely one of 50 µs, never 100
_HANDOVER_NS = 10_000


def _passed_at_once(q: _LevelQueue, timeout_ns: int) -> bool:
    """Whether a deadline ``timeout_ns`` away has passed when Triton's batcher first
    looks (a REJECT deadline shorter than the hand-over)."""
    return not q.delay_action and 0 < timeout_ns < _HANDOVER_NS


class Pending:
    """A queued request: its future, when it arrived, its deadline and batch size."""

    __slots__ = ("batch", "deadline_ns", "enqueue_ns", "future", "instance", "level", "request")

    def __init__(
        self,
        request: InferRequest,
        future: asyncio.Future[InferResponse],
        enqueue_ns: int,
    ) -> None:
        self.request = request
        self.future = future
        self.enqueue_ns = enqueue_ns
        self.deadline_ns = 0
        self.level = 0
        self.batch = max(1, request.batch_size)
        #: the instance handed to this request (FIFO scheduling: it runs there itself)
        self.instance: ModelInstance | None = None


class _LevelQueue:
    __slots__ = ("allow_override", "delay_action", "delayed", "main", "max_size", "timeout_ns")

    def __init__(self, policy: ModelQueuePolicy) -> None:
        self.main: collections.deque[Pending] = collections.deque()
        self.delayed: collections.deque[Pending] = collections.deque()
        self.max_size = policy.max_queue_size
        self.timeout_ns = policy.default_timeout_microseconds * 1000
        self.allow_override = policy.allow_timeout_override
        self.delay_action = policy.timeout_action == ModelQueuePolicy.DELAY

    def __len__(self) -> int:
        return len(self.main) + len(self.delayed)


class PriorityQueue:
    """Requests by priority level, with Triton's queue policies."""

    def __init__(self, config: ModelDynamicBatching | None) -> None:
        default = config.default_queue_policy if config is not None else ModelQueuePolicy()
        self.levels = config.priority_levels if config is not None else 0
        self.default_level = (
            config.default_priority_level if config is not None and self.levels else 0
        )
        self._default_policy = default
        self._policies: dict[int, ModelQueuePolicy] = (
            dict(config.priority_queue_policy.items()) if config is not None and self.levels else {}
        )
        self._queues: dict[int, _LevelQueue] = {}
        self._order: list[int] = []
        self.size = 0
        #: batch size of everything queued (the batcher's wake-up test uses it)
        self.batch_total = 0
        policies = [default, *self._policies.values()]
        #: whether payloads may be formed ahead of a free instance (Triton's prefetching)
        self.prefetching = self.levels == 0 and not (
            default.default_timeout_microseconds
            or default.allow_timeout_override
            or default.max_queue_size
        )
        self.has_timeouts = any(p.default_timeout_microseconds for p in policies)

    def __len__(self) -> int:
        return self.size

    def level_of(self, priority: int) -> int:
        """Triton's mapping: 0 and values above the configured levels mean the default."""
        if self.levels and 1 <= priority <= self.levels:
            return priority
        return self.default_level

    def _queue(self, level: int) -> _LevelQueue:
        q = self._queues.get(level)
        if q is None:
            q = self._queues[level] = _LevelQueue(self._policies.get(level, self._default_policy))
            self._order = sorted(self._queues)
        return q

    def full(self, level: int) -> bool:
        q = self._queue(level)
        return bool(q.max_size) and len(q) >= q.max_size

    def _timeout_ns(self, q: _LevelQueue, request: InferRequest) -> int:
        timeout_ns = q.timeout_ns
        if q.allow_override:
            override = request.timeout_us * 1000
            if override and override < timeout_ns:
                timeout_ns = override
        return timeout_ns

    def expires_at_once(self, level: int, request: InferRequest) -> bool:
        """Whether Triton's batcher would find ``request`` past a REJECT deadline the
        first time it looks at it (see the module's note)."""
        if not self.has_timeouts:
            return False
        q = self._queue(level)
        return _passed_at_once(q, self._timeout_ns(q, request))

    def push(self, item: Pending, level: int, now_ns: int) -> None:
        """Queue ``item`` (the caller checked :meth:`full`); sets its deadline."""
        q = self._queue(level)
        timeout_ns = self._timeout_ns(q, item.request)
        if _passed_at_once(q, timeout_ns):
            timeout_ns = -1  # (already past when the batcher first looks)
        item.deadline_ns = now_ns + timeout_ns if timeout_ns else 0
        item.level = level
        q.main.append(item)
        self.size += 1
        self.batch_total += item.batch

    def _forget(self, item: Pending) -> None:
        self.size -= 1
        self.batch_total -= item.batch

    def remove(self, item: Pending) -> bool:
        q = self._queues.get(item.level)
        if q is None:
            return False
        for dq in (q.main, q.delayed):
            try:
                dq.remove(item)
            except ValueError:
                continue
            self._forget(item)
            return True
        return False

    def walk(
        self,
        now_ns: int,
        reject: Callable[[Pending], None],
        cancel: Callable[[Pending], None],
    ) -> Iterator[Pending]:
        """Queued requests in service order, applying the policies on the way.

        Cancelled requests and requests past a REJECT deadline are taken out (handed to
        ``cancel``/``reject``); past a DELAY deadline they move behind their level.
        Only what the caller consumes is examined.
        """
        for level in self._order:
            q = self._queues[level]
            main = q.main
            i = 0
            while i < len(main):
                item = main[i]
                if item.request.cancelled:
                    del main[i]
                    self._forget(item)
                    cancel(item)
                    continue
                if item.deadline_ns and now_ns > item.deadline_ns:
                    del main[i]
                    if q.delay_action:
                        item.deadline_ns = 0
                        q.delayed.append(item)
                    else:
                        self._forget(item)
                        reject(item)
                    continue
                yield item
                i += 1
            delayed = q.delayed
            i = 0
            while i < len(delayed):
                item = delayed[i]
                if item.request.cancelled:
                    del delayed[i]
                    self._forget(item)
                    cancel(item)
                    continue
                yield item
                i += 1

    def pop(self) -> Pending:
        """The next request in service order (after a :meth:`walk` cleaned the head)."""
        for level in self._order:
            q = self._queues[level]
            if q.main:
                item = q.main.popleft()
            elif q.delayed:
                item = q.delayed.popleft()
            else:
                continue
            self._forget(item)
            return item
        raise IndexError("pop from an empty queue")

    def reject_expired(self, now_ns: int, reject: Callable[[Pending], None]) -> None:
        """Take out every request past a REJECT deadline (while no instance is free)."""
        for q in self._queues.values():
            if q.delay_action or not q.timeout_ns:
                continue
            keep = collections.deque(
                p for p in q.main if not (p.deadline_ns and now_ns > p.deadline_ns)
            )
            if len(keep) != len(q.main):
                expired = [p for p in q.main if p.deadline_ns and now_ns > p.deadline_ns]
                q.main = keep
                for item in expired:
                    self._forget(item)
                    reject(item)

    def closest_deadline(self) -> int:
        """The earliest deadline of a queued request under a REJECT policy (0: none)."""
        best = 0
        for q in self._queues.values():
            if q.delay_action or not q.timeout_ns:
                continue
            for p in q.main:
                if p.deadline_ns and (best == 0 or p.deadline_ns < best):
                    best = p.deadline_ns
        return best
