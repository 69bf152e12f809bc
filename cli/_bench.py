"""``bench MODEL``: perf_analyzer's inputs, measurement and reports; genai-perf's
streaming metrics with ``--streaming``.

The work is split by concern: ``_bench_options`` (the flags), ``_bench_inputs`` (input
data), ``_bench_requests`` (prepared requests, shared memory, sequences, validation),
``_bench_load`` (load generation), ``_bench_measure`` (windows, stability),
``_bench_run`` (a perf_analyzer-style run: sweep and outputs), ``_bench_report`` (text,
table, CSV, JSON), ``_bench_stream`` (streaming mode), ``_bench_metrics``
(``--collect-metrics``), ``_plot`` (``--plot``).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import click

from ._bench_options import (
    export_options,
    input_options,
    load_options,
    measurement_options,
    streaming_options,
)
from ._complete import complete_model
from ._settings import Settings, json_flag

__all__ = ["bench", "parse_levels"]


#: The most levels a list or range may give (a sweep is measured level by level).
MAX_LEVELS = 100_000


def parse_levels(text: str, what: str, integer: bool) -> list[float]:
    """``"1,2,4"`` or ``"START:END[:STEP]"`` (inclusive) -> levels."""
    levels: list[float] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if ":" in part:
                bounds = [_finite(x, what) for x in part.split(":")]
                if len(bounds) not in (2, 3):
                    raise ValueError(part)
                start, end = bounds[0], bounds[1]
                step = bounds[2] if len(bounds) == 3 else 1.0
                if end == 0 and start > 0:
                    # perf_analyzer reads END 0 as "step up until -l is reached".
                    raise click.BadParameter(
                        f"{part!r}: an open range (END 0, stepping up until the latency "
                        "threshold) is not supported; give the highest level as END "
                        "(with -l, the sweep stops at the first level over it)",
                        param_hint=what,
                    )
                if step <= 0 or end < start:
                    raise ValueError(part)
                if integer and any(v != int(v) for v in bounds):
                    raise click.BadParameter(
                        f"{part!r}: START, END and STEP of a concurrency range must be "
                        "whole numbers",
                        param_hint=what,
                    )
                count = math.floor((end - start) / step + 1e-9) + 1
                if len(levels) + count > MAX_LEVELS:
                    raise click.BadParameter(
                        f"{text!r} gives more than {MAX_LEVELS:,} levels", param_hint=what
                    )
                levels.extend(start + i * step for i in range(count))
            elif part:
                levels.append(_finite(part, what))
    except ValueError:
        raise click.BadParameter(
            f"expected a list like 1,2,4 or a range START:END[:STEP], got {text!r}",
            param_hint=what,
        ) from None
    if not levels or any(v <= 0 for v in levels):
        raise click.BadParameter("levels must be positive", param_hint=what)
    if integer and any(v != int(v) for v in levels):
        raise click.BadParameter("concurrency levels must be whole numbers", param_hint=what)
    return levels


def _finite(text: str, what: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise click.BadParameter(f"{text.strip()!r} is not a finite number", param_hint=what)
    return value


def _check_usage(options: dict[str, Any], json_output: bool) -> None:
    """Conflicting options: usage errors before the server is contacted."""
    if options["concurrency"] and options["request_rate"]:
        raise click.UsageError("give --concurrency or --request-rate, not both")
    if options["duration"] is not None and options["request_count"] is not None:
        raise click.UsageError("give --duration or --requests, not both")
    if options["request_intervals"] and (options["request_rate"] or options["concurrency"]):
        raise click.UsageError("--request-intervals sets the schedule: drop -c/-r")
    if options["report_path"] == "-" and json_output:
        raise click.UsageError("-f - and --json both want stdout: give -f a file")
    if options["binary_search"] and not options["latency_threshold"]:
        # perf_analyzer: "The --latency-threshold cannot be 0 for binary search mode."
        raise click.UsageError("--binary-search needs -l/--latency-threshold above 0")
    if options["latency_threshold"] == 0:
        options["latency_threshold"] = None  # perf_analyzer's -l 0: no limit
    if options["streaming"] and options["shared_memory"] != "none":
        raise click.UsageError("--streaming sends text through generate_stream: no shared memory")
    _check_mode_options(options)
    _check_metrics_options(options)
    if options["shapes"]:
        from ._bench_inputs import parse_shape_option

        parse_shape_option(options["shapes"])  # a malformed --shape before any request
    _check_request_count(options)
    if options["plot_path"]:
        from ._plot import check_available

        check_available()
    _check_output_paths(options)
    _check_open_files(options)


#: Descriptors a run holds besides its load connections: the client that reads the
#: model and its statistics, a metrics connection, input regions, the event loop.
_FILES_BESIDE_THE_LOAD = 16


def _check_open_files(options: dict[str, Any]) -> None:
    """Every request in flight holds a connection (an open file): a load the process's
    open-file limit cannot hold is refused here, not minutes later with "Too many open
    files". The soft limit is raised to the hard one first when the load needs it."""
    from ._fdlimit import files_in_use, raise_open_file_limit

    if options["request_rate"] or options["request_intervals"]:
        workers, flag = options["max_threads"], "--max-threads"
    else:
        levels = parse_levels(options["concurrency"] or "1", "--concurrency", True)
        workers, flag = int(max(levels)), "--concurrency"
    per_worker = 1
    if (
        not options["streaming"]
        and options["shared_memory"] == "system"
        and options["output_shared_memory_size"]
        and sys.version_info < (3, 13)  # mmap keeps a duplicate of a region's descriptor
    ):
        per_worker = 2  # its connection and its output region
    needed = files_in_use() + workers * per_worker + _FILES_BESIDE_THE_LOAD
    limit = raise_open_file_limit(needed)
    if limit is not None and needed > limit:
        what = "a connection" if per_worker == 1 else "a connection and an output region"
        raise click.BadParameter(
            f"{workers} requests in flight need about {needed} open files ({what} each), "
            f"more than this process's open-file limit of {limit} (ulimit -n): lower "
            f"{flag} or raise the limit",
            param_hint=flag,
        )


#: Options only the perf_analyzer-style run uses, and only --streaming uses.
_NOT_STREAMING = (
    "binary_search", "latency_threshold", "mode", "measurement_interval", "measurement_mode",
    "measurement_request_count", "stability_percentage", "max_trials", "percentile",
    "input_data", "inputs", "datatypes", "shapes", "batch_size", "string_length",
    "string_data", "output_shared_memory_size", "device_id", "sequence_length",
    "sequence_id_range", "serial_sequences", "binary", "verbose_csv", "collect_metrics",
    "metrics_url", "metrics_interval",
)  # fmt: skip
_ONLY_STREAMING = (
    "prompt_input", "output_field", "input_file", "num_prompts",
    "synthetic_input_tokens_mean", "synthetic_input_tokens_stddev", "output_tokens_mean",
    "output_tokens_stddev", "output_tokens_param", "extra_inputs", "tokenizer", "goodput",
)  # fmt: skip


def _check_mode_options(options: dict[str, Any]) -> None:
    """An option given on the command line that this mode never reads is an error, not
    something silently left out (--collect-metrics with --streaming, say)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    unused = _NOT_STREAMING if options["streaming"] else _ONLY_STREAMING
    for name in unused:
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            param = next(p for p in ctx.command.params if p.name == name)
            flag = "/".join(
                max(opts, key=len) for opts in (param.opts, param.secondary_opts) if opts
            )
            if options["streaming"]:
                raise click.UsageError(f"{flag} is not used by --streaming runs")
            raise click.UsageError(f"{flag} is used only by --streaming runs")


def _check_metrics_options(options: dict[str, Any]) -> None:
    """--metrics-url and --metrics-interval without --collect-metrics would be ignored:
    perf_analyzer refuses them ("Must specify --collect-metrics when using ...")."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    for name, flag in (
        ("metrics_url", "--metrics-url"),
        ("metrics_interval", "--metrics-interval"),
    ):
        given = ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
        if given and not options["collect_metrics"]:
            raise click.UsageError(f"{flag} is read only with --collect-metrics")


def _check_request_count(options: dict[str, Any]) -> None:
    """-n below a concurrency level never puts that many requests in flight: perf_analyzer
    refuses it ("--request-count can not be less than concurrency")."""
    count = options["request_count"]
    if count is None or options["request_rate"] or options["request_intervals"]:
        return
    highest = int(max(parse_levels(options["concurrency"] or "1", "--concurrency", True)))
    if count < highest:
        raise click.UsageError(
            f"-n/--request-count {count} is less than concurrency {highest}: a level never "
            "has more requests in flight than it sends"
        )


def _check_output_paths(options: dict[str, Any]) -> None:
    """Every file the run will write: refused before any load when it cannot be written
    or when two outputs would land in the same file."""
    named: list[tuple[str, Path]] = []
    if options["report_path"] and options["report_path"] != "-":
        named.append(("-f", Path(options["report_path"])))
    if options["export_path"]:
        export = Path(options["export_path"])
        if export.with_suffix(".csv") == export:
            raise click.UsageError(
                f"--profile-export-file {export}: its CSV is written beside it as "
                f"{export.with_suffix('.csv')}: give a .json path"
            )
        named.append(("--profile-export-file", export))
        named.append(("the CSV beside --profile-export-file", export.with_suffix(".csv")))
    if options["plot_path"]:
        named.append(("--plot", Path(options["plot_path"])))
    seen: dict[Path, str] = {}
    for what, path in named:
        key = Path(os.path.abspath(path))
        if key in seen:
            raise click.UsageError(
                f"{seen[key]} and {what} would both write {path}: give them different files"
            )
        seen[key] = what
        problem = _unwritable(path)
        if problem:
            raise click.UsageError(f"{what}: cannot write {path}: {problem}")


def _unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written, or None."""
    if path.is_dir():
        return "it is a directory"
    folder = path.parent
    if not folder.is_dir():
        return f"no directory {folder}"
    if path.exists():
        return None if os.access(path, os.W_OK) else "permission denied"
    return None if os.access(folder, os.W_OK | os.X_OK) else f"permission denied in {folder}"


@click.command()
@click.argument("model", shell_complete=complete_model)
@load_options
@measurement_options
@input_options
@export_options
@streaming_options
@json_flag
@click.pass_obj
def bench(settings: Settings, /, model: str, **options: Any) -> None:
    """Measure throughput and latency of MODEL under load, like perf_analyzer.

    Each level (-c concurrency or -r request rate) is warmed up, then measured in
    windows until three agree within -s percent (or once, with -n/-d). The report
    gives client latencies and the server-side breakdown of the measured windows;
    --streaming measures a decoupled model as genai-perf does (time to first token,
    inter-token latency, ...). Progress goes to stderr, results to stdout.

    \b
    Examples:
      triton-cli bench add_sub -c 1:8:2 -p 2000 -f perf.csv
      triton-cli bench simple -b 4 --input-data data.json -r 100,200 -n 1000
      triton-cli bench text_stream --streaming -c 4 --output-tokens-mean 64
    """
    _check_usage(options, settings.json_output)
    if options["streaming"]:
        from ._bench_stream import run_streaming

        run_streaming(settings, model, options)
        return
    from ._bench_run import run_bench

    run_bench(settings, model, options)
