"""Per-version inference statistics (the statistics extension and the metrics share them).

What counts where, as Triton 2.51 counts it:

* an ``execute`` adds one execution and, unless it failed, its real requests to
  ``inference_count`` and the compute stages; ``batch_stats`` is keyed by the batch size
  the model saw (sequence-batcher padding included);
* every answered request adds to ``success`` (with its queue time) or ``fail``;
* a request the scheduler refuses after queueing it (timeout, cancellation) is a
  ``fail`` with reason REJECTED or CANCELED; queue-full and validation errors count nowhere;
* a response-cache hit is a ``success`` with a ``queue`` entry and a ``cache_hit``, no
  execution; a miss adds ``cache_miss`` when its response comes back;
* ``last_inference`` is when the last execution ended (failed ones too; not a cache hit).
"""

from __future__ import annotations

import time
from typing import Any

from ._summary import LatencySummaries

__all__ = ["FAILURE_REASONS", "ModelStats"]

#: the stages counted: a request's outcome, then the summaries' stages after ``request``
_STAGES = ("success", "fail", *LatencySummaries.STAGES[1:])

#: the ``reason`` label values of ``nv_inference_request_failure``, in Triton's order
FAILURE_REASONS = ("REJECTED", "CANCELED", "BACKEND", "OTHER")


class ModelStats:
    """Counts and nanosecond totals as ``GET .../stats`` reports them."""

    __slots__ = (
        "batches",
        "execution_count",
        "failures",
        "inference_count",
        "last_inference",
        "stages",
        "summaries",
    )

    def __init__(self) -> None:
        self.last_inference = 0
        self.inference_count = 0
        self.execution_count = 0
        self.stages: dict[str, list[int]] = {k: [0, 0] for k in _STAGES}
        self.batches: dict[int, list[int]] = {}
        #: failed requests per reason (the metrics' ``reason`` label)
        self.failures: dict[str, int] = dict.fromkeys(FAILURE_REASONS, 0)
        #: the latency summaries (``--metrics-config summary_latencies=true``)
        self.summaries: LatencySummaries | None = None

    def record_execution(
        self,
        batch_size: int,
        requests: int,
        input_ns: int,
        infer_ns: int,
        output_ns: int,
        failed: bool = False,
        inferences: int | None = None,
    ) -> None:
        """One ``execute``; a failed one shows only in the execution and batch counts.

        ``batch_size`` is what the model saw (``batch_stats``); ``inferences`` the part
        of it that came from real requests (defaults to ``batch_size``).
        """
        self.execution_count += 1
        self.last_inference = time.time_ns() // 1_000_000  # (failed executions too)
        if not failed:
            self.inference_count += batch_size if inferences is None else inferences
            # (each request of the batch counts the whole execution's times, as in Triton)
            st = self.stages
            s = st["compute_input"]
            s[0] += requests
            s[1] += input_ns * requests
            s = st["compute_infer"]
            s[0] += requests
            s[1] += infer_ns * requests
            s = st["compute_output"]
            s[0] += requests
            s[1] += output_ns * requests
            if self.summaries is not None:
                observe = self.summaries.observe
                observe("compute_input", input_ns, requests)
                observe("compute_infer", infer_ns, requests)
                observe("compute_output", output_ns, requests)
        b = self.batches.get(batch_size)
        if b is None:
            b = self.batches[batch_size] = [0, 0, 0, 0, 0, 0]
        b[0] += 1
        b[1] += input_ns
        b[2] += 1
        b[3] += infer_ns
        b[4] += 1
        b[5] += output_ns

    def record_request(self, ok: bool, total_ns: int, queue_ns: int) -> None:
        """A request the model answered (``ok``) or failed on (reason BACKEND)."""
        st = self.stages
        if ok:
            s = st["success"]
            s[0] += 1
            s[1] += total_ns
            q = st["queue"]
            q[0] += 1
            q[1] += queue_ns
            if self.summaries is not None:
                self.summaries.observe("request", total_ns)
                self.summaries.observe("queue", queue_ns)
        else:
            s = st["fail"]
            s[0] += 1
            s[1] += total_ns
            self.failures["BACKEND"] += 1

    def record_failure(self, reason: str, total_ns: int) -> None:
        """A request the scheduler gave up on: ``REJECTED`` (timeout) or ``CANCELED``."""
        s = self.stages["fail"]
        s[0] += 1
        s[1] += max(0, total_ns)
        self.failures[reason] += 1

    def record_cache_hit(self, total_ns: int, lookup_ns: int) -> None:
        """A request answered from the response cache (``last_inference`` stays: it is
        the end of the last execution)."""
        st = self.stages
        s = st["success"]
        s[0] += 1
        s[1] += total_ns
        q = st["queue"]
        q[0] += 1
        q[1] += max(0, total_ns - lookup_ns)
        h = st["cache_hit"]
        h[0] += 1
        h[1] += lookup_ns
        if self.summaries is not None:  # (not the request's: see the metrics)
            self.summaries.observe("queue", total_ns - lookup_ns)
            self.summaries.observe("cache_hit", lookup_ns)

    def record_cache_miss(self, ns: int) -> None:
        """A looked-up request whose computed response went (or tried to go) into the cache."""
        m = self.stages["cache_miss"]
        m[0] += 1
        m[1] += ns
        if self.summaries is not None:
            self.summaries.observe("cache_miss", ns)

    def as_json(self, name: str, version: int) -> dict[str, Any]:
        def pair(v: list[int]) -> dict[str, int]:
            return {"count": v[0], "ns": v[1]}

        st = self.stages
        return {
            "name": name,
            "version": str(version),
            "last_inference": self.last_inference,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {key: pair(st[key]) for key in _STAGES},
            "response_stats": {},
            "batch_stats": [
                {
                    "batch_size": size,
                    "compute_input": {"count": b[0], "ns": b[1]},
                    "compute_infer": {"count": b[2], "ns": b[3]},
                    "compute_output": {"count": b[4], "ns": b[5]},
                }
                for size, b in sorted(self.batches.items())
            ],
            "memory_usage": [],
        }
