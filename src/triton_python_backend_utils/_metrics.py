"""Custom metrics: ``MetricFamily`` / ``Metric`` and the store that keeps their values.

The store lives where the metrics endpoint is (the server); models reach it through the
runtime. Outside a server a local store is used, so metric code can be unit-tested.
"""

from __future__ import annotations

import contextlib
import enum
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from . import _runtime
from ._errors import TritonModelException

__all__ = ["FamilySnapshot", "Metric", "MetricFamily", "MetricKind", "MetricStore"]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")

OP_INCREMENT, OP_SET, OP_OBSERVE = 0, 1, 2


class MetricKind(enum.Enum):
    """Kinds of :class:`MetricFamily` (``MetricFamily.COUNTER`` and so on)."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


MetricKind.__name__ = MetricKind.__qualname__ = "MetricKind"


@dataclass
class _Series:
    labels: dict[str, str]
    buckets: list[float] | None
    value: float = 0.0
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0
    refs: int = 0


@dataclass
class _Family:
    name: str
    description: str
    kind: int
    refs: int = 0
    series: dict[tuple[Any, ...], _Series] = field(default_factory=dict)


@dataclass(frozen=True)
class FamilySnapshot:
    """One family's values at a point in time (for exposition)."""

    name: str
    description: str
    kind: int
    #: (labels, value) for counters/gauges; (labels, (buckets, counts, sum, count)) else
    series: list[tuple[dict[str, str], Any]]


def _fail(prefix: str, instance: str, message: str) -> TritonModelException:
    return TritonModelException(
        f"{prefix}: Failed to process the request for model '{instance}', message: {message}"
    )


class MetricStore:
    """Metric families and series, shared by every model of a server (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, _Family] = {}
        self._families: dict[int, _Family] = {}
        self._metrics: dict[int, tuple[_Family, tuple[Any, ...]]] = {}
        self._owners: dict[int, str] = {}
        self._next = 1

    def family_create(self, instance: str, name: str, description: str, kind: int) -> int:
        """A handle on the family ``name`` (created, or shared when the kind matches)."""
        prefix = "Error when creating MetricFamily"
        if not _NAME.match(name):
            raise _fail(prefix, instance, "Invalid metric name")
        with self._lock:
            family = self._by_name.get(name)
            if family is None:
                family = self._by_name[name] = _Family(name, description, kind)
            elif family.kind != kind:
                raise _fail(prefix, instance, "Family name already exists with different type")
            family.refs += 1
            fid = self._next
            self._next += 1
            self._families[fid] = family
            self._owners[fid] = instance
            return fid

    def family_delete(self, family_id: int) -> None:
        """Drop a family handle; the family goes away with its last handle."""
        with self._lock:
            family = self._families.pop(family_id, None)
            self._owners.pop(family_id, None)
            if family is None:
                return
            family.refs -= 1
            if family.refs <= 0 and self._by_name.get(family.name) is family:
                del self._by_name[family.name]

    def metric_create(
        self,
        instance: str,
        family_id: int,
        labels: dict[str, str],
        buckets: list[float] | None,
    ) -> int:
        """A handle on the series of ``labels`` (shared by equal labels)."""
        with self._lock:
            family = self._families.get(family_id)
            if family is None:
                raise TritonModelException(
                    "Invalid metric operation as the corresponding 'MetricFamily' has been deleted."
                )
            key: tuple[Any, ...] = tuple(sorted(labels.items()))
            series = family.series.get(key)
            if series is None:
                series = family.series[key] = _Series(
                    dict(labels), list(buckets) if buckets is not None else None
                )
                if buckets is not None:
                    series.counts = [0] * len(buckets)
            series.refs += 1
            mid = self._next
            self._next += 1
            self._metrics[mid] = (family, key)
            self._owners[mid] = instance
            return mid

    def metric_delete(self, metric_id: int) -> None:
        """Drop a series handle; the series goes away with its last handle."""
        with self._lock:
            entry = self._metrics.pop(metric_id, None)
            self._owners.pop(metric_id, None)
            if entry is None:
                return
            family, key = entry
            series = family.series.get(key)
            if series is not None:
                series.refs -= 1
                if series.refs <= 0:
                    del family.series[key]

    def metric_update(self, metric_id: int, op: int, value: float) -> None:
        """Increment, set or observe (already checked against the kind by the caller)."""
        with self._lock:
            entry = self._metrics.get(metric_id)
            if entry is None:
                return
            family, key = entry
            series = family.series.get(key)
            if series is None:
                return
            if op == OP_INCREMENT:
                series.value += value
            elif op == OP_SET:
                series.value = value
            elif series.buckets is not None:
                for i, bound in enumerate(series.buckets):
                    if value <= bound:
                        series.counts[i] += 1
                series.total += value
                series.count += 1

    def metric_value(self, metric_id: int) -> float:
        """The value of a counter or gauge series."""
        with self._lock:
            entry = self._metrics.get(metric_id)
            if entry is None:
                return 0.0
            series = entry[0].series.get(entry[1])
            return float(series.value) if series is not None else 0.0

    def drop_instance(self, instance: str) -> None:
        """Release every handle a model instance still holds (it ended)."""
        with self._lock:
            handles = [h for h, owner in self._owners.items() if owner == instance]
        for handle in handles:
            if handle in self._metrics:
                self.metric_delete(handle)
        for handle in handles:
            if handle in self._families:
                self.family_delete(handle)

    def snapshot(self) -> list[FamilySnapshot]:
        """Every family with its series, in creation order."""
        with self._lock:
            out = []
            for family in self._by_name.values():
                rows: list[tuple[dict[str, str], Any]] = []
                for s in family.series.values():
                    if family.kind == MetricKind.HISTOGRAM.value:
                        rows.append(
                            (dict(s.labels), (list(s.buckets or []), list(s.counts), s.total,
                                              s.count))
                        )  # fmt: skip
                    else:
                        rows.append((dict(s.labels), s.value))
                out.append(FamilySnapshot(family.name, family.description, family.kind, rows))
            return out


# ----------------------------------------------------------------------------- model API

_OPS = {
    # kind -> operations it supports
    MetricKind.COUNTER: ("Increment", "Value"),
    MetricKind.GAUGE: ("Increment", "Set", "Value"),
    MetricKind.HISTOGRAM: ("Observe",),
}
_VERB = {"Increment": "increment", "Set": "set", "Observe": "observe", "Value": "get"}


class Metric:
    """One series of a family (``family.Metric(labels={...}, buckets=[...])``)."""

    def __init__(
        self,
        family: MetricFamily,
        labels: dict[str, str] | None = None,
        buckets: list[float] | None = None,
    ) -> None:
        runtime = _runtime.current()
        self._id: int | None = None
        if labels is not None and not isinstance(labels, dict):
            raise TritonModelException("Failed to create metric. Labels must be a dictionary.")
        labels = labels or {}
        for k, v in labels.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise _fail(
                    "Error when creating Metric",
                    runtime.instance_name(),
                    "attempt to access JSON non-string as string",
                )
        kind = family._kind
        if kind is MetricKind.HISTOGRAM:
            if buckets is None:
                raise TritonModelException("Failed to create metric. Missing required buckets.")
            try:
                bounds = [float(b) for b in buckets]
            except (TypeError, ValueError):
                raise TypeError("Metric(): buckets must be a list of numbers") from None
        else:
            if buckets is not None:
                raise TritonModelException("Failed to create metric. Unexpected buckets found.")
            bounds = None
        self._family = weakref.ref(family)
        self._kind = kind
        self._runtime = runtime
        assert family._id is not None
        self._id = runtime.metric_create(family._id, dict(labels), bounds)

    def _check(self, op: str) -> None:
        if self._family() is None:
            raise TritonModelException(
                f"Failed to {_VERB[op]} metric value: Invalid metric operation as the "
                "corresponding 'MetricFamily' has been deleted. The 'MetricFamily' object "
                "should be deleted AFTER its corresponding 'Metric' objects have been deleted."
            )
        if op not in _OPS[self._kind]:
            raise _fail(
                f"Failed to {_VERB[op]} metric value",
                self._runtime.instance_name(),
                f"TRITONSERVER_METRIC_KIND_{self._kind.name} does not support {op}",
            )

    def increment(self, value: float) -> None:
        """Add ``value`` (counters: non-negative only)."""
        self._check("Increment")
        if self._kind is MetricKind.COUNTER and value < 0:
            raise _fail(
                "Failed to increment metric value",
                self._runtime.instance_name(),
                "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by "
                "non-negative values.",
            )
        assert self._id is not None
        self._runtime.metric_update(self._id, OP_INCREMENT, float(value))

    def set(self, value: float) -> None:
        """Set a gauge."""
        self._check("Set")
        assert self._id is not None
        self._runtime.metric_update(self._id, OP_SET, float(value))

    def observe(self, value: float) -> None:
        """Record ``value`` in a histogram."""
        self._check("Observe")
        assert self._id is not None
        self._runtime.metric_update(self._id, OP_OBSERVE, float(value))

    def value(self) -> float:
        """The current value of a counter or gauge."""
        self._check("Value")
        assert self._id is not None
        return self._runtime.metric_value(self._id)

    def __del__(self) -> None:
        if getattr(self, "_id", None) is not None:
            with contextlib.suppress(Exception):  # the process may be shutting down
                self._runtime.metric_delete(self._id)  # type: ignore[arg-type]


class MetricFamily:
    """A metric family on the server's metrics endpoint.

    ``MetricFamily(name, description, kind)`` with ``kind`` one of
    ``MetricFamily.COUNTER``, ``GAUGE`` or ``HISTOGRAM``; families with the same name and
    kind are shared.
    """

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: MetricKind) -> None:
        self._id: int | None = None
        if (
            not isinstance(name, str)
            or not isinstance(description, str)
            or not isinstance(kind, MetricKind)
        ):
            raise TypeError(
                "__init__(): incompatible constructor arguments. The following argument types "
                "are supported:\n    1. c_python_backend_utils.MetricFamily(name: str, "
                "description: str, kind: c_python_backend_utils.MetricKind)\n"
            )
        self._runtime = _runtime.current()
        self._name = name
        self._kind = kind
        self._id = self._runtime.family_create(name, description, kind.value)

    def Metric(
        self, labels: dict[str, str] | None = None, buckets: list[float] | None = None
    ) -> Metric:
        """A series of this family with ``labels`` (histograms need ``buckets``)."""
        return Metric(self, labels, buckets)

    def __del__(self) -> None:
        if getattr(self, "_id", None) is not None:
            with contextlib.suppress(Exception):  # the process may be shutting down
                self._runtime.family_delete(self._id)  # type: ignore[arg-type]
