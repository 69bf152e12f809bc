"""Summary statistics of a metric, as genai-perf reports them."""

from __future__ import annotations

import math
import statistics
from typing import Any

__all__ = ["STATS", "finite", "interpolated", "summary"]

#: The statistics of every metric, in the order they are shown.
#: genai-perf's percentiles: p1, p5, p10, p25, p50, p75, p90, p95 and p99.
STATS = ("avg", "min", "max", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std")
_PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)


def finite(value: Any) -> Any:
    """``value`` with NaN and infinities (nested in dicts and lists) as None: JSON has
    neither, and a figure that could not be measured is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def interpolated(ordered: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of an ascending list, linearly interpolated
    between the closest ranks (numpy's default); NaN when empty."""
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: list[float]) -> dict[str, float]:
    """avg, min, max, p1 ... p99 (genai-perf's percentiles) and std (population) of
    ``values``."""
    ordered = sorted(values)
    if not ordered:
        return dict.fromkeys(STATS, math.nan)
    out = {"avg": statistics.fmean(ordered), "min": ordered[0], "max": ordered[-1]}
    for q in _PERCENTILES:
        out[f"p{q}"] = interpolated(ordered, q)
    out["std"] = statistics.pstdev(ordered) if len(ordered) > 1 else 0.0
    return out
