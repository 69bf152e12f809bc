"""``bench --collect-metrics``: the server's Prometheus metrics sampled during a level.

Per GPU (label ``gpu_uuid``): average utilization and power, the largest memory used and
the total memory -- perf_analyzer's four columns -- plus, for every counter of the
model, how much it grew over the level.
"""

from __future__ import annotations

import statistics
import threading
from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._metrics import Sample
    from ._settings import Settings

__all__ = ["MetricsSampler"]

_GPU = {
    "nv_gpu_utilization": "gpu_utilization",
    "nv_gpu_power_usage": "gpu_power_usage",
    "nv_gpu_memory_used_bytes": "gpu_memory_used_max",
    "nv_gpu_memory_total_bytes": "gpu_memory_total",
}


class MetricsSampler:
    """Samples ``url`` every ``interval_s`` between ``start()`` and ``stop()``."""

    def __init__(self, settings: Settings, url: str, interval_s: float, model: str) -> None:
        self._settings = settings
        self._url = url
        self._interval = interval_s
        self._model = model
        self._samples: list[list[Sample]] = []
        self._errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        from ._errors import CliError
        from ._metrics import fetch_metrics, parse_metrics

        try:
            self._samples.append(parse_metrics(fetch_metrics(self._settings, self._url)))
        except CliError as e:
            self._errors.append(e.format_message())

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self._interval):
                self._sample()
                return

    def start(self) -> None:
        """Take the first sample and go on in the background."""
        self._stop.clear()
        self._samples, self._errors = [], []
        self._thread = threading.Thread(target=self._run, name="bench-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """Stop sampling; the summary of the level."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.summary()

    def summary(self) -> dict[str, Any]:
        """GPU figures per GPU, counter growth for the model, sample and error counts."""
        gpu: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for samples in self._samples:
            for s in samples:
                if s.name in _GPU:
                    gpu[_GPU[s.name]][s.labels.get("gpu_uuid", "gpu")].append(s.value)
        out: dict[str, Any] = {"samples": len(self._samples), "errors": self._errors[:3]}
        for key, per_gpu in gpu.items():
            pick = max if key.endswith("_max") or key == "gpu_memory_total" else statistics.fmean
            out[key] = {g: pick(v) for g, v in per_gpu.items()}
        out["counters"] = self._growth()
        return out

    def _growth(self) -> dict[str, float]:
        if len(self._samples) < 2:
            return {}

        def counters(samples: list[Sample]) -> dict[str, float]:
            return {
                s.selector: s.value
                for s in samples
                if s.type == "counter" and s.labels.get("model") == self._model
            }

        first, last = counters(self._samples[0]), counters(self._samples[-1])
        return {k: last[k] - first[k] for k in last if k in first}
