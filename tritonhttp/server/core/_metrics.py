"""Prometheus metrics with Triton's family names: collected by prometheus_client
collectors, written in Triton's text layout by :func:`render`."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
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


#: per-model cache counters (only for versions whose config enables the response cache)
_CACHE_COUNTERS = (
    ("nv_cache_num_hits_per_model", "Number of cache hits per model"),
    ("nv_cache_hit_duration_per_model", "Total cache hit duration per model, in microseconds"),
    ("nv_cache_num_misses_per_model", "Number of cache misses per model"),
    (
        "nv_cache_miss_duration_per_model",
        "Total cache miss (insert+lookup) duration per model, in microseconds",
    ),
)

#: server-wide cache gauges (with ``--cache-config``), in the order of the values
#: :meth:`MetricsCollector.collect` gives them
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


#: the latency summaries (``--metrics-config summary_latencies=true``): family, help,
#: stage of :class:`LatencySummaries`, and which models have it (True: those with the
#: response cache enabled, False: those without, None: all)
_SUMMARIES = (
    (
        "nv_inference_request_summary_us",
        "Summary of inference request duration in microseconds (includes cached requests)",
        "request",
        False,
    ),
    (
        "nv_inference_queue_summary_us",
        "Summary of inference queuing duration in microseconds (includes cached requests)",
        "queue",
        None,
    ),
    (
        "nv_inference_compute_input_summary_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
        "compute_input",
        None,
    ),
    (
        "nv_inference_compute_infer_summary_us",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
        "compute_infer",
        None,
    ),
    (
        "nv_inference_compute_output_summary_us",
        "Cumulative inference compute output duration in microseconds (does not include "
        "cached requests)",
        "compute_output",
        None,
    ),
    (
        "nv_cache_hit_summary_per_model",
        "Summary of cache hit counts/durations per model, in microseconds.",
        "cache_hit",
        True,
    ),
    (
        "nv_cache_miss_summary_per_model",
        "Summary of cache miss counts/durations per model, in microseconds.",
        "cache_miss",
        True,
    ),
)


def _summary_families(versions: list[ModelVersion]) -> Iterator[Metric]:
    """The summaries of the versions that keep them (Triton leaves a model's request
    summary out when its config enables the response cache)."""
    for name, doc, stage, cached in _SUMMARIES:
        family = Metric(name, doc, "summary")
        for mv in versions:
            summaries = mv.stats.summaries
            if summaries is None or (cached is not None and _caches(mv) != cached):
                continue
            labels = {"model": mv.name, "version": str(mv.version)}
            summary = summaries.by_stage[stage]
            family.add_sample(name + "_count", labels, summary.count)
            family.add_sample(name + "_sum", labels, summary.sum)
            for q, value in summary.values(summaries.clock()):
                family.add_sample(name, {**labels, "quantile": repr(q)}, value)
        yield family


def _caches(mv: ModelVersion) -> bool:
    """Whether the version's config enables the response cache (with or without a
    cache on the server, as Triton decides which cache metrics a model has)."""
    return mv.cache is not None or (mv.config is not None and mv.config.response_cache.enable)


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
        self,
        versions: Callable[[], list[ModelVersion]],
        cache: ResponseCache | None = None,
        *,
        cpu: bool = True,
        latency_counters: bool = True,
    ) -> None:
        self._versions = versions
        self._cache = cache
        self._cpu = _CpuSampler() if cpu else None
        self._latency_counters = latency_counters

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
                ns = st["success" if stage is None else stage][1]  # (failures count nowhere)
                fam[family].add_sample(family, labels, ns // 1000)
            # (Triton lists a model's cache counters when its config enables the cache,
            # with or without a cache on the server)
            if _caches(mv):
                hit, miss = st["cache_hit"], st["cache_miss"]
                for (family, _), value in zip(
                    _CACHE_COUNTERS,
                    (hit[0], hit[1] // 1000, miss[0], miss[1] // 1000),
                    strict=True,
                ):
                    cache_families[family].add_sample(family, labels, value)
                with_cache = True
            pending.add_sample("nv_inference_pending_request_count", labels, mv.pending)
        if self._latency_counters:
            yield from families.values()
        else:  # (--metrics-config counter_latencies=false)
            yield from (f for name, f in families.items() if not name.endswith("_duration_us"))
        if with_cache and self._latency_counters:  # (counter_latencies=false: none)
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
        if self._cpu is not None:
            yield from self._cpu_families(self._cpu)
        yield from _summary_families(versions)
        cache = self._cache
        if cache is not None:
            t = cache.stats
            gauges = (
                cache.utilization, len(cache), t.hits, t.misses, t.hits + t.misses,
                t.evictions, t.lookup_ns // 1000, t.insertion_ns // 1000,
            )  # fmt: skip
            for (name, doc), gauge in zip(_CACHE_GAUGES, gauges, strict=True):
                m = Metric(name, doc, "gauge")
                m.add_sample(name, {}, gauge)
                yield m

    @staticmethod
    def _cpu_families(sampler: _CpuSampler) -> Iterator[Metric]:
        cpu = Metric("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", "gauge")
        cpu.add_sample("nv_cpu_utilization", {}, sampler.utilization())
        yield cpu
        total, used = _memory()
        for name, doc, value in (
            ("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", total),
            ("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", used),
        ):
            m = Metric(name, doc, "gauge")
            m.add_sample(name, {}, value)
            yield m


def make_registry(
    versions: Callable[[], list[ModelVersion]],
    cache: ResponseCache | None = None,
    *,
    cpu: bool = True,
    latency_counters: bool = True,
) -> CollectorRegistry:
    """A registry with the server's collector (``cpu``: the ``nv_cpu_*`` families;
    ``latency_counters``: the ``*_duration_us`` counters)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MetricsCollector(versions, cache, cpu=cpu, latency_counters=latency_counters))
    return registry


#: family types in the order Triton's registry lists them (each in registration order)
_TYPE_ORDER = {"counter": 0, "gauge": 1, "histogram": 2, "summary": 3}


def format_value(value: float) -> str:
    """A sample value as Triton (prometheus-cpp) prints it: ``7`` for 7.0, 16 significant
    digits otherwise, ``Nan``/``+Inf``/``-Inf``."""
    if math.isnan(value):
        return "Nan"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.16g}"


def _escape(text: str, quote: bool) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quote else text


def render(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition of the registry, written as Triton writes it:
    counter families first, then gauges, histograms and summaries, each family only
    while it has a series; labels in the order the collectors give them (``le`` and
    ``quantile`` last); values by :func:`format_value`."""
    families = sorted(registry.collect(), key=lambda f: _TYPE_ORDER.get(f.type, 4))
    out: list[str] = []
    for family in families:
        if not family.samples:  # (a family with no series is left out, as Triton does)
            continue
        name = family.name
        if family.type == "counter" and {x.name for x in family.samples} == {name + "_total"}:
            name += "_total"  # (prometheus_client takes the suffix off a counter's name)
        if family.documentation:  # (no HELP line for an empty description, as in Triton)
            out.append(f"# HELP {name} {_escape(family.documentation, False)}\n")
        out.append(f"# TYPE {name} {family.type}\n")
        for sample in family.samples:
            labels = ",".join(f'{k}="{_escape(v, True)}"' for k, v in sample.labels.items())
            head = f"{sample.name}{{{labels}}}" if labels else sample.name
            out.append(f"{head} {format_value(float(sample.value))}\n")
    return "".join(out).encode()
