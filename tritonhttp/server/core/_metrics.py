"""Prometheus metrics with Triton's family names, rendered by prometheus_client."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ._cache import ResponseCache
from ._model import ModelVersion
from ._stats import FAILURE_REASONS

__all__ = ["MetricsCollector", "make_registry", "render"]

_COUNTERS = (
    ("nv_inference_request_success", "Number of successful inference requests, all batch sizes"),
    ("nv_inference_request_failure", "Number of failed inference requests, all batch sizes"),
    ("nv_inference_count", "Number of inferences performed (does not include cached requests)"),
    (
        "nv_inference_exec_count",
        "Number of model executions performed (does not include cached requests)",
    ),
    (
        "nv_inference_request_duration_us",
        "Cumulative inference request duration in microseconds (includes cached requests)",
    ),
    (
        "nv_inference_queue_duration_us",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
    ),
    (
        "nv_inference_compute_input_duration_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
    ),
    (
        "nv_inference_compute_infer_duration_us",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
    ),
    (
        "nv_inference_compute_output_duration_us",
        "Cumulative inference compute output duration in microseconds (does not include "
        "cached requests)",
    ),
)


#: per-model cache counters (only for versions that use the response cache)
_CACHE_COUNTERS = (
    ("nv_cache_num_hits_per_model", "Number of cache hits per model"),
    ("nv_cache_hit_duration_per_model", "Total cache hit duration per model, in microseconds"),
    ("nv_cache_num_misses_per_model", "Number of cache misses per model"),
    (
        "nv_cache_miss_duration_per_model",
        "Total cache miss (insert+lookup) duration per model, in microseconds",
    ),
)

#: server-wide cache gauges (with ``--cache-config``); Triton 2.51's local cache leaves
#: all but the utilisation at 0, and so does this server
_CACHE_GAUGES = (
    ("nv_cache_util", "Cache utilization [0.0 - 1.0]"),
    ("nv_cache_num_entries", "Number of responses stored in response cache"),
    ("nv_cache_num_hits", "Number of cache hits in response cache"),
    ("nv_cache_num_misses", "Number of cache misses in response cache"),
    ("nv_cache_num_lookups", "Number of cache lookups in response cache"),
    ("nv_cache_num_evictions", "Number of cache evictions in response cache"),
    ("nv_cache_lookup_duration", "Total cache lookup duration (hit and miss), in microseconds"),
    ("nv_cache_insertion_duration", "Total cache insertion duration, in microseconds"),
)


class _CpuSampler:
    """CPU utilisation between two scrapes, from /proc/stat (0 where unavailable)."""

    def __init__(self) -> None:
        self._last = self._read()

    @staticmethod
    def _read() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as f:
                parts = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
        return sum(parts), idle

    def utilization(self) -> float:
        now = self._read()
        last, self._last = self._last, now
        if now is None or last is None or now[0] == last[0]:
            return 0.0
        total = now[0] - last[0]
        return max(0.0, min(1.0, 1.0 - (now[1] - last[1]) / total))


def _memory() -> tuple[int, int]:
    try:
        info = {}
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                info[key] = int(rest.split()[0]) * 1024
        total = info.get("MemTotal", 0)
        return total, total - info.get("MemAvailable", info.get("MemFree", 0))
    except (OSError, ValueError, IndexError):
        try:
            pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            pages = 0
        return pages, 0


class MetricsCollector(Collector):
    """Reads the statistics of every loaded version at scrape time."""

    def __init__(
        self, versions: Callable[[], list[ModelVersion]], cache: ResponseCache | None = None
    ) -> None:
        self._versions = versions
        self._cache = cache
        self._cpu = _CpuSampler()

    def collect(self) -> Iterator[Metric]:
        versions = self._versions()
        families = {name: Metric(name, doc, "counter") for name, doc in _COUNTERS}
        cache_families = {name: Metric(name, doc, "counter") for name, doc in _CACHE_COUNTERS}
        with_cache = False
        pending = Metric(
            "nv_inference_pending_request_count",
            "Instantaneous number of pending requests awaiting execution per-model.",
            "gauge",
        )
        for mv in versions:
            labels = {"model": mv.name, "version": str(mv.version)}
            st = mv.stats.stages
            fam = families
            fam["nv_inference_request_success"].add_sample(
                "nv_inference_request_success", labels, st["success"][0]
            )
            failures = mv.stats.failures
            for reason in FAILURE_REASONS:
                fam["nv_inference_request_failure"].add_sample(
                    "nv_inference_request_failure",
                    {"model": mv.name, "reason": reason, "version": str(mv.version)},
                    failures[reason],
                )
            fam["nv_inference_count"].add_sample(
                "nv_inference_count", labels, mv.stats.inference_count
            )
            fam["nv_inference_exec_count"].add_sample(
                "nv_inference_exec_count", labels, mv.stats.execution_count
            )
            for family, stage in (
                ("nv_inference_request_duration_us", None),
                ("nv_inference_queue_duration_us", "queue"),
                ("nv_inference_compute_input_duration_us", "compute_input"),
                ("nv_inference_compute_infer_duration_us", "compute_infer"),
                ("nv_inference_compute_output_duration_us", "compute_output"),
            ):
                ns = (st["success"][1] + st["fail"][1]) if stage is None else st[stage][1]
                fam[family].add_sample(family, labels, ns // 1000)
            if mv.cache is not None:
                hit, miss = st["cache_hit"], st["cache_miss"]
                for (family, _), value in zip(
                    _CACHE_COUNTERS,
                    (hit[0], hit[1] // 1000, miss[0], miss[1] // 1000),
                    strict=True,
                ):
                    cache_families[family].add_sample(family, labels, value)
                with_cache = True
            pending.add_sample("nv_inference_pending_request_count", labels, mv.pending)
        yield from families.values()
        if with_cache:
            yield from cache_families.values()
        yield pending
        for name, doc, value in (
            (
                "nv_pinned_memory_pool_total_bytes",
                "Pinned memory pool total memory size, in bytes",
                0,
            ),
            (
                "nv_pinned_memory_pool_used_bytes",
                "Pinned memory pool used memory size, in bytes",
                0,
            ),
        ):
            m = Metric(name, doc, "gauge")
            m.add_sample(name, {}, value)
            yield m
        cpu = Metric("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", "gauge")
        cpu.add_sample("nv_cpu_utilization", {}, self._cpu.utilization())
        yield cpu
        total, used = _memory()
        for name, doc, value in (
            ("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", total),
            ("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", used),
        ):
            m = Metric(name, doc, "gauge")
            m.add_sample(name, {}, value)
            yield m
        cache = self._cache
        if cache is not None:
            for name, doc in _CACHE_GAUGES:
                m = Metric(name, doc, "gauge")
                m.add_sample(name, {}, cache.utilization if name == "nv_cache_util" else 0)
                yield m


def make_registry(
    versions: Callable[[], list[ModelVersion]], cache: ResponseCache | None = None
) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MetricsCollector(versions, cache))
    return registry


_TOTAL_LINE = re.compile(rb"^# (HELP|TYPE) (\S+)_total ", re.MULTILINE)


def render(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition of the registry.

    prometheus_client names counter families ``<name>_total`` in the HELP/TYPE lines;
    Triton's counters (and models' custom counters) carry no suffix on their samples, so
    it is taken off wherever the samples do not have it.
    """
    text = generate_latest(registry)
    with_total = set(re.findall(rb"^(\S+?_total)[{ ]", text, re.MULTILINE))

    def fix(m: re.Match[bytes]) -> bytes:
        if m.group(2) + b"_total" in with_total:
            return m.group(0)
        return b"# " + m.group(1) + b" " + m.group(2) + b" "

    return _TOTAL_LINE.sub(fix, text)
