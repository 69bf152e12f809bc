"""``bench --streaming`` outputs: genai-perf-style tables, ``--json``, the profile export
and the plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import CliError

if TYPE_CHECKING:
    from rich.table import Table

    from ._bench_measure import LevelResult
    from ._bench_stream import StreamRecord
    from ._settings import Settings

__all__ = ["stream_table", "write_stream_outputs"]

#: Row labels of the table (short enough for 80 columns), with the metric's unit.
_LABELS = {
    "time_to_first_token": "TTFT (ms)",
    "time_to_second_token": "TT2T (ms)",
    "inter_token_latency": "ITL (ms)",
    "request_latency": "latency (ms)",
    "output_sequence_length": "out tokens",
    "input_sequence_length": "in tokens",
    "output_token_throughput_per_user": "tok/s/user",
}
#: Statistic columns in the order shown, and the order they are kept in when the
#: terminal is narrow.
_COLUMNS = ("avg", "min", "max", "p50", "p75", "p90", "p95", "p99", "std")
_PRIORITY = ("avg", "p50", "p99", "min", "max", "p90", "std", "p75", "p95")

Level = tuple[float, list["StreamRecord"], dict[str, dict[str, Any]]]


def _number(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.2f}" if abs(value) < 1e5 else f"{value:.0f}"


def stream_table(title: str, metrics: dict[str, dict[str, Any]], width: int) -> Table:
    """One level's metrics: a row per metric, statistic columns fitted to ``width``."""
    from ._render import new_table

    rows = {label: metrics[name] for name, label in _LABELS.items() if name in metrics}
    kept: set[str] = set()
    used = max(len(label) for label in rows) + 1
    for column in _PRIORITY:
        size = max(len(column), *(len(_number(m.get(column))) for m in rows.values()))
        if kept and used + size + 3 > width:
            break
        kept.add(column)
        used += size + 3
    chosen = [c for c in _COLUMNS if c in kept]
    table = new_table("metric", *chosen, numeric=chosen, title=title)
    for col in table.columns:
        col.no_wrap = True
        col.overflow = "ellipsis"
        col.justify = "right"
    table.columns[0].justify = "left"
    for label, values in rows.items():
        table.add_row(label, *(_number(values.get(c)) for c in chosen))
    return table


def _summary_lines(metrics: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    names = (
        "output_token_throughput",
        "request_throughput",
        "request_goodput",
        "client_cpu_per_request",
        "client_busy",
    )
    for name in names:
        if name in metrics:
            value = metrics[name]
            lines.append(f"{name}: {_number(value['avg'])} {value['unit']}")
    return lines


def _level_key(load: str, level: float) -> Any:
    return int(level) if load == "concurrency" else level


def write_stream_outputs(
    settings: Settings,
    model: str,
    load: str,
    results: list[Level],
    options: dict[str, Any],
    report: str | None = None,
    measured: list[LevelResult] | None = None,
    cache: bool = False,
) -> None:
    """The table (or ``--json``), ``-f``'s CSV (``report``; an ensemble's step models
    beside it, from ``measured``), the export and the plot; then fail if requests
    failed."""
    from ._bench_outputs import _settings_json, write_composing, write_export, write_text
    from ._bench_stats import finite
    from ._render import console, emit_json

    if report is not None and options["report_path"] == "-":
        settings.stdout.write(report)
    elif report is not None:
        write_text(options["report_path"], report)
        write_composing(options["report_path"], measured or [], cache)

    experiments = [
        {load: _level_key(load, level), "metrics": metrics} for level, _, metrics in results
    ]
    if options["export_path"]:
        write_export(
            options["export_path"],
            _settings_json(model, load, options, {"streaming": True}),
            load,
            experiments,
        )
    if options["plot_path"]:
        from ._plot import plot_streaming

        plot_streaming(Path(options["plot_path"]), model, load, results)
    if settings.json_output:
        emit_json(
            settings,
            finite(
                {
                    "model": model,
                    "load": load,
                    "streaming": True,
                    "levels": [
                        {**e, "requests": len(r[1]), "errors": sum(1 for x in r[1] if x.error)}
                        for e, r in zip(experiments, results, strict=True)
                    ],
                }
            ),
        )
    elif options["report_path"] != "-":
        out = console(settings)
        for level, _, metrics in results:
            what = "concurrency" if load == "concurrency" else "request rate"
            out.print(stream_table(f"{model}, {what} {level:g}", metrics, out.width))
            for line in _summary_lines(metrics):
                out.print(line)
    failed = [r for _, records, _ in results for r in records if r.error]
    if failed:
        total = sum(len(records) for _, records, _ in results)
        raise CliError(f"{len(failed)} of {total} requests failed; first error: {failed[0].error}")
