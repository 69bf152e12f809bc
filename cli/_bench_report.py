"""``bench`` reports: perf_analyzer's text per level, the summary table, ``-f`` CSV in
perf_analyzer's column layout, the ``--json`` document and the profile export."""

from __future__ import annotations

import csv
import io
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

    from ._bench_measure import LevelResult

__all__ = [
    "composing_csv_texts",
    "csv_text",
    "level_json",
    "level_text",
    "profile_record",
    "results_table",
]


def _us(value: float) -> str:
    return "0" if math.isnan(value) else str(int(value))


def _level_name(r: LevelResult) -> str:
    if r.load == "concurrency":
        return f"Request concurrency: {int(r.level)}"
    return f"Request Rate: {r.level:g} inference requests per second"


def level_text(r: LevelResult, percentile: int | None, verbose: bool, cache: bool = False) -> str:
    """One level as perf_analyzer prints it (client side, then server side; ``cache``:
    the model or a model it runs has the response cache on)."""
    lat = r.latency_ms()
    lines = [_level_name(r), "  Client: ", f"    Request count: {r.requests + r.errors}"]
    if r.requests + r.errors and r.delayed / (r.requests + r.errors) > 0.1:
        lines.append(
            f"    [WARNING] {r.delayed} requests were sent late: the client did not keep up "
            "with the request rate"
        )
    if r.sequences:
        lines.append(f"    Sequence count: {r.sequences} ({r.sequences / r.window_s:.2f} seq/sec)")
    lines.append(f"    Throughput: {r.infer_per_sec:g} infer/sec")
    if r.responses is not None:
        lines.append(f"    Response Throughput: {r.responses_per_sec:g} infer/sec")
    client = r.client
    if verbose:
        lines.append(
            f"    Avg client overhead: {client.get('busy_pct', math.nan):.2f}% "
            f"({_us(client.get('cpu_per_request_us', math.nan))} usec CPU per request)"
        )
    if percentile is None:
        lines.append(
            f"    Avg latency: {_us(lat['avg'] * 1000)} usec "
            f"(standard deviation {_us(lat['std'] * 1000)} usec)"
        )
    for q in sorted({50, 90, 95, 99, *([percentile] if percentile else [])}):
        from ._bench_measure import percentile as pick

        lines.append(f"    p{q} latency: {_us(pick(r.latencies_s, q) * 1e6)} usec")
    lines.append(_http_line(r, verbose))
    if r.errors:
        lines.append(f"    Failed requests: {r.errors} (first: {r.first_error})")
    if r.server is not None:
        lines.append("  Server: ")
        lines.extend(_server_lines(r.server, r.composing, cache, 1))
    if r.metrics is not None:
        lines.extend(_metrics_lines(r.metrics))
    return "\n".join(line for line in lines if line)


def _metrics_lines(metrics: dict[str, Any]) -> list[str]:
    """``--collect-metrics``: the GPU figures per GPU, as perf_analyzer prints them."""
    lines = ["  Server Prometheus Metrics: "]
    for title, key, scale, unit in (
        ("Avg GPU Utilization", "gpu_utilization", 100.0, "%"),
        ("Avg GPU Power Usage", "gpu_power_usage", 1.0, " watts"),
        ("Max GPU Memory Usage", "gpu_memory_used_max", 1.0, " bytes"),
        ("Total GPU Memory", "gpu_memory_total", 1.0, " bytes"),
    ):
        lines.append(f"    {title}:")
        for gpu, value in metrics.get(key, {}).items():
            lines.append(f"      {gpu} : {value * scale:g}{unit}")
    return lines


def _http_line(r: LevelResult, verbose: bool) -> str:
    c = r.client
    send, wait, recv = c.get("send_us", math.nan), c.get("wait_us", math.nan), c.get("recv_us")
    if send is None or math.isnan(send) or recv is None:
        return ""
    total = send + wait + recv
    if verbose:
        detail = (
            f"send {_us(send)} usec + response wait {_us(wait)} usec + receive {_us(recv)} usec"
        )
    else:
        detail = f"send/recv {_us(send + recv)} usec + response wait {_us(wait)} usec"
    return f"    Avg HTTP time: {_us(total)} usec ({detail})"


def _server_lines(
    s: dict[str, float], composing: list[dict[str, Any]] | None, cache: bool, depth: int
) -> list[str]:
    """The server's figures of a model as perf_analyzer prints them; an ensemble's are
    followed by those of its composing models, one step further in."""
    pad = "  " * depth
    lines = [f"{pad}  Inference count: {int(s['inference_count'])}"]
    lines.append(f"{pad}  Execution count: {int(s['execution_count'])}")
    if cache:
        lines.append(f"{pad}  Cache hit count: {int(s.get('cache_hit_count', 0))}")
        lines.append(f"{pad}  Cache miss count: {int(s.get('cache_miss_count', 0))}")
    lines.append(f"{pad}  Successful request count: {int(s['success_count'])}")
    if not s["success_count"]:
        return lines
    head = f"{pad}  Avg request latency: {_us(s['request'])} usec"
    if composing is None:
        lines.extend(_model_latency(head, s, cache, pad))
        return lines
    queue, compute, both = _ensemble_totals(composing)
    if cache:
        lines.append(
            f"{head} (overhead {_us(max(0.0, s['request'] - queue - both))} usec + queue "
            f"{_us(queue)} usec + cache hit/miss {_us(both)} usec)"
        )
    else:
        lines.append(
            f"{head} (overhead {_us(max(0.0, s['request'] - queue - compute))} usec + queue "
            f"{_us(queue)} usec + compute {_us(compute)} usec)"
        )
    lines.append("")
    lines.append(f"{pad}Composing models: ")
    for step in composing:
        lines.append(f"{pad}{step['model']}, version: {step['version']}")
        lines.extend(_server_lines(step["server"], step.get("composing"), cache, depth + 1))
    return lines


def _model_latency(head: str, s: dict[str, float], cache: bool, pad: str) -> list[str]:
    parts = {k: _zero(s.get(k)) for k in ("compute_input", "compute_infer", "compute_output")}
    compute = (
        f"compute input {_us(parts['compute_input'])} usec + compute infer "
        f"{_us(parts['compute_infer'])} usec + compute output {_us(parts['compute_output'])} usec"
    )
    if not cache:
        return [
            f"{head} (overhead {_us(s['overhead'])} usec + queue {_us(s['queue'])} usec + "
            f"{compute})"
        ]
    miss = _zero(s.get("cache_miss"))
    return [
        f"{head} (overhead {_us(s['overhead'])} usec + queue {_us(s['queue'])} usec + "
        f"cache hit/miss {_us(_zero(s.get('compute_and_cache')))} usec)",
        f"{pad}{pad}  Average Cache Hit Latency: {_us(_zero(s.get('cache_hit')))} usec",
        f"{pad}{pad}  Average Cache Miss Latency: {_us(miss + sum(parts.values()))} usec "
        f"(cache lookup/insertion {_us(miss)} usec + {compute})",
    ]


def _ensemble_totals(composing: list[dict[str, Any]]) -> tuple[float, float, float]:
    """An ensemble's queue, compute and compute-or-cache µs: the sums over the models
    it runs (nested ensembles through theirs)."""
    queue = compute = both = 0.0
    for step in composing:
        if step.get("composing") is not None:
            q, c, b = _ensemble_totals(step["composing"])
        else:
            s = step["server"]
            q = _zero(s.get("queue"))
            c = sum(_zero(s.get(k)) for k in ("compute_input", "compute_infer", "compute_output"))
            b = _zero(s.get("compute_and_cache"))
        queue, compute, both = queue + q, compute + c, both + b
    return queue, compute, both


# -- the summary table -------------------------------------------------------------------

#: The table's columns in the order shown, and the order they are kept in when the
#: terminal is narrow (the first ones always).
_COLUMNS = ("load", "infer/s", "avg", "p50", "p90", "p95", "p99", "errors", "queue", "compute")
_PRIORITY = ("load", "infer/s", "p50", "p99", "avg", "errors", "compute", "queue", "p90", "p95")


def _cells(r: LevelResult) -> dict[str, str]:
    lat = r.latency_ms()
    server = r.server or {}

    def ms(v: float) -> str:
        return "-" if math.isnan(v) else f"{v:.2f}"

    compute = sum(
        server.get(k, math.nan) for k in ("compute_input", "compute_infer", "compute_output")
    )
    return {
        "load": str(int(r.level)) if r.load == "concurrency" else f"{r.level:g}",
        "infer/s": f"{r.infer_per_sec:.1f}",
        "errors": str(r.errors),
        **{k: ms(lat[k]) for k in ("avg", "p50", "p90", "p95", "p99")},
        "queue": ms(server.get("queue", math.nan) / 1000) if server else "-",
        "compute": ms(compute / 1000) if server else "-",
    }


def results_table(model: str, load: str, results: list[LevelResult], width: int) -> Table:
    """The summary: one row per level; the least needed columns are left out when the
    table would not fit ``width`` (numbers are never wrapped)."""
    from ._render import new_table

    rows = [_cells(r) for r in results]
    header = {"load": "conc" if load == "concurrency" else "rate/s"}
    kept: set[str] = set()
    used = 0
    for column in _PRIORITY:
        size = max([len(header.get(column, column)), *(len(row[column]) for row in rows)])
        if kept and used + size + 3 > width:
            break
        kept.add(column)
        used += size + 3
    chosen = [c for c in _COLUMNS if c in kept]
    titles = [header.get(c, c) for c in chosen]
    table = new_table(*titles, numeric=titles, title=f"{model}: times in ms")
    for col in table.columns:
        col.no_wrap = True
        col.overflow = "ellipsis"
        col.justify = "right"
    for row in rows:
        table.add_row(*(row[c] for c in chosen))
    return table


# -- files -------------------------------------------------------------------------------


def _csv_percentiles(percentile: int | None) -> list[int]:
    return sorted({50, 90, 95, 99, *([percentile] if percentile else [])})


def csv_text(
    results: list[LevelResult],
    verbose: bool,
    metrics: bool,
    percentile: int | None = None,
    cache: bool = False,
    decoupled: bool = False,
) -> str:
    """``-f`` CSV: perf_analyzer's columns (µs), rows by increasing throughput.

    As perf_analyzer writes it: ``decoupled`` adds ``Response Throughput`` (responses
    per second) after ``Inferences/Second``; ``cache`` (the response cache is on for the
    model or a model it runs) adds ``Server Cache Hit`` and ``Server Cache Miss`` (µs
    per hit, per miss) after ``Server Compute Output``; ``--percentile Q`` adds
    ``pQ latency`` among the percentile columns (in order) and drops ``Avg latency``
    from the ``--verbose-csv`` columns; the GPU columns of ``--collect-metrics`` come
    with ``--verbose-csv`` only."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    first = "Concurrency" if not results or results[0].load == "concurrency" else "Request Rate"
    header = [
        *_csv_head(first, cache, decoupled),
        *(f"p{q} latency" for q in _csv_percentiles(percentile)),
    ]
    if verbose:
        header += [*(["Avg latency"] if percentile is None else []), "request/response"]
        header += ["response wait"]
    if verbose and metrics:
        header += [
            "Avg GPU Utilization",
            "Avg GPU Power Usage",
            "Max GPU Memory Usage",
            "Total GPU Memory",
        ]
    writer.writerow(header)
    for r in sorted(results, key=lambda r: r.infer_per_sec):
        writer.writerow(_csv_row(r, verbose, metrics, percentile, cache, decoupled))
    return buffer.getvalue()


def _server_cells(server: dict[str, float], cache: bool) -> tuple[float, list[float]]:
    """(the µs the server accounts for per request, the queue, compute input, infer,
    output (and cache hit, miss) cells), as perf_analyzer sums them: each average over
    its own count."""
    cells = [
        _zero(server.get(k)) for k in ("queue", "compute_input", "compute_infer", "compute_output")
    ]
    compute = sum(
        _zero(server.get(k)) for k in ("compute_input", "compute_infer", "compute_output")
    )
    hit, miss = _zero(server.get("cache_hit")), _zero(server.get("cache_miss"))
    accounted = cells[0] + compute + hit + miss
    return accounted, [*cells, *([hit, miss] if cache else [])]


def _csv_row(
    r: LevelResult,
    verbose: bool,
    metrics: bool,
    percentile: int | None,
    cache: bool,
    decoupled: bool,
) -> list[str]:
    from ._bench_measure import percentile as pick

    lat = r.latency_ms()
    send = _zero(r.client.get("send_us"))
    recv = _zero(r.client.get("recv_us"))
    avg_us = _zero(lat["avg"] * 1000)
    accounted, server = _server_cells(r.server or {}, cache)
    network = max(0.0, avg_us - send - recv - accounted)
    row = [
        _level_cell(r),
        f"{r.infer_per_sec:g}",
        *([f"{r.responses_per_sec:g}"] if decoupled else []),
        *(str(int(v)) for v in (send, network, *server, recv)),
    ]
    row += [str(int(_zero(pick(r.latencies_s, q) * 1e6))) for q in _csv_percentiles(percentile)]
    if verbose:
        wait = _zero(r.client.get("wait_us"))
        row += [*([str(int(avg_us))] if percentile is None else []), str(int(send + recv))]
        row += [str(int(wait))]
    if verbose and metrics:
        row += _gpu_cells(r.metrics or {})
    return row


def _csv_head(first: str, cache: bool, decoupled: bool) -> list[str]:
    """perf_analyzer's CSV columns from the load to ``Client Recv``."""
    return [
        first,
        "Inferences/Second",
        *(["Response Throughput"] if decoupled else []),
        "Client Send",
        "Network+Server Send/Recv",
        "Server Queue",
        "Server Compute Input",
        "Server Compute Infer",
        "Server Compute Output",
        *(["Server Cache Hit", "Server Cache Miss"] if cache else []),
        "Client Recv",
    ]


def _level_cell(r: LevelResult) -> str:
    return str(int(r.level)) if r.load == "concurrency" else f"{r.level:g}"


def composing_csv_texts(results: list[LevelResult], cache: bool) -> dict[tuple[str, str], str]:
    """perf_analyzer's CSV of each model an ensemble runs, by ``(name, version)``: the
    ensemble's layout up to ``Client Recv``, the server's figures of that model, its
    inferences per second the ensemble's scaled by the ratio of their successful
    requests, and ``Client Send`` and ``Client Recv`` 0."""
    ordered = sorted(results, key=lambda r: r.infer_per_sec)
    if not ordered or not ordered[0].composing:
        return {}
    texts: dict[tuple[str, str], str] = {}
    for step in ordered[0].composing:
        key = (step["model"], step["version"])
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        first = "Concurrency" if ordered[0].load == "concurrency" else "Request Rate"
        writer.writerow(_csv_head(first, cache, False))
        for r in ordered:
            mine = next((c for c in r.composing or [] if (c["model"], c["version"]) == key), None)
            server = mine["server"] if mine is not None else {}
            accounted, cells = _server_cells(server, cache)
            overhead = max(0.0, _zero(server.get("request")) - accounted)
            ensemble = (r.server or {}).get("success_count", 0)
            ratio = server.get("success_count", 0) / ensemble if ensemble else 0.0
            writer.writerow(
                [
                    _level_cell(r),
                    f"{ratio * r.infer_per_sec:g}",
                    "0",
                    *(str(int(v)) for v in (overhead, *cells)),
                    "0",
                ]
            )
        texts[key] = buffer.getvalue()
    return texts


def _zero(value: float | None) -> float:
    return 0.0 if value is None or math.isnan(value) else value


def _gpu_cells(metrics: dict[str, Any]) -> list[str]:
    def joined(key: str) -> str:
        values = metrics.get(key, {})
        return "".join(f"{gpu}:{value:g};" for gpu, value in values.items())

    return [
        joined(k)
        for k in ("gpu_utilization", "gpu_power_usage", "gpu_memory_used_max", "gpu_memory_total")
    ]


def _stat_block(values: list[float], unit: str, scale: float) -> dict[str, Any]:
    from ._bench_stats import summary

    return {"unit": unit, **summary([v * scale for v in values])}


def level_json(r: LevelResult, percentile: int | None = None) -> dict[str, Any]:
    """One level for ``--json`` (``latency_ms`` has ``p{percentile}`` too with
    ``--percentile``)."""
    return {
        "level": int(r.level) if r.load == "concurrency" else r.level,
        "requests": r.requests,
        "errors": r.errors,
        "window_s": r.window_s,
        "stable": r.stable,
        "windows": r.windows,
        "throughput": {"requests_per_s": r.throughput, "inferences_per_s": r.infer_per_sec},
        "latency_ms": r.latency_ms(percentile),
        "server_us": r.server,
        "client_us": r.client,
        "delayed_requests": r.delayed,
        "sequences": r.sequences,
        "metrics": r.metrics,
        "first_error": r.first_error,
        **({"responses": r.responses} if r.responses is not None else {}),
        **({"composing_models": r.composing} if r.composing is not None else {}),
    }


def profile_record(r: LevelResult) -> dict[str, Any]:
    """One level of the profile export: every metric as ``{"unit", "avg", ...}``."""
    record: dict[str, Any] = {
        "request_throughput": {"unit": "requests/sec", "avg": r.throughput},
        "inference_throughput": {"unit": "infer/sec", "avg": r.infer_per_sec},
        "request_latency": _stat_block(r.latencies_s, "ms", 1000.0),
    }
    for key in ("request", "queue", "compute_input", "compute_infer", "compute_output", "overhead"):
        if r.server is not None:
            record[f"server_{key}"] = {"unit": "us", "avg": r.server[key]}
    for key in ("send_us", "wait_us", "recv_us", "cpu_per_request_us"):
        if key in r.client:
            record["client_" + key.removesuffix("_us")] = {"unit": "us", "avg": r.client[key]}
    return record
