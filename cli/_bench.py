"""``bench MODEL``: perf_analyzer-like load generation, a results table and exports."""

from __future__ import annotations

import csv
import io
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._complete import complete_model
from ._errors import CliError
from ._infer import build_inputs, fetch_model_io, input_options, parse_input_args
from ._render import console, emit_json, new_table, print_table
from ._settings import Settings, json_flag
from ._values import batch_size as request_batch_size

if TYPE_CHECKING:
    import numpy as np

    import tritonhttp

    from ._load import LevelResult
    from ._values import ModelIO

__all__ = ["bench", "parse_levels", "random_inputs"]


def parse_levels(text: str, what: str, integer: bool) -> list[float]:
    """``"1,2,4"`` or ``"START:END[:STEP]"`` (inclusive) -> levels."""
    levels: list[float] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if ":" in part:
                bounds = [float(x) for x in part.split(":")]
                if len(bounds) not in (2, 3):
                    raise ValueError(part)
                start, end = bounds[0], bounds[1]
                step = bounds[2] if len(bounds) == 3 else 1.0
                if step <= 0 or end < start:
                    raise ValueError(part)
                count = math.floor((end - start) / step + 1e-9) + 1
                levels.extend(start + i * step for i in range(count))
            elif part:
                levels.append(float(part))
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


def _random_array(datatype: str, shape: list[int], string_length: int) -> np.ndarray[Any, Any]:
    import numpy as np

    from tritonhttp.utils import triton_to_np_dtype

    rng = np.random.default_rng(0)
    count = math.prod(shape)
    if datatype == "BYTES":
        letters = rng.integers(ord("a"), ord("z") + 1, size=(count, string_length), dtype=np.uint8)
        out = np.empty(count, dtype=np.object_)
        out[:] = [row.tobytes() for row in letters]
        return out.reshape(shape)
    if datatype == "BOOL":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    dtype = np.dtype(triton_to_np_dtype(datatype))
    if dtype.kind in "iu":
        high = min(100, int(np.iinfo(dtype).max))
        return rng.integers(0, high, size=shape).astype(dtype)
    return rng.random(size=shape, dtype=np.float32).astype(dtype)


def random_inputs(
    io_: ModelIO,
    given: dict[str, np.ndarray[Any, Any]],
    batch_size: int,
    string_length: int,
) -> dict[str, np.ndarray[Any, Any]]:
    """Arrays for every model input: the given ones, random data for the others."""
    arrays = dict(given)
    for name, spec in io_.inputs.items():
        if name in arrays:
            continue
        dims = list(spec.shape)
        if io_.batches and dims:
            dims[0] = batch_size
        dims = [1 if d < 0 else d for d in dims]
        arrays[name] = _random_array(spec.datatype, dims, string_length)
    return arrays


def _make_request(
    arrays: dict[str, np.ndarray[Any, Any]], output_names: list[str], binary: bool
) -> tuple[list[tritonhttp.InferInput], list[tritonhttp.InferRequestedOutput]]:
    import tritonhttp

    from ._values import triton_datatype

    inputs = []
    for name, array in arrays.items():
        tensor = tritonhttp.InferInput(name, list(array.shape), triton_datatype(array, name))
        inputs.append(tensor.set_data_from_numpy(array, binary_data=binary))
    outputs = [tritonhttp.InferRequestedOutput(n, binary_data=binary) for n in output_names]
    return inputs, outputs


def _level_json(result: LevelResult) -> dict[str, Any]:
    return {
        "level": int(result.level) if result.load == "concurrency" else result.level,
        "requests": result.requests,
        "errors": result.errors,
        "window_s": result.window_s,
        "throughput": {
            "requests_per_s": result.throughput,
            "inferences_per_s": result.throughput * result.batch_size,
        },
        "latency_ms": result.latency_ms(),
        "server_us": result.server_us,
        "first_error": result.first_error,
    }


_CSV_FIELDS = [
    "load",
    "level",
    "requests",
    "errors",
    "window_s",
    "requests_per_s",
    "inferences_per_s",
    *[f"latency_{k}_ms" for k in ("avg", "min", "p50", "p90", "p95", "p99", "max")],
    *[f"server_{k}_us" for k in ("queue", "compute_input", "compute_infer", "compute_output")],
]


def _csv_text(results: list[LevelResult]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_CSV_FIELDS)
    for r in results:
        lat = r.latency_ms()
        server = r.server_us or {}
        writer.writerow(
            [
                r.load,
                int(r.level) if r.load == "concurrency" else r.level,
                r.requests,
                r.errors,
                f"{r.window_s:.6f}",
                f"{r.throughput:.3f}",
                f"{r.throughput * r.batch_size:.3f}",
                *[f"{lat[k]:.4f}" for k in ("avg", "min", "p50", "p90", "p95", "p99", "max")],
                *[
                    f"{server[k]:.2f}" if k in server and not math.isnan(server[k]) else ""
                    for k in ("queue", "compute_input", "compute_infer", "compute_output")
                ],
            ]
        )
    return buffer.getvalue()


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _results_table(model: str, load: str, results: list[LevelResult]) -> Any:
    label = "concurrency" if load == "concurrency" else "rate/s"
    numeric = (
        label,
        "requests",
        "errors",
        "infer/s",
        "avg ms",
        "p50",
        "p90",
        "p95",
        "p99",
        "queue µs",
        "compute µs",
    )
    table = new_table(*numeric, numeric=numeric, title=f"{model}: latency in ms")
    for r in results:
        lat = r.latency_ms()
        server = r.server_us or {}
        compute = sum(
            server.get(k, math.nan) for k in ("compute_input", "compute_infer", "compute_output")
        )
        level = str(int(r.level)) if load == "concurrency" else f"{r.level:g}"
        table.add_row(
            level,
            str(r.requests),
            str(r.errors),
            f"{r.throughput * r.batch_size:.1f}",
            _ms(lat["avg"]),
            _ms(lat["p50"]),
            _ms(lat["p90"]),
            _ms(lat["p95"]),
            _ms(lat["p99"]),
            "-" if not server else _ms(server["queue"]),
            "-" if not server else _ms(compute),
        )
    return table


@click.command()
@click.argument("model", shell_complete=complete_model)
@click.option(
    "--concurrency",
    "-c",
    metavar="LIST",
    help="Closed loop: requests kept in flight, e.g. 1,2,4,8 or 1:16:4 (default 1).",
)
@click.option(
    "--request-rate",
    "-r",
    metavar="LIST",
    help="Open loop: requests per second, e.g. 100,200 (instead of --concurrency).",
)
@click.option(
    "--duration",
    "-d",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Measure each level for SECONDS (default 5).",
)
@click.option(
    "--requests",
    "-n",
    "request_count",
    type=click.IntRange(min=1),
    help="Measure each level over N requests (instead of --duration).",
)
@click.option(
    "--warmup",
    type=click.FloatRange(min=0),
    default=0.5,
    show_default=True,
    metavar="SECONDS",
    help="Unmeasured load before each level.",
)
@click.option(
    "--mode",
    type=click.Choice(["loop", "sync", "async"]),
    default="loop",
    show_default=True,
    help="loop: one thread, N connections, body encoded once (measures the server); "
    "sync: N threads sharing one client; async: async_infer from one thread.",
)
@click.option(
    "--max-threads",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Request-rate mode: most requests in flight.",
)
@input_options
@click.option(
    "--batch-size",
    "-b",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Batch size of the random inputs (models that batch).",
)
@click.option(
    "--string-length",
    type=click.IntRange(min=0),
    default=16,
    show_default=True,
    help="Length of random BYTES elements.",
)
@click.option("--model-version", default="", metavar="VERSION", help="Model version.")
@click.option(
    "--binary/--no-binary",
    default=True,
    show_default=True,
    help="Tensors as binary data (or inside the JSON).",
)
@click.option("--csv", "csv_path", metavar="PATH", help="Write the results as CSV (- for stdout).")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    metavar="FILE.png",
    help="Plot latency against throughput (needs matplotlib).",
)
@json_flag
@click.pass_obj
def bench(
    settings: Settings,
    model: str,
    concurrency: str | None,
    request_rate: str | None,
    duration: float | None,
    request_count: int | None,
    warmup: float,
    mode: str,
    max_threads: int,
    inputs: tuple[str, ...],
    shapes: tuple[str, ...],
    datatypes: tuple[str, ...],
    batch_size: int,
    string_length: int,
    model_version: str,
    binary: bool,
    csv_path: str | None,
    plot_path: str | None,
) -> None:
    """Measure throughput and latency of MODEL under load, like perf_analyzer.

    Inputs are random (from the model metadata) unless given with --input. Each level
    runs --warmup seconds, then is measured; progress goes to stderr and the table (or
    --json) to stdout.

    \b
    Examples:
      triton-cli bench add_sub -c 1,2,4,8 -d 5
      triton-cli bench simple -b 4 -r 100,200,400 -n 1000 --csv out.csv --plot out.png
    """
    if concurrency and request_rate:
        raise click.UsageError("give --concurrency or --request-rate, not both")
    if duration is not None and request_count is not None:
        raise click.UsageError("give --duration or --requests, not both")
    if duration is None and request_count is None:
        duration = 5.0
    if csv_path == "-" and settings.json_output:
        raise click.UsageError("--csv - and --json both want stdout: give --csv a file")
    if request_rate:
        load, levels = "request_rate", parse_levels(request_rate, "--request-rate", False)
        pool = max_threads
    else:
        load, levels = "concurrency", parse_levels(concurrency or "1", "--concurrency", True)
        pool = int(max(levels))
    input_args = parse_input_args(inputs, shapes, datatypes)
    if plot_path:
        from ._plot import check_available

        check_available()
    headers = settings.request_headers
    with settings.client(concurrency=pool) as client:
        model_io = fetch_model_io(client, settings, model, model_version)
        given = build_inputs(model_io, input_args)
        arrays = random_inputs(model_io, given, batch_size, string_length)
        request_inputs, request_outputs = _make_request(arrays, list(model_io.outputs), binary)
        batch = request_batch_size(model_io, arrays)
        # One request up front: a bad input or a missing model fails here, at once.
        client.infer(model, request_inputs, model_version, request_outputs, headers=headers)
        from ._load import LoadGenerator

        loop_request = None
        if mode == "loop":
            import tritonhttp

            from ._loop import build_request

            body, json_size = tritonhttp.InferenceServerClient.generate_request_body(
                request_inputs, request_outputs
            )
            loop_request = (
                settings,
                build_request(settings, model, model_version, body, json_size),
            )

        generator = LoadGenerator(
            client,
            model,
            model_version,
            request_inputs,
            request_outputs,
            headers,
            mode=mode,
            max_threads=max_threads,
            batch_size=batch,
            loop_request=loop_request,
        )
        results = _run_levels(settings, generator, load, levels, duration, request_count, warmup)
    if csv_path:
        text = _csv_text(results)
        if csv_path == "-":
            settings.stdout.write(text)
        else:
            Path(csv_path).write_text(text, encoding="utf-8")
    if plot_path:
        from ._plot import plot

        plot(Path(plot_path), model, load, results)
    if settings.json_output:
        emit_json(
            settings,
            {
                "model": model,
                "model_version": model_version,
                "mode": mode,
                "load": load,
                "batch_size": batch,
                "binary": binary,
                "duration_s": duration,
                "requests_per_level": request_count,
                "warmup_s": warmup,
                "levels": [_level_json(r) for r in results],
            },
        )
    elif csv_path != "-":
        print_table(settings, _results_table(model, load, results))
    failed = sum(r.errors for r in results)
    if failed:
        total = failed + sum(r.requests for r in results)
        first_error = next(r.first_error for r in results if r.first_error)
        raise CliError(f"{failed} of {total} requests failed; first error: {first_error}")


class _Reporter:
    """Progress callback of one level: fraction done and requests per second so far."""

    def __init__(self, progress: Any, task: Any) -> None:
        self._progress = progress
        self._task = task
        self._started = 0.0

    def __call__(self, done: float, completed: int) -> None:
        import time

        now = time.perf_counter()
        if not self._started:
            self._started = now
        rate = completed / max(now - self._started, 1e-9)
        self._progress.update(self._task, completed=done, status=f"{completed} req, {rate:.0f}/s")


def _run_levels(
    settings: Settings,
    generator: Any,
    load: str,
    levels: list[float],
    duration: float | None,
    request_count: int | None,
    warmup: float,
) -> list[LevelResult]:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    err = console(settings, stderr=True)
    results = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=err,
        disable=not err.is_terminal,
        transient=False,
    ) as progress:
        for level in levels:
            name = f"concurrency {int(level)}" if load == "concurrency" else f"{level:g} req/s"
            task = progress.add_task(name, total=1.0, status="")

            report = _Reporter(progress, task)
            result = generator.run(
                load,
                level,
                duration=duration,
                requests=request_count,
                warmup=warmup,
                progress=report,
            )
            progress.update(
                task, completed=1.0, status=f"{result.requests} req, {result.throughput:.0f}/s"
            )
            results.append(result)
    sys.stderr.flush()
    return results
