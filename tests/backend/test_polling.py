"""When the server and its workers poll instead of sleeping (`_polling`).

``stay_awake`` keeps the server's event loop turning while a queued request's execute
is in flight: it re-queues itself with ``call_soon`` so that the loop polls its sockets
instead of sleeping until the worker answers. What matters is that it stops: at once
when the answer comes, and at its deadline when none does (a spinner left behind would
burn a core for ever). The loop is a real one; a thin wrapper counts the passes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tritonhttp.server.backends.python._polling import MessagePoll, ReplyPoll, stay_awake


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
        stay_awake(counting, done, time.monotonic_ns() + 10**10)  # type: ignore[arg-type]
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
        stay_awake(counting, done, time.monotonic_ns() + 5_000_000)  # type: ignore[arg-type]
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
        stay_awake(counting, done, time.monotonic_ns() + 10**10)  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        return counting.calls

    assert asyncio.run(main()) == 0


def test_the_server_polls_only_for_a_quick_model_and_never_past_its_cap() -> None:
    """A model whose last round trip took longer than the poll is waited for asleep; the
    poll never lasts longer than the cap, whatever ``busy-wait-us`` says; 0 turns it off.
    A batch of several requests is waited for asleep, however quick the model."""
    poll = ReplyPoll()
    assert poll.budget_ns(1000, 50_000) == ReplyPoll.CAP_US * 1000
    assert poll.budget_ns(100, 50_000) == 100_000
    assert poll.budget_ns(100, 150_000) == 0
    assert poll.budget_ns(0, 0) == 0
    assert poll.budget_ns(1000, 50_000, batch_size=1) == ReplyPoll.CAP_US * 1000
    assert poll.budget_ns(1000, 50_000, batch_size=2) == 0


def test_the_server_polls_inline_only_for_a_lone_fresh_request() -> None:
    """Inline (serving nobody else meanwhile) only when no other execute is in flight,
    the instance was idle before and the request did not queue."""
    poll = ReplyPoll()
    now = 10_000_000_000
    idle_since = now - 2 * ReplyPoll.IDLE_NS
    fresh = now - ReplyPoll.FRESH_NS // 2
    poll.active = 1
    assert poll.inline(now, idle_since, fresh)
    assert not poll.inline(now, now - ReplyPoll.IDLE_NS // 2, fresh)  # pipelining client
    assert not poll.inline(now, idle_since, now - 2 * ReplyPoll.FRESH_NS)  # it queued
    poll.active = 2
    assert not poll.inline(now, idle_since, fresh)  # another execute is in flight


def test_a_worker_spins_only_after_a_quick_gap() -> None:
    poll = MessagePoll(1000)
    assert poll.worth_it()
    poll.gap_s = 0.01  # the last message took 10 ms to come: sleep next time
    assert not poll.worth_it()
    assert not MessagePoll(0).worth_it()
