"""The server's event loop kept turning while a queued request's execute is in flight.

``_stay_awake`` re-queues itself with ``call_soon`` so that the loop polls its sockets
instead of sleeping until the worker answers. What matters is that it stops: at once
when the answer comes, and at its deadline when none does (a spinner left behind would
burn a core for ever). The loop is a real one; a thin wrapper counts the passes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tritonhttp.server.backends.python._process import _stay_awake


class _Counting:
    """Forwards ``call_soon`` to the real loop, counting the calls."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.calls = 0

    def call_soon(self, callback: Any, *args: Any) -> asyncio.Handle:
        self.calls += 1
        return self.loop.call_soon(callback, *args)


def test_it_turns_until_the_answer_and_then_stops() -> None:
    async def main() -> tuple[int, int, int]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        counting = _Counting(loop)
        _stay_awake(counting, done, time.monotonic_ns() + 10**10)  # type: ignore[arg-type]
        await asyncio.sleep(0.02)
        turning = counting.calls
        done.set_result(None)
        await asyncio.sleep(0.01)
        after_answer = counting.calls
        await asyncio.sleep(0.02)
        return turning, after_answer, counting.calls

    turning, after_answer, later = asyncio.run(main())
    assert turning > 10, "the loop was not kept turning while the answer was awaited"
    assert later == after_answer, "it went on turning after the answer came"


def test_it_stops_at_its_deadline_without_an_answer() -> None:
    async def main() -> tuple[int, int, bool]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        counting = _Counting(loop)
        _stay_awake(counting, done, time.monotonic_ns() + 5_000_000)  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        stopped = counting.calls
        await asyncio.sleep(0.02)
        return stopped, counting.calls, done.done()

    stopped, later, answered = asyncio.run(main())
    assert stopped > 10
    assert later == stopped, "it went on turning past its deadline"
    assert not answered


def test_an_answer_already_there_costs_no_turn() -> None:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        done.set_result(None)
        counting = _Counting(loop)
        _stay_awake(counting, done, time.monotonic_ns() + 10**10)  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        return counting.calls

    assert asyncio.run(main()) == 0
