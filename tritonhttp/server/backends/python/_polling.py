"""When a process polls for the other side's next message instead of sleeping.

A process that sleeps in ``epoll``/``recv`` pays a wake-up when the message comes: tens
of microseconds on a virtual machine, as much as a quick model's whole ``execute``. For
quick exchanges polling a short while is cheaper; for slow ones it only burns a core
the other side may need. Both sides' rules live here, set by the backend option
``busy-wait-us`` (0 turns both off):

* :class:`ReplyPoll` — the server's event loop waiting for a worker's answer;
* :class:`MessagePoll` — a worker waiting for its next message from the server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ...support import _platform

__all__ = ["MessagePoll", "ReplyPoll", "stay_awake"]


def stay_awake(loop: asyncio.AbstractEventLoop, done: asyncio.Future[Any], until_ns: int) -> None:
    """Keep ``loop`` from sleeping until ``done`` or ``until_ns``: a callback that queues
    itself again makes each pass of the loop poll its sockets without blocking."""
    if not done.done() and time.monotonic_ns() < until_ns:
        loop.call_soon(stay_awake, loop, done, until_ns)


class ReplyPoll:
    """How the server's event loop waits for a worker's answer; one per backend, shared
    by its worker instances (it counts the executes in flight over all of them).

    The loop polls only for a batch of one request (a batch of several means several
    clients are sending: their traffic wakes the loop anyway, and on a loaded machine a
    turning loop takes the CPU the worker needs), only for a *quick* model (its last
    round trip was shorter than the poll), and at most :attr:`CAP_US`. It polls
    *inline* — reading the worker's socket right inside ``execute``, serving no other
    connection meanwhile — only for a lone request: no other execute in flight, this
    instance idle for at least :attr:`IDLE_NS` before (the client is not pipelining) and
    the request not queued for more than :attr:`FRESH_NS`. Otherwise it keeps the loop
    turning without sleeping (:func:`stay_awake`), serving every connection while it
    waits.
    """

    #: the longest the server polls for one answer (µs), whatever ``busy-wait-us`` says
    CAP_US = 300
    #: inline only when this instance's previous execute ended at least this long ago (ns)
    IDLE_NS = 60_000
    #: inline only when the request reached its execute within this long (ns)
    FRESH_NS = 100_000

    __slots__ = ("active",)

    def __init__(self) -> None:
        #: executes in flight over every worker instance of the backend
        self.active = 0

    def budget_ns(self, busy_wait_us: int, last_rtt_ns: int, batch_size: int = 1) -> int:
        """How long to poll for the answer to a batch of ``batch_size`` requests (0: do
        not poll)."""
        spin = min(busy_wait_us, self.CAP_US) * 1000
        return spin if spin and last_rtt_ns < spin and batch_size == 1 else 0

    def inline(self, started_ns: int, last_end_ns: int, accepted_ns: int) -> bool:
        """Whether to poll inline (see the class doc) for the execute that began at
        ``started_ns``."""
        return (
            self.active == 1
            and started_ns - last_end_ns > self.IDLE_NS
            and started_ns - accepted_ns < self.FRESH_NS
        )

    @staticmethod
    def poll_inline(read: Callable[[], None], done: asyncio.Future[Any], until_ns: int) -> None:
        """Read the worker's socket (``read``) until ``done`` or ``until_ns``, yielding the
        CPU between reads (whoever else wants it goes first)."""
        while time.monotonic_ns() < until_ns:
            read()
            if done.done():
                return
            _platform.yield_cpu()


class MessagePoll:
    """How a worker waits for its next message: it polls for ``spin_s`` seconds when the
    previous message came within that time of its asking (a busy instance gets its next
    request within microseconds), else it sleeps in ``recv`` at once."""

    __slots__ = ("gap_s", "spin_s")

    def __init__(self, spin_us: int = 0) -> None:
        self.spin_s = spin_us / 1e6
        #: how long the previous wait lasted
        self.gap_s = 0.0

    def worth_it(self) -> bool:
        return bool(self.spin_s) and self.gap_s < self.spin_s
