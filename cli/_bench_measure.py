"""``bench`` measurement: perf_analyzer's windows and stability rule.

A level is warmed up, then measured in windows: ``time_windows`` of ``-p`` ms, or
``count_windows`` of ``--measurement-request-count`` requests. A window counts the
requests that finished inside it. The level is stable when the last three windows agree
within ``-s`` percent: the largest throughput over the smallest, and the largest
stabilising latency (the average, or ``--percentile``) over the smallest, are each at
most ``1 + s/100``; its result merges those three windows. ``--max-trials`` windows
without that is an unstable level and ends the sweep, as does a stabilising latency (of
the merged result, or of any of the last three windows while trying) at or over ``-l``
ms. With ``-n`` (or ``-d``) one window of that many requests (seconds) is the result.
Windows follow one another with no gap. At each edge the client's count is taken
first and the server's statistics are read just after (perf_analyzer's order), so the
server-side breakdown covers the measured windows. The two counts of a level can still
differ by the requests in flight at its first and last edge: one that the server has
answered but the client has not yet read counts on the server's side of the edge and on
the client's side of the next (perf_analyzer has the same edges).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._bench_load import Load

__all__ = [
    "LevelResult",
    "MeasureOptions",
    "Snapshot",
    "measure_level",
    "percentile",
    "server_delta",
]

STAT_KEYS = (
    "success",
    "queue",
    "compute_input",
    "compute_infer",
    "compute_output",
    "cache_hit",
    "cache_miss",
)


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in 0..100; NaN when empty)."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class MeasureOptions:
    """How a level is measured."""

    interval_s: float = 5.0
    mode: str = "time_windows"
    request_count: int = 50
    stability: float = 0.10
    max_trials: int = 10
    percentile: int | None = None
    latency_threshold_ms: float | None = None
    warmup_s: float = 0.0
    warmup_requests: int = 0
    fixed_requests: int | None = None
    fixed_duration_s: float | None = None
    batch_size: int = 1
    #: Told each window's number, inferences per second and stabilising latency (ms).
    on_window: Callable[[int, float, float], None] | None = None


#: One model's statistics: (inference count, execution count, ``{key: (count, ns)}``
#: for STAT_KEYS; a key the server does not report reads as no count).
Totals = tuple[int, int, dict[str, tuple[int, int]]]
#: A reading of the server's statistics: the model's Totals, and for an ensemble a
#: fourth item, the Totals of every model in it by ``(name, version)``; None when the
#: server has no statistics.
Ensemble = tuple[int, int, dict[str, tuple[int, int]], dict[tuple[str, str], Totals]]
Snapshot = Totals | Ensemble | None


def server_delta(before: Snapshot, after: Snapshot) -> dict[str, float] | None:
    """The server-side figures between two readings: counts, and average µs per request
    (per cache hit and per cache miss for ``cache_hit`` and ``cache_miss``)."""
    if before is None or after is None:
        return None
    return _delta(before[:3], after[:3])


def _delta(before: Totals, after: Totals) -> dict[str, float]:
    out: dict[str, float] = {
        "inference_count": after[0] - before[0],
        "execution_count": after[1] - before[1],
    }
    counts: dict[str, int] = {}
    times: dict[str, int] = {}
    for key in STAT_KEYS:
        count = after[2].get(key, (0, 0))[0] - before[2].get(key, (0, 0))[0]
        ns = after[2].get(key, (0, 0))[1] - before[2].get(key, (0, 0))[1]
        counts[key], times[key] = count, ns
        name = "request" if key == "success" else key
        if key in ("success", "cache_hit", "cache_miss"):
            out[f"{key}_count"] = count
        out[name] = ns / count / 1000 if count > 0 else math.nan
    # perf_analyzer's split: queue, then compute and the cache together per request
    # that ran or hit the cache; the rest of the request's time is overhead.
    compute_ns = sum(times[k] for k in ("compute_input", "compute_infer", "compute_output"))
    served = counts["compute_input"] + counts["cache_hit"]
    spent = compute_ns + times["cache_hit"] + times["cache_miss"]
    out["compute_and_cache"] = spent / served / 1000 if served > 0 else math.nan
    parts = [out["queue"], out["compute_and_cache"]]
    out["overhead"] = max(0.0, out["request"] - sum(p for p in parts if not math.isnan(p)))
    return out


def composing_deltas(
    before: Snapshot, after: Snapshot, steps: dict[str, list[tuple[str, str]]], model: str
) -> list[dict[str, Any]] | None:
    """The figures of the models an ensemble ``model`` runs, as perf_analyzer reports
    them: one entry per step model (``model``, ``version``, ``server``), an ensemble
    among them with its own ``composing``. ``steps`` maps an ensemble to its step
    models ``(name, version)`` (version "" for the latest). None without readings."""
    if before is None or after is None or len(before) < 4 or len(after) < 4:
        return None
    start, end = before[3], after[3]
    out: list[dict[str, Any]] = []
    for name, wanted in steps.get(model, []):
        version = _stats_version(name, wanted, start, end)
        if version is None:
            continue
        key = (name, version)
        empty: Totals = (0, 0, {})
        entry: dict[str, Any] = {
            "model": name,
            "version": version,
            "server": _delta(start.get(key, empty), end[key]),
        }
        if name in steps:
            entry["composing"] = composing_deltas(before, after, steps, name)
        out.append(entry)
    return out


def _stats_version(
    name: str,
    wanted: str,
    start: dict[tuple[str, str], Totals],
    end: dict[tuple[str, str], Totals],
) -> str | None:
    """The version of ``name`` whose statistics count: the one asked for, else the
    highest one that queued requests in between (else the highest one)."""
    if wanted:
        return wanted if (name, wanted) in end else None
    versions = [v for n, v in end if n == name]
    if not versions:
        return None

    def queued(v: str) -> int:
        later = end[(name, v)][2].get("queue", (0, 0))[0]
        return later - start.get((name, v), (0, 0, {}))[2].get("queue", (0, 0))[0]

    busy = [v for v in versions if queued(v) > 0] or versions
    return max(busy, key=lambda v: int(v) if v.isdigit() else -1)


@dataclass
class Window:
    """One measurement window: the requests that finished in it, and its edges."""

    records: list[Any]
    seconds: float
    cpu_s: float
    before: Snapshot
    after: Snapshot

    def latencies(self) -> list[float]:
        """Latencies (s) of the successful requests, ascending."""
        return sorted(r[1] - r[0] for r in self.records if r[2] is None)


@dataclass
class LevelResult:
    """What one load level measured (merged over its stable windows)."""

    load: str  # "concurrency" or "request_rate"
    level: float
    requests: int
    errors: int
    window_s: float
    latencies_s: list[float] = field(repr=False)
    first_error: str | None = None
    server: dict[str, float] | None = None
    batch_size: int = 1
    stable: bool = True
    windows: int = 1
    client: dict[str, float] = field(default_factory=dict)  # send/wait/recv/cpu, µs
    delayed: int = 0
    sequences: int = 0
    metrics: dict[str, Any] | None = None
    #: The server's readings at the edges of the measured windows.
    readings: tuple[Snapshot, Snapshot] = field(default=(None, None), repr=False)
    #: An ensemble's step models: perf_analyzer's "Composing models" (see
    #: ``composing_deltas``); None for other models.
    composing: list[dict[str, Any]] | None = None
    #: Responses received (a decoupled model's run); None where a request is one response.
    responses: int | None = None

    @property
    def throughput(self) -> float:
        """Successful requests per second."""
        return self.requests / self.window_s if self.window_s > 0 else 0.0

    @property
    def responses_per_sec(self) -> float:
        """Responses per second (perf_analyzer's Response Throughput)."""
        return (self.responses or 0) / self.window_s if self.window_s > 0 else 0.0

    @property
    def infer_per_sec(self) -> float:
        """Inferences per second (requests times the batch size)."""
        return self.throughput * self.batch_size

    def latency_ms(self, extra: int | None = None) -> dict[str, float]:
        """avg, std, min, p50, p90, p95, p99 (and p``extra``, in order), max in
        milliseconds (NaN without requests)."""
        lat = self.latencies_s
        stats = {
            "avg": statistics.fmean(lat) if lat else math.nan,
            "std": statistics.pstdev(lat) if len(lat) > 1 else (0.0 if lat else math.nan),
            "min": lat[0] if lat else math.nan,
        }
        for q in sorted({50, 90, 95, 99, *([extra] if extra is not None else [])}):
            stats[f"p{q}"] = percentile(lat, q)
        stats["max"] = lat[-1] if lat else math.nan
        return {k: v * 1000 for k, v in stats.items()}

    def stabilizing_ms(self, q: int | None) -> float:
        """The latency the stability rule and ``-l`` look at: average or ``q``-th percentile."""
        if q is None:
            return self.latency_ms()["avg"]
        return percentile(self.latencies_s, q) * 1000


def _window_figures(window: Window, options: MeasureOptions) -> tuple[float, float]:
    """(inferences per second, stabilising latency in ms) of one window."""
    lat = window.latencies()
    ips = len(lat) * options.batch_size / window.seconds if window.seconds > 0 else 0.0
    if not lat:
        return ips, math.inf
    if options.percentile is None:
        return ips, statistics.fmean(lat) * 1000
    return ips, percentile(lat, options.percentile) * 1000


def stable(figures: list[tuple[float, float]], threshold: float) -> bool:
    """perf_analyzer's rule over the last three windows (throughput and latency)."""
    if len(figures) < 3:
        return False
    last = figures[-3:]
    ips = [f[0] for f in last]
    lat = [f[1] for f in last]
    if min(ips) <= 0 or math.isinf(max(lat)) or min(lat) <= 0:
        return False
    return max(ips) / min(ips) <= 1 + threshold and max(lat) / min(lat) <= 1 + threshold


class _Progress:
    """Called about ten times a second while a level runs: (fraction, completed count)."""

    def __init__(self, report: Callable[[float, int], None] | None) -> None:
        self.report = report

    def __call__(self, done: float, completed: int) -> None:
        if self.report is not None:
            self.report(min(done, 1.0), completed)


def _wait_warmup(load: Load, options: MeasureOptions, progress: _Progress) -> None:
    begin = time.perf_counter()
    while load.alive():
        elapsed = time.perf_counter() - begin
        if elapsed >= options.warmup_s and len(load.records) >= options.warmup_requests:
            return
        progress(0.0, len(load.records))
        time.sleep(0.005)


@dataclass
class _Edge:
    """Where a window starts: the count of records, the clock and the CPU clock then,
    and the server's statistics read just after."""

    mark: int
    clock: float
    cpu: float
    stats: Snapshot


def _edge(load: Load, stats: Callable[[], Snapshot]) -> _Edge:
    """The client's edge first, then the server's reading, as perf_analyzer orders them:
    a request finishing in between counts on the server and the client in the same
    window, on the client's side of every edge alike."""
    mark, clock, cpu = len(load.records), time.perf_counter(), time.process_time()
    return _Edge(mark, clock, cpu, stats())


def _settled(
    stats: Callable[[], Snapshot], before: Snapshot, after: Snapshot, records: list[Any]
) -> Snapshot:
    """The server's reading once it counts every request the client saw succeed (read
    again for up to a second): a server may send an answer before it counts it, so a
    reading taken just after the last answer can miss it."""
    if before is None:  # (a server without statistics)
        return after
    ok = sum(1 for r in records if r[2] is None)
    deadline = time.perf_counter() + 1.0
    while after is not None and _successes(before, after) < ok:
        if time.perf_counter() >= deadline:
            break
        time.sleep(0.005)
        after = stats()
    return after


def _successes(before: Totals | Ensemble, after: Totals | Ensemble) -> int:
    key = (0, 0)
    return after[2].get("success", key)[0] - before[2].get("success", key)[0]


def _one_window(
    load: Load,
    options: MeasureOptions,
    stats: Callable[[], Snapshot],
    progress: _Progress,
    begin: _Edge,
    total: float,
    index: int = 0,
) -> tuple[Window, _Edge]:
    """Measure the ``index``-th window (from 0, of at most ``total``) from ``begin``:
    (the window, its end, where the next window begins)."""
    mark, start = begin.mark, begin.clock
    count = options.fixed_requests or (
        options.request_count if options.mode == "count_windows" else None
    )
    span = options.fixed_duration_s or options.interval_s
    while load.alive():
        now = time.perf_counter()
        done = len(load.records) - mark
        if count is not None:
            progress((index + done / count) / total, len(load.records))
            if done >= count:
                break
        else:
            progress((index + (now - start) / span) / total, len(load.records))
            if now - start >= span:
                break
        time.sleep(0.002 if count is not None else 0.02)
    end_edge = _edge(load, stats)  # the window's requests: those finished by its end
    end = end_edge.clock
    records = load.records[mark : end_edge.mark]
    if options.fixed_requests is not None:
        records = records[: options.fixed_requests]
        if records:
            end = max(r[1] for r in records)
        end_edge.stats = _settled(stats, begin.stats, end_edge.stats, records)
    window = Window(records, end - start, end_edge.cpu - begin.cpu, begin.stats, end_edge.stats)
    return window, end_edge


def _windows(
    load: Load,
    options: MeasureOptions,
    stats: Callable[[], Snapshot],
    progress: _Progress,
    edge: _Edge,
) -> tuple[list[Window], bool, bool]:
    """Measure windows from ``edge`` until stable: (windows kept, stable, over the
    latency threshold). Each window begins where the last one ended, so no request falls
    between two."""
    fixed = options.fixed_requests is not None or options.fixed_duration_s is not None
    trials = 1 if fixed else options.max_trials
    windows: list[Window] = []
    figures: list[tuple[float, float]] = []
    limit = options.latency_threshold_ms
    for index in range(trials):
        window, edge = _one_window(load, options, stats, progress, edge, trials, index)
        windows.append(window)
        figures.append(_window_figures(window, options))
        if options.on_window is not None:
            options.on_window(len(figures), *figures[-1])
        if not load.alive():
            break
        if fixed:
            break
        if stable(figures, options.stability):
            return windows[-3:], True, False
        if limit is not None and len(figures) >= 3 and any(f[1] >= limit for f in figures[-3:]):
            return windows[-3:], False, True  # perf_analyzer stops trying here too
    return windows[-3:] if not fixed else windows, fixed, False


def _client_figures(records: list[Any], cpu_s: float) -> dict[str, float]:
    """Average send / response wait / receive µs, and the client's CPU µs per request."""
    timed = [r for r in records if len(r) > 3 and not math.isnan(r[3])]
    out = {"cpu_per_request_us": cpu_s / len(records) * 1e6 if records else math.nan}
    for i, key in ((3, "send_us"), (4, "wait_us"), (5, "recv_us")):
        out[key] = statistics.fmean(r[i] for r in timed) * 1e6 if timed else math.nan
    return out


def measure_level(
    load: Load,
    level: tuple[str, float],
    options: MeasureOptions,
    stats: Callable[[], Snapshot],
    report: Callable[[float, int], None] | None = None,
) -> tuple[LevelResult, bool]:
    """Run ``load`` and measure it: (result, whether it is over the latency threshold)."""
    progress = _Progress(report)
    exact = options.fixed_requests is not None and load.concurrency is not None
    base = stats() if exact else None
    load.start()
    try:
        _wait_warmup(load, options, progress)
        if exact:
            load.stop()  # the warm-up's requests end before the window starts
        edge = _edge(load, stats)
        if exact:  # (and are counted before it starts)
            edge.stats = _settled(stats, base, edge.stats, load.records)
        if exact and options.fixed_requests is not None:
            load.send_exactly(options.fixed_requests)
        windows, is_stable, over = _windows(load, options, stats, progress, edge)
    finally:
        load.stop()
    records = [r for w in windows for r in w.records]
    seconds = sum(w.seconds for w in windows)
    cpu = sum(w.cpu_s for w in windows)
    ok = sorted(r[1] - r[0] for r in records if r[2] is None)
    errors = [r[2] for r in records if r[2] is not None]
    if not records:
        errors = [r[2] for r in load.records if r[2] is not None][:1]
    client = _client_figures(records, cpu)
    client["busy_pct"] = cpu / seconds * 100 if seconds > 0 else math.nan
    result = LevelResult(
        load=level[0],
        level=level[1],
        requests=len(ok),
        errors=len(errors),
        window_s=seconds,
        latencies_s=ok,
        first_error=errors[0] if errors else None,
        server=server_delta(windows[0].before, windows[-1].after) if windows else None,
        batch_size=options.batch_size,
        stable=is_stable,
        windows=len(windows),
        client=client,
        delayed=sum(1 for r in records if len(r) > 6 and r[6]),
        sequences=sum(1 for r in records if len(r) > 7 and r[7]),
        readings=(windows[0].before, windows[-1].after) if windows else (None, None),
    )
    limit = options.latency_threshold_ms
    if limit is not None and result.stabilizing_ms(options.percentile) >= limit:
        over = True
    return result, over
