"""The latency summaries' quantiles and window (``core/_summary.py``), without a server:
exact nearest-rank quantiles, observations leaving the window after 48 to 60 seconds,
and a bounded sample once a slice holds more than its cap."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonhttp.server.core import _summary
from tritonhttp.server.core._summary import DEFAULT_QUANTILES, LatencySummaries, Summary

QUANTILES = ((0.0, 0.1), (0.25, 0.01), (0.5, 0.05), (0.9, 0.01), (1.0, 0.1), (1.5, 0.1))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=700))
def test_quantiles_are_the_nearest_rank(values: list[int]) -> None:
    summary = Summary(QUANTILES, now=0.0)
    for v in values:
        summary.observe(v)
    ordered = sorted(values)
    n = len(ordered)
    for q, got in summary.values(1.0):
        rank = min(max(math.ceil(q * n), 1), n)  # the smallest, the largest past 0 and 1
        assert got == ordered[rank - 1], q
    assert (summary.count, summary.sum) == (n, sum(values))


def test_no_observations_read_nan() -> None:
    summary = Summary(DEFAULT_QUANTILES, now=0.0)
    assert all(math.isnan(v) for _, v in summary.values(0.0))
    assert (summary.count, summary.sum) == (0, 0)


def test_observations_leave_the_window_after_48_to_60_seconds() -> None:
    clock = [0.0]
    summaries = LatencySummaries(((0.5, 0.05),), clock=lambda: clock[0])
    summaries.observe("queue", 9_000_000)  # 9000 µs at t=0
    queue = summaries.by_stage["queue"]
    for t, expected in ((30.0, 9000.0), (47.9, 9000.0), (59.9, 9000.0)):
        clock[0] = t
        assert queue.values(t) == [(0.5, expected)], t
    clock[0] = 61.0
    summaries.observe("queue", 2_000)  # 2 µs, after t=0's slice left
    assert queue.values(61.0) == [(0.5, 2.0)]
    assert (queue.count, queue.sum) == (2, 9002)  # count and sum never forget
    assert math.isnan(queue.values(200.0)[0][1])  # long idle: everything left


def test_a_batch_is_observed_once_per_request() -> None:
    summaries = LatencySummaries(DEFAULT_QUANTILES)
    summaries.observe("compute_infer", 5_500_999, times=4)
    infer = summaries.by_stage["compute_infer"]
    assert (infer.count, infer.sum) == (4, 4 * 5500)  # whole microseconds, as Triton
    assert {v for _, v in infer.values(summaries.clock())} == {5500.0}


def test_a_full_slice_keeps_a_uniform_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its cap a slice keeps a uniform sample of what it saw: memory stays bounded
    and the quantiles stay close to the exact ones."""
    monkeypatch.setattr(_summary, "SLICE_CAP", 2000)
    rng = np.random.default_rng(7)
    values = rng.integers(0, 1_000_000, size=60_000)
    summary = Summary(((0.1, 0.01), (0.5, 0.01), (0.9, 0.01)), now=0.0)
    for v in values.tolist():
        summary.observe(v)
    quantiles = summary.values(1.0)
    (current,) = list(summary._slices)
    assert current.count == 60_000 and len(current.kept()) == 2000
    ordered = np.sort(values)
    for q, got in quantiles:
        rank = np.searchsorted(ordered, got) / len(ordered)
        assert abs(rank - q) < 0.05, (q, rank)
