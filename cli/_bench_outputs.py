"""Where the results of a ``bench`` run go: the table or ``--json`` on stdout, ``-f`` CSV,
the profile export (JSON and a CSV beside it) and the plot."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._bench_stats import finite
from ._errors import CliError

if TYPE_CHECKING:
    from ._bench_measure import LevelResult
    from ._settings import Settings

__all__ = [
    "composing_path",
    "export_csv_text",
    "write_composing",
    "write_export",
    "write_outputs",
    "write_text",
]


def write_text(path: str, text: str) -> None:
    """Write a results file; a clear error when it cannot be written."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot write {path}: {e.strerror or e}") from None


def _settings_json(model: str, load: str, options: dict[str, Any], extra: dict[str, Any]) -> Any:
    keep: dict[str, Any] = {
        k: v for k, v in options.items() if isinstance(v, (str, int, float, bool, type(None)))
    }
    keep.update({k: list(v) for k, v in options.items() if isinstance(v, tuple)})
    return {"model": model, "load": load, **keep, **extra}


def export_csv_text(records: list[dict[str, Any]], load: str) -> str:
    """The CSV beside the profile export: one row per level and metric."""
    from ._bench_stats import STATS

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([load, "metric", "unit", *STATS])
    for record in records:
        for name, value in record["metrics"].items():
            cells = ["" if value.get(s) is None else f"{value[s]:.6g}" for s in STATS]
            writer.writerow([record[load], name, value["unit"], *cells])
    return buffer.getvalue()


def write_export(path: str, settings_json: Any, load: str, records: list[dict[str, Any]]) -> None:
    """``--profile-export-file``: the JSON document, and the same as CSV beside it."""
    document = finite({"settings": settings_json, "experiments": records})
    write_text(path, json.dumps(document, indent=2) + "\n")
    write_text(str(Path(path).with_suffix(".csv")), export_csv_text(document["experiments"], load))


def write_outputs(
    settings: Settings,
    model: str,
    load: str,
    results: list[LevelResult],
    options: dict[str, Any],
    extra: dict[str, Any],
) -> None:
    """Every output the options ask for, then the failure (if any requests failed)."""
    from ._bench_report import csv_text, level_json, profile_record, results_table
    from ._render import console, emit_json

    if options["report_path"]:
        text = csv_text(
            results,
            options["verbose_csv"],
            options["collect_metrics"],
            options["percentile"],
            cache=bool(extra.get("response_cache")),
        )
        if options["report_path"] == "-":
            settings.stdout.write(text)
        else:
            write_text(options["report_path"], text)
            write_composing(options["report_path"], results, bool(extra.get("response_cache")))
    if options["export_path"]:
        records = [
            {load: int(r.level) if load == "concurrency" else r.level, "metrics": profile_record(r)}
            for r in results
        ]
        write_export(
            options["export_path"], _settings_json(model, load, options, extra), load, records
        )
    if options["plot_path"]:
        from ._plot import plot

        plot(Path(options["plot_path"]), model, load, results)
    if settings.json_output:
        emit_json(
            settings,
            {
                "model": model,
                "model_version": options["model_version"],
                "load": load,
                "binary": options["binary"],
                **extra,
                "duration_s": options["duration"],
                "requests_per_level": options["request_count"],
                "warmup_s": options["warmup"],
                "levels": [finite(level_json(r, options["percentile"])) for r in results],
            },
        )
    elif options["report_path"] != "-" and results:
        out = console(settings)
        out.print(results_table(model, load, results, out.width))
    _fail_on_errors(results)


def composing_path(report: str, name: str, version: str) -> Path:
    """Where the CSV of an ensemble's step model goes: beside ``-f``'s file, named
    ``NAME_vVERSION.`` and that file's name (perf_analyzer's name)."""
    path = Path(report)
    return path.with_name(f"{name}_v{version}.{path.name}")


def write_composing(report: str, results: list[LevelResult], cache: bool) -> None:
    """An ensemble's ``-f``: one CSV per model it runs, beside the ensemble's."""
    from ._bench_report import composing_csv_texts

    for (name, version), text in composing_csv_texts(results, cache).items():
        write_text(str(composing_path(report, name, version)), text)


def _fail_on_errors(results: list[LevelResult]) -> None:
    failed = sum(r.errors for r in results)
    if failed:
        total = failed + sum(r.requests for r in results)
        first_error = next(r.first_error for r in results if r.first_error)
        raise CliError(f"{failed} of {total} requests failed; first error: {first_error}")
