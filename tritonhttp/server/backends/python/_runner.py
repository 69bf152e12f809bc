"""Runs a model instance's calls one at a time: on its own thread, or inline when fast.

A thread hop costs tens of microseconds, more than a small model's whole ``execute``.
Calls start on the instance's thread; once an instance has answered a run of calls
quickly it executes inline on the event loop, and goes back to its thread as soon as
one call is slow.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["InstanceRunner"]

T = TypeVar("T")

#: calls quicker than this count towards going inline
FAST_CALL_S = 0.0005
#: this many quick calls in a row switch an instance to inline execution
FAST_STREAK = 32
#: an inline call slower than this sends the instance back to its thread
SLOW_INLINE_S = 0.002


class InstanceRunner:
    """Serialises one instance's calls; ``inline`` may be "auto", "always" or "never"."""

    def __init__(self, name: str, inline: str = "auto") -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._mode = inline
        self._inline = inline == "always"
        self._streak = 0

    def _timed(self, fn: Callable[..., T], *args: Any) -> tuple[T, float]:
        t0 = time.perf_counter()
        result = fn(*args)
        return result, time.perf_counter() - t0

    def _account(self, elapsed: float) -> None:
        if self._mode != "auto":
            return
        if elapsed < FAST_CALL_S:
            self._streak += 1
            if self._streak >= FAST_STREAK:
                self._inline = True
        else:
            self._streak = 0

    @property
    def inline(self) -> bool:
        """Whether the next call may run inline (then use :meth:`run_inline`)."""
        return self._inline

    def run_inline(self, fn: Callable[..., T], *args: Any) -> T:
        """Call ``fn`` on the event loop thread, going back to the thread if it was slow."""
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            if self._mode == "auto" and time.perf_counter() - t0 > SLOW_INLINE_S:
                self._inline = False
                self._streak = 0

    def never_inline(self) -> None:
        """This instance must always run on its thread (e.g. it returns coroutines)."""
        self._mode = "never"
        self._inline = False

    async def run(self, fn: Callable[..., T], *args: Any, may_inline: bool = True) -> T:
        if may_inline and self._inline:
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                if self._mode == "auto" and time.perf_counter() - t0 > SLOW_INLINE_S:
                    self._inline = False
                    self._streak = 0
        loop = asyncio.get_running_loop()
        result, elapsed = await loop.run_in_executor(self._executor, self._timed, fn, *args)
        if may_inline:
            self._account(elapsed)
        return result

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run on the instance thread from a non-async context, waiting for the result."""
        return self._executor.submit(fn, *args).result()

    def close(self) -> None:
        self._executor.shutdown(wait=False)
