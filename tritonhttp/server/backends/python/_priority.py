"""Which process gets a core first when the busy processes outnumber the cores.

The server's one event loop reads every request, forms every batch and hands it to a
worker. A worker in a long execute holds its core; when every core is held so, the loop
waits to be scheduled, and the batches it would form wait with it, while a worker that
finished sits idle. :class:`SlowModelPriority` lets a worker whose model is slow step
back (backend option ``slow-model-nice``, 0 turns it off), so that the loop, quick to
run and quick to sleep again, preempts it when it has work.
"""

from __future__ import annotations

from collections.abc import Callable

from ...support import _platform
from ._polling import ReplyPoll

__all__ = ["SlowModelPriority"]


class SlowModelPriority:
    """Lowers a worker's priority once its model proves slow: :attr:`COUNT` executes in
    a row that took more than :attr:`SLOW_NS` per request. Then the worker's nice value
    goes up by ``nice``, for the rest of its life (an unprivileged process cannot take
    it back). A quick model keeps its priority: the loop waits on its answers, and
    preempting it would delay them.
    """

    #: an execute slower than this per request (ns) counts as slow: the longest the
    #: server polls for an answer (``ReplyPoll.CAP_US``), where it stops waiting on it
    SLOW_NS = ReplyPoll.CAP_US * 1000
    #: slow executes in a row that make the model slow
    COUNT = 16

    __slots__ = ("_lower", "nice", "slow_in_a_row")

    def __init__(self, nice: int, lower: Callable[[int], bool] = _platform.lower_priority):
        #: how much the nice value goes up; 0 once it has (or never will)
        self.nice = nice
        self.slow_in_a_row = 0
        self._lower = lower

    def executed(self, elapsed_ns: int, requests: int) -> None:
        """Count an execute of ``requests`` requests that took ``elapsed_ns``."""
        if not self.nice:
            return
        if elapsed_ns <= self.SLOW_NS * requests:
            self.slow_in_a_row = 0
            return
        self.slow_in_a_row += 1
        if self.slow_in_a_row >= self.COUNT:
            self._lower(self.nice)
            self.nice = 0
