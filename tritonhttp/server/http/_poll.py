"""Polling for a quick client's next request instead of letting the event loop sleep.

A client that sends its requests back to back sends the next one as soon as it has read
an answer. If the event loop goes to sleep in between, the core it runs on may go idle,
and waking an idle core (above all on a virtual machine) can take longer than the client
takes to send. So after answering such a client, a connection polls the open sockets for
a moment before the loop may sleep, yielding the core to whoever else wants it while it
does. The connection starts the poll as a loop callback once the answered request's
application has ended, so that what that request still does after its response is sent
happens while the client reads the answer, not between the client and its next request.

:class:`NextRequestPoll` holds the policy (which requests count as back to back, when a
poll is worth it, how long it lasts) and runs the poll; each connection keeps the time of
its last answer and whether its current request came quickly after it.
"""

from __future__ import annotations

import select
import time
from collections.abc import Iterable
from typing import ClassVar

from ..support import _platform

__all__ = ["NextRequestPoll"]


class NextRequestPoll:
    """When and for how long a connection polls for its client's next request.

    ``window_s`` (``--http-busy-wait-us``, default 300 µs) is both how long one poll lasts
    and how soon after the previous answer on its connection a request must arrive to
    count as *quick* (its client sends back to back). It is a bound on the CPU one poll
    may spend, long enough to cover a local client's turn between reading an answer and
    sending its next request, short enough that a client that has paused costs little.
    After answering a quick request, with no other request of that connection waiting, the
    connection polls unless more than :attr:`MAX_CONNECTIONS` connections are open.
    """

    __slots__ = ("window_s",)

    #: the most open connections with which a poll still runs. Every open socket is
    #: polled, and with many clients the loop seldom sleeps between requests anyway (one
    #: client's request arrives while another's is served): spinning a core then only
    #: takes time from the requests in progress. A handful of clients (as many as a small
    #: machine's cores serve one at a time) is where a sleeping loop is likely
    MAX_CONNECTIONS: ClassVar[int] = 8

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s

    @classmethod
    def for_option(cls, busy_wait_us: int, platform: str | None = None) -> NextRequestPoll | None:
        """The poll for ``--http-busy-wait-us``; None (no polling) for 0, or where the
        platform (``platform``, default this one) lacks ``select.poll`` or
        ``os.sched_yield`` (Windows)."""
        if busy_wait_us <= 0 or not _platform.can_busy_poll(platform):
            return None
        return cls(busy_wait_us / 1e6)

    def is_quick(self, answered_at: float) -> bool:
        """Whether a request arriving now, its connection's previous answer sent at
        ``answered_at`` (``time.perf_counter``), came back to back."""
        return time.perf_counter() - answered_at < self.window_s

    def admits(self, open_connections: int) -> bool:
        """Whether a poll may run with ``open_connections`` connections open."""
        return open_connections <= self.MAX_CONNECTIONS

    def wait(self, fds: Iterable[int]) -> None:
        """Return once one of ``fds`` (negative ones are skipped) has data to read, or
        after ``window_s``: the loop then finds it at once, without sleeping."""
        poller = select.poll()  # (no FD_SETSIZE limit, unlike select())
        for fd in fds:
            if fd >= 0:
                poller.register(fd, select.POLLIN)
        deadline = time.perf_counter() + self.window_s
        while not poller.poll(0):
            if time.perf_counter() >= deadline:
                return
            _platform.yield_cpu()  # whoever else wants this core goes first
