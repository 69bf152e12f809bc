"""Per-version inference statistics (the statistics extension and the metrics share them)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["ModelStats"]

_STAGES = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")


class ModelStats:
    """Counts and nanosecond totals as ``GET .../stats`` reports them."""

    __slots__ = ("batches", "execution_count", "inference_count", "last_inference", "stages")

    def __init__(self) -> None:
        self.last_inference = 0
        self.inference_count = 0
        self.execution_count = 0
        self.stages: dict[str, list[int]] = {k: [0, 0] for k in _STAGES}
        self.batches: dict[int, list[int]] = {}

    def record_execution(
        self,
        batch_size: int,
        requests: int,
        input_ns: int,
        infer_ns: int,
        output_ns: int,
        failed: bool = False,
    ) -> None:
        """One ``execute``; a failed one shows only in the execution and batch counts."""
        self.execution_count += 1
        if not failed:
            self.inference_count += batch_size
            self.last_inference = time.time_ns() // 1_000_000
            st = self.stages
            for key, ns in (
                ("compute_input", input_ns),
                ("compute_infer", infer_ns),
                ("compute_output", output_ns),
            ):
                st[key][0] += requests
                st[key][1] += ns
        b = self.batches.setdefault(batch_size, [0, 0, 0, 0, 0, 0])
        b[0] += 1
        b[1] += input_ns
        b[2] += 1
        b[3] += infer_ns
        b[4] += 1
        b[5] += output_ns

    def record_request(self, ok: bool, total_ns: int, queue_ns: int) -> None:
        st = self.stages
        s = st["success" if ok else "fail"]
        s[0] += 1
        s[1] += total_ns
        if ok:
            q = st["queue"]
            q[0] += 1
            q[1] += queue_ns

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
            "inference_stats": {
                "success": pair(st["success"]),
                "fail": pair(st["fail"]),
                "queue": pair(st["queue"]),
                "compute_input": pair(st["compute_input"]),
                "compute_infer": pair(st["compute_infer"]),
                "compute_output": pair(st["compute_output"]),
                "cache_hit": {"count": 0, "ns": 0},
                "cache_miss": {"count": 0, "ns": 0},
            },
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
