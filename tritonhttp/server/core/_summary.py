"""Latency summaries (``--metrics-config summary_latencies=true``): a count, a sum and
quantiles over a sliding time window, per model version and stage.

The window is Triton's: ``MAX_AGE_S`` seconds in ``AGE_BUCKETS`` slices, so quantiles
cover between 48 and 60 seconds of observations. Each slice keeps its observations
(whole microseconds, in numpy arrays) and the quantiles are exact (the nearest rank),
where Triton's estimator answers within the rank error each quantile is given. A slice
keeps at most ``SLICE_CAP`` observations: past that it keeps a uniform random sample of
them (reservoir sampling), weighted by what it stands for, which bounds the memory.

Observations wait in a list and go into the slice in batches, so the request path pays
one ``append`` per observation.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "AGE_BUCKETS",
    "DEFAULT_QUANTILES",
    "MAX_AGE_S",
    "SLICE_CAP",
    "LatencySummaries",
    "Summary",
]

#: Triton's quantiles and their rank errors when ``summary_quantiles`` is not given
DEFAULT_QUANTILES = ((0.5, 0.05), (0.9, 0.01), (0.95, 0.001), (0.99, 0.001), (0.999, 0.001))
MAX_AGE_S = 60.0
AGE_BUCKETS = 5
SLICE_CAP = 1 << 17
_BATCH = 256  # observations waiting before they go into the slice
_rng = np.random.default_rng()


class _Slice:
    """The observations of one slice of the window: all of them, or a uniform sample of
    ``SLICE_CAP`` once there are more (``count`` says how many there were)."""

    __slots__ = ("chunks", "count", "sample")

    def __init__(self) -> None:
        self.chunks: list[np.ndarray] = []
        self.sample: np.ndarray | None = None
        self.count = 0

    def add(self, batch: np.ndarray) -> None:
        start, self.count = self.count, self.count + len(batch)
        if self.sample is None:
            self.chunks.append(batch)
            if self.count > SLICE_CAP:
                everything = np.concatenate(self.chunks)
                self.sample = _rng.choice(everything, SLICE_CAP, replace=False)
                self.chunks = []
            return
        # the i-th observation of the slice replaces a random kept one with
        # probability SLICE_CAP / i (duplicate slots: the later one wins, as in turn)
        slots = _rng.integers(0, np.arange(start + 1, self.count + 1))
        keep = slots < SLICE_CAP
        self.sample[slots[keep]] = batch[keep]

    def kept(self) -> np.ndarray:
        if self.sample is not None:
            return self.sample
        return np.concatenate(self.chunks) if self.chunks else np.empty(0, dtype=np.int64)


class Summary:
    """One summary: count and sum since start, quantiles over the window."""

    __slots__ = ("_pending", "_slice_end", "_slices", "count", "quantiles", "sum")

    def __init__(self, quantiles: Sequence[tuple[float, float]], now: float) -> None:
        self.quantiles = tuple(quantiles)
        self.count = 0
        self.sum = 0
        self._pending: list[int] = []
        self._slices: deque[_Slice] = deque([_Slice()], maxlen=AGE_BUCKETS)
        self._slice_end = now + MAX_AGE_S / AGE_BUCKETS

    @property
    def slice_end(self) -> float:
        """When the current slice ends."""
        return self._slice_end

    def observe(self, value: int, times: int = 1) -> None:
        """Record ``value`` (``times`` times)."""
        self.count += times
        self.sum += value * times
        pending = self._pending
        if times == 1:
            pending.append(value)
        else:
            pending.extend([value] * times)
        if len(pending) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._slices[-1].add(np.array(self._pending, dtype=np.int64))
            self._pending = []

    def rotate(self, now: float) -> None:
        """Put away what waits, then start the slices whose time has come (the oldest
        fall out of the window)."""
        self._flush()
        step = MAX_AGE_S / AGE_BUCKETS
        if now < self._slice_end:
            return
        due = int((now - self._slice_end) // step) + 1
        for _ in range(min(due, AGE_BUCKETS)):
            self._slices.append(_Slice())
        self._slice_end += due * step

    def values(self, now: float) -> list[tuple[float, float]]:
        """``(quantile, value)`` for each configured quantile, over the window (NaN
        without observations)."""
        self.rotate(now)
        parts = [(s.kept(), s.count) for s in self._slices if s.count]
        if not parts:
            return [(q, math.nan) for q, _ in self.quantiles]
        data = np.concatenate([kept for kept, _ in parts])
        weight = np.concatenate([np.full(len(kept), count / len(kept)) for kept, count in parts])
        order = np.argsort(data, kind="stable")
        data, cumulative = data[order], np.cumsum(weight[order])
        out = []
        for q, _ in self.quantiles:
            at = int(np.searchsorted(cumulative, q * cumulative[-1] - 1e-9, side="left"))
            out.append((q, float(data[min(max(at, 0), len(data) - 1)])))
        return out


class LatencySummaries:
    """A model version's summaries, in microseconds: ``request``, ``queue``, the three
    compute stages and the response cache's ``cache_hit`` and ``cache_miss``."""

    STAGES = (
        "request",
        "queue",
        "compute_input",
        "compute_infer",
        "compute_output",
        "cache_hit",
        "cache_miss",
    )

    def __init__(
        self,
        quantiles: Sequence[tuple[float, float]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        now = clock()
        self.by_stage = {stage: Summary(quantiles, now) for stage in self.STAGES}
        self._slice_end = now + MAX_AGE_S / AGE_BUCKETS

    def observe(self, stage: str, ns: int, times: int = 1) -> None:
        """Record ``ns`` in whole microseconds, as Triton does (``times`` times)."""
        now = self.clock()
        if now >= self._slice_end:
            # (every summary turns at once, so no waiting observation lands in the
            # slice after its own)
            for summary in self.by_stage.values():
                summary.rotate(now)
            self._slice_end = self.by_stage["request"].slice_end
        self.by_stage[stage].observe(max(0, ns) // 1000, times)
