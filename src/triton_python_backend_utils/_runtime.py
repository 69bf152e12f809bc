"""What the hosting server provides to pb_utils: logging, BLS, model control, metrics.

A server installs its :class:`Runtime` with :func:`install`. Outside a server the
default runtime applies: ``Logger`` writes Triton-formatted lines to stderr, metrics live
in a local store (so model code can be unit-tested), and BLS or model control raise a
clear :class:`TritonModelException`.
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._errors import TritonModelException

if TYPE_CHECKING:
    from ._metrics import MetricStore
    from ._request import InferenceRequest, InferenceResponse

__all__ = ["ResponseStream", "Runtime", "current", "install"]

_OUTSIDE = (
    "is only available inside a model served by Triton or tritonhttp "
    "(python -m tritonhttp.server); this process runs no server"
)

#: (response or None, final flag) as a callee delivers it to a BLS caller
StreamItem = tuple["InferenceResponse | None", bool]


class ResponseStream:
    """Responses of one BLS request, pushed by the server side, taken by the model.

    ``waiter(predicate)`` blocks until ``predicate()`` holds; a worker process passes one
    that keeps reading its control channel meanwhile, and ``pumped()``: whether a thread
    reads that channel now (then an awaiting coroutine is woken when its item comes;
    otherwise, as under ``asyncio.run`` inside a plain ``execute``, it waits on
    ``waiter`` in the loop's executor).
    """

    def __init__(
        self,
        waiter: Callable[[Callable[[], bool]], None] | None = None,
        pumped: Callable[[], bool] | None = None,
    ) -> None:
        self._items: collections.deque[StreamItem] = collections.deque()
        self._cond = threading.Condition()
        self._waiter = waiter
        self._pumped = pumped
        self._async: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        #: set by the server side: cancels the callee request (``ResponseIterator.cancel``)
        self.cancel_hook: Callable[[], None] | None = None

    def push(self, response: InferenceResponse | None, final: bool) -> None:
        with self._cond:
            self._items.append((response, final))
            self._cond.notify_all()
            waiters, self._async = self._async, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_resolve, fut)

    def ready(self) -> bool:
        return bool(self._items)

    def get(self) -> StreamItem:
        """The next item, blocking."""
        if not self._items:
            if self._waiter is not None:
                self._waiter(self.ready)
            else:
                with self._cond:
                    while not self._items:
                        self._cond.wait()
        with self._cond:
            return self._items.popleft()

    async def aget(self) -> StreamItem:
        """The next item, awaiting it on the running loop."""
        while True:
            with self._cond:
                if self._items:
                    return self._items.popleft()
                loop = asyncio.get_running_loop()
                fut: asyncio.Future[None] = loop.create_future()
                self._async.append((loop, fut))
            await self._until(loop, fut)

    async def _until(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
        """Await ``fut``, reading the channel in the executor while no thread reads it."""
        waiter, pumped = self._waiter, self._pumped
        if waiter is None or pumped is None:
            await fut
            return
        while not fut.done():
            if not pumped():
                await loop.run_in_executor(None, waiter, self.ready)
                return
            await asyncio.wait((fut,), timeout=0.05)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


_LETTER = {0: "I", 1: "W", 2: "E", 3: "V"}


class Runtime:
    """The runtime outside any server; servers subclass it."""

    def __init__(self) -> None:
        self._store: MetricStore | None = None

    # ------------------------------------------------------------------ context

    def instance_name(self) -> str:
        """Name of the calling model instance (``add_sub_0_0``); ``""`` outside a server."""
        return ""

    def model_dir(self) -> str:
        """The calling model's version directory."""
        return ""

    # ------------------------------------------------------------------ logging

    def log(self, level: int, message: str, file: str, line: int) -> None:
        """Write a model log line (level: 0 info, 1 warning, 2 error, 3 verbose)."""
        t = time.time()
        stamp = time.strftime("%m%d %H:%M:%S", time.localtime(t))
        micros = int((t % 1) * 1_000_000)
        sys.stderr.write(
            f"{_LETTER.get(level, 'I')}{stamp}.{micros:06d} {os.getpid()} {file}:{line}]  "
            f"{message}\n"
        )
        sys.stderr.flush()

    # ------------------------------------------------------------------ BLS

    def check_bls(self) -> None:
        """Raise when BLS is not allowed here (outside ``execute``)."""
        raise TritonModelException(f"BLS {_OUTSIDE}")

    def infer(self, request: InferenceRequest, decoupled: bool) -> ResponseStream:
        """Start a BLS request; its responses arrive on the returned stream."""
        raise TritonModelException(f"BLS {_OUTSIDE}")

    def is_cancelled(self, handle: Any) -> bool:
        """Whether the server request behind ``handle`` was cancelled."""
        return False

    # ------------------------------------------------------------------ model control

    def load_model(self, name: str, config: str, files: dict[str, bytes]) -> None:
        raise TritonModelException(f"load_model {_OUTSIDE}")

    def unload_model(self, name: str, unload_dependents: bool) -> None:
        raise TritonModelException(f"unload_model {_OUTSIDE}")

    def is_model_ready(self, name: str, version: str) -> bool:
        raise TritonModelException(f"is_model_ready {_OUTSIDE}")

    # ------------------------------------------------------------------ metrics

    def metrics(self) -> MetricStore:
        """The metric store behind MetricFamily (a local one outside a server)."""
        if self._store is None:
            from ._metrics import MetricStore

            self._store = MetricStore()
        return self._store

    def family_create(self, name: str, description: str, kind: int) -> int:
        return self.metrics().family_create(self.instance_name(), name, description, kind)

    def family_delete(self, family_id: int) -> None:
        self.metrics().family_delete(family_id)

    def metric_create(
        self, family_id: int, labels: dict[str, str], buckets: list[float] | None
    ) -> int:
        return self.metrics().metric_create(self.instance_name(), family_id, labels, buckets)

    def metric_delete(self, metric_id: int) -> None:
        self.metrics().metric_delete(metric_id)

    def metric_update(self, metric_id: int, op: int, value: float) -> None:
        self.metrics().metric_update(metric_id, op, value)

    def metric_value(self, metric_id: int) -> float:
        return self.metrics().metric_value(metric_id)


_current: Runtime = Runtime()


def current() -> Runtime:
    """The installed runtime."""
    return _current


def install(runtime: Runtime) -> None:
    """Make ``runtime`` serve every pb_utils call of this process."""
    global _current
    _current = runtime
