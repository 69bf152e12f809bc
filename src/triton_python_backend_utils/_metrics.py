"""Custom metrics: ``MetricFamily`` / ``Metric`` and the store that keeps their values.

The store lives where the metrics endpoint is (the server); models reach it through the
runtime. Outside a server a local store is used, so metric code can be unit-tested.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import json
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from . import _runtime
from ._errors import TritonModelException, bind_call, invoked_with, pybind_repr

__all__ = ["FamilySnapshot", "Metric", "MetricFamily", "MetricKind", "MetricStore"]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")

OP_INCREMENT, OP_SET, OP_OBSERVE = 0, 1, 2


class MetricKind(enum.IntEnum):
    """Kinds of :class:`MetricFamily` (``MetricFamily.COUNTER`` and so on); they compare
    equal to their numbers but print as ``MetricKind.GAUGE``."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


MetricKind.__name__ = MetricKind.__qualname__ = "MetricKind"
MetricKind.__str__ = enum.Enum.__str__  # type: ignore[method-assign]


@dataclass
class _Series:
    labels: dict[str, str]
    buckets: list[float] | None
    value: float = 0.0
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0


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
        #: family handle -> keys of the series created through it (they go with it)
        self._made: dict[int, set[tuple[Any, ...]]] = {}
        self._next = 1

    def family_create(self, instance: str, name: str, description: str, kind: int) -> int:
        """A handle on the family ``name`` (created, or shared when the kind matches)."""
        prefix = "Error when creating MetricFamily"
        if not _NAME.match(name) or name.startswith("__"):
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
        """Drop a family handle with the series created through it; the family goes away
        with its last handle."""
        with self._lock:
            family = self._families.pop(family_id, None)
            self._owners.pop(family_id, None)
            made = self._made.pop(family_id, set())
            if family is None:
                return
            for key in made:
                family.series.pop(key, None)
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
        """A handle on the series of ``labels`` (shared by equal labels); the series lasts
        until the family handle it was created through is deleted."""
        _check_series(instance, labels, buckets)
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
            self._made.setdefault(family_id, set()).add(key)
            mid = self._next
            self._next += 1
            self._metrics[mid] = (family, key)
            self._owners[mid] = instance
            return mid

    def metric_delete(self, metric_id: int) -> None:
        """Drop a series handle; the series stays (its values too) with its family handle."""
        with self._lock:
            self._metrics.pop(metric_id, None)
            self._owners.pop(metric_id, None)

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
                # the first bucket whose bound is not below the value, and every one after
                first = next(
                    (i for i, b in enumerate(series.buckets) if not b < value),
                    len(series.buckets),
                )
                for i in range(first, len(series.buckets)):
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
        """Every family in creation order, each with its series newest first (the order
        Triton's registry usually lists them in)."""
        with self._lock:
            out = []
            for family in self._by_name.values():
                rows: list[tuple[dict[str, str], Any]] = []
                for s in reversed(family.series.values()):
                    if family.kind == MetricKind.HISTOGRAM.value:
                        rows.append(
                            (dict(s.labels), (list(s.buckets or []), list(s.counts), s.total,
                                              s.count))
                        )  # fmt: skip
                    else:
                        rows.append((dict(s.labels), s.value))
                out.append(FamilySnapshot(family.name, family.description, family.kind, rows))
            return out


def _check_series(instance: str, labels: dict[str, Any], buckets: list[float] | None) -> None:
    """The server's checks on a new series: string label values, valid label names,
    strictly increasing bucket bounds."""
    prefix = "Error when creating Metric"
    if any(not isinstance(v, str) for v in labels.values()):
        raise _fail(prefix, instance, "attempt to access JSON non-string as string")
    if any(not _LABEL.match(k) or k.startswith("__") for k in labels):
        raise _fail(prefix, instance, "Invalid label name")
    if buckets is not None and any(b <= a for a, b in itertools.pairwise(buckets)):
        raise _fail(prefix, instance, "Bucket Boundaries must be strictly sorted")


# ----------------------------------------------------------------------------- model API


def _double(value: Any) -> float | None:
    """``value`` as a double the way the model API converts numbers; None if it can't."""
    if not hasattr(type(value), "__float__") and not hasattr(type(value), "__index__"):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _bad_args(method: str, signature: str, args: tuple[Any, ...], kw: dict[str, Any]) -> TypeError:
    return TypeError(
        f"{method}(): incompatible function arguments. The following argument types are "
        f"supported:\n    1. {signature}\n{invoked_with(args, kw)}"
    )


def _float_arg(metric: Metric, method: str, args: tuple[Any, ...], kw: dict[str, Any]) -> float:
    """The one float argument of ``increment``/``set``/``observe``."""
    value = _double(args[0]) if len(args) == 1 and not kw else None
    if value is None:
        signature = "(self: c_python_backend_utils.Metric, arg0: float) -> None"
        raise _bad_args(method, signature, (metric, *args), kw)
    return value


def _buckets(buckets: Any) -> list[float]:
    if not isinstance(buckets, list):
        raise TritonModelException("Failed to create metric. Buckets must be a list.")
    bounds = [_double(b) for b in buckets]
    if any(b is None for b in bounds):
        raise RuntimeError(
            "Unable to cast Python instance to C++ type (#define "
            "PYBIND11_DETAILED_ERROR_MESSAGES or compile in debug mode for details)"
        )
    return [b for b in bounds if b is not None]


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
        kind = family._kind
        if kind is MetricKind.HISTOGRAM:
            if buckets is None:
                raise TritonModelException("Failed to create metric. Missing required buckets.")
            bounds = _buckets(buckets)
        else:
            if buckets is not None:
                raise TritonModelException("Failed to create metric. Unexpected buckets found.")
            bounds = None
        self._family = weakref.ref(family)
        self._kind = kind
        self._runtime = runtime
        assert family._id is not None
        # label names are sent the way JSON writes them: 1 -> "1", True -> "true"
        labels = json.loads(json.dumps(labels))
        self._id = runtime.metric_create(family._id, labels, bounds)

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

    def __repr__(self) -> str:
        return pybind_repr(self, type(self).__name__)

    def increment(self, *args: Any, **kwargs: Any) -> None:
        """``increment(value)``: add ``value`` (counters: non-negative only)."""
        value = _float_arg(self, "increment", args, kwargs)
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

    def set(self, *args: Any, **kwargs: Any) -> None:
        """``set(value)``: set a gauge."""
        value = _float_arg(self, "set", args, kwargs)
        self._check("Set")
        assert self._id is not None
        self._runtime.metric_update(self._id, OP_SET, float(value))

    def observe(self, *args: Any, **kwargs: Any) -> None:
        """``observe(value)``: record ``value`` in a histogram."""
        value = _float_arg(self, "observe", args, kwargs)
        self._check("Observe")
        assert self._id is not None
        self._runtime.metric_update(self._id, OP_OBSERVE, float(value))

    def value(self, *args: Any, **kwargs: Any) -> float:
        """``value()``: the current value of a counter or gauge."""
        if args or kwargs:
            signature = "(self: c_python_backend_utils.Metric) -> float"
            raise _bad_args("value", signature, (self, *args), kwargs)
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
                + invoked_with((name, description, kind), {})
            )
        self._runtime = _runtime.current()
        self._name = name
        self._kind = kind
        self._id = self._runtime.family_create(name, description, kind.value)

    def __repr__(self) -> str:
        return pybind_repr(self, type(self).__name__)

    def Metric(self, *args: Any, **kwargs: Any) -> Metric:
        """``Metric(labels=None, buckets=None)``: a series of this family with ``labels``
        (a dict of strings; histograms need ``buckets``, a list of increasing bounds)."""
        error = (
            "Metric(): incompatible function arguments. The following argument types are "
            "supported:\n    1. (self: c_python_backend_utils.MetricFamily, labels: object = "
            "None, buckets: object = None) -> c_python_backend_utils.Metric\n"
        )
        names = ("self", "labels", "buckets")
        _, labels, buckets = bind_call(
            (self, *args), kwargs, names, {"labels": None, "buckets": None}, error
        )
        return Metric(self, labels, buckets)

    def __del__(self) -> None:
        if getattr(self, "_id", None) is not None:
            with contextlib.suppress(Exception):  # the process may be shutting down
                self._runtime.family_delete(self._id)  # type: ignore[arg-type]
