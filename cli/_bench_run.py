"""A perf_analyzer-style ``bench`` run: set up the requests, sweep the levels, report."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._errors import CliError, InputError, describe

if TYPE_CHECKING:
    import tritonhttp

    from ._bench_load import Target
    from ._bench_measure import LevelResult, MeasureOptions, Snapshot
    from ._settings import Settings
    from ._values import ModelIO

__all__ = ["run_bench"]


@dataclass
class Plan:
    """The levels to run and how."""

    load: str  # "concurrency" or "request_rate"
    levels: list[float]
    mode: str
    distribution: str
    intervals: list[float] | None
    max_threads: int


def _plan(options: dict[str, Any]) -> Plan:
    from ._bench import parse_levels

    intervals = None
    if options["request_intervals"]:
        intervals = _read_intervals(options["request_intervals"])
        rate = len(intervals) / sum(intervals)
        return Plan(
            "request_rate", [rate], options["mode"], "constant", intervals, options["max_threads"]
        )
    if options["request_rate"]:
        levels = parse_levels(options["request_rate"], "--request-rate", False)
        return Plan(
            "request_rate",
            levels,
            options["mode"],
            options["request_distribution"],
            None,
            options["max_threads"],
        )
    levels = parse_levels(options["concurrency"] or "1", "--concurrency", True)
    return Plan("concurrency", levels, options["mode"], "constant", None, options["max_threads"])


def _read_intervals(path: str) -> list[float]:
    try:
        lines = Path(path).read_text(encoding="utf-8").split()
        values = [float(x) / 1e6 for x in lines]
    except OSError as e:
        raise InputError(f"--request-intervals {path}: {e.strerror or e}") from None
    except ValueError:
        raise InputError(f"--request-intervals {path}: expected microseconds, one a line") from None
    if not values or any(v < 0 for v in values) or sum(values) <= 0:
        raise InputError(f"--request-intervals {path}: needs positive intervals")
    return values


def _pass_printer(
    settings: Settings, percentile: int | None
) -> Callable[[int, float, float], None]:
    """``-v``: one line per window, as perf_analyzer prints its passes."""
    what = "Avg latency" if percentile is None else f"p{percentile} latency"

    def show(number: int, ips: float, latency_ms: float) -> None:
        latency = "-" if math.isinf(latency_ms) else f"{latency_ms * 1000:.0f}"
        click.echo(
            f"  Pass [{number}] throughput: {ips:g} infer/sec. {what}: {latency} usec",
            file=settings.stdout,
        )

    return show


def measure_options(
    options: dict[str, Any], batch: int, settings: Settings | None = None
) -> MeasureOptions:
    """The measurement options of the command line (``settings``: where ``-v`` prints
    each window; None: nowhere)."""
    from ._bench_measure import MeasureOptions

    shown = settings is not None and not settings.json_output and options["report_path"] != "-"
    on_window = None
    if options["verbose"] and shown and settings is not None:
        on_window = _pass_printer(settings, options["percentile"])

    return MeasureOptions(
        interval_s=options["measurement_interval"] / 1000,
        mode=options["measurement_mode"],
        request_count=options["measurement_request_count"],
        stability=options["stability_percentage"] / 100,
        max_trials=options["max_trials"],
        percentile=options["percentile"],
        latency_threshold_ms=options["latency_threshold"],
        warmup_s=options["warmup"],
        warmup_requests=options["warmup_request_count"],
        fixed_requests=options["request_count"],
        fixed_duration_s=options["duration"],
        batch_size=batch,
        on_window=on_window,
    )


@dataclass
class ModelFacts:
    """What perf_analyzer's report depends on in the model's configuration."""

    #: every ensemble of the run (the model, nested ones) -> its step models
    #: ``(name, version)``, version "" for the latest
    steps: dict[str, list[tuple[str, str]]]
    #: ``response_cache { enable: true }`` on the model or on a model it runs
    cache: bool
    decoupled: bool


def model_facts(
    client: tritonhttp.InferenceServerClient, model: str, version: str, headers: Any
) -> ModelFacts:
    """Read the model's configuration, and for an ensemble those of its step models."""
    config = client.get_model_config(model, version, headers=headers)
    facts = ModelFacts({}, _cache_on(config), _decoupled(config))
    pending = [(model, config)]
    while pending:
        name, cfg = pending.pop()
        if cfg.get("platform") != "ensemble" or name in facts.steps:
            continue
        steps = []
        for step in cfg.get("ensemble_scheduling", {}).get("step", []):
            wanted = int(step.get("model_version", -1))
            steps.append((str(step["model_name"]), "" if wanted == -1 else str(wanted)))
        facts.steps[name] = steps
        for step_name, step_version in steps:
            try:
                step_cfg = client.get_model_config(step_name, step_version, headers=headers)
            except Exception:  # the ensemble answers for itself; its report just has less
                continue
            facts.cache = facts.cache or _cache_on(step_cfg)
            pending.append((step_name, step_cfg))
    return facts


def _cache_on(config: dict[str, Any]) -> bool:
    return bool(config.get("response_cache", {}).get("enable"))


def _decoupled(config: dict[str, Any]) -> bool:
    return bool(config.get("model_transaction_policy", {}).get("decoupled"))


def _totals(entry: dict[str, Any]) -> tuple[int, int, dict[str, tuple[int, int]]]:
    from ._bench_measure import STAT_KEYS

    stats = entry.get("inference_stats", {})
    totals = {}
    for k in STAT_KEYS:
        figure = stats.get(k, {})
        totals[k] = (int(figure.get("count", 0)), int(figure.get("ns", 0)))
    return int(entry.get("inference_count", 0)), int(entry.get("execution_count", 0)), totals


def _summed(entries: list[dict[str, Any]]) -> tuple[int, int, dict[str, tuple[int, int]]]:
    from ._bench_measure import STAT_KEYS

    infer = execs = 0
    totals = {k: (0, 0) for k in STAT_KEYS}
    for entry in entries:
        i, e, t = _totals(entry)
        infer, execs = infer + i, execs + e
        totals = {k: (totals[k][0] + t[k][0], totals[k][1] + t[k][1]) for k in STAT_KEYS}
    return infer, execs, totals


def server_stats(
    client: tritonhttp.InferenceServerClient,
    model: str,
    version: str,
    headers: Any,
    steps: dict[str, list[tuple[str, str]]] | None = None,
) -> Callable[[], Snapshot]:
    """A reader of the model's statistics (None when the server has no statistics).
    For an ensemble (``steps``) one reading of every model's statistics also gives
    those of the models it runs."""

    def read() -> Snapshot:
        try:
            if not steps:
                answer = client.get_inference_statistics(model, version, headers=headers)
                return _summed(answer["model_stats"])
            answer = client.get_inference_statistics(headers=headers)
            entries = answer["model_stats"]
            mine = [e for e in entries if e["name"] == model]
            if version:
                mine = [e for e in mine if e["version"] == version]
            named = {n for ensemble in steps.values() for n, _ in ensemble}
            others = {(e["name"], e["version"]): _totals(e) for e in entries if e["name"] in named}
            infer, execs, totals = _summed(mine)
            return infer, execs, totals, others
        except Exception:  # statistics are a bonus: never fail the bench over them
            return None

    return read


def _input_options(options: dict[str, Any], io: ModelIO, config: dict[str, Any]) -> Any:
    from ._bench_inputs import InputOptions, parse_shape_option
    from ._infer import build_inputs, parse_input_args

    args = parse_input_args(options["inputs"], (), options["datatypes"])
    return InputOptions(
        sources=options["input_data"],
        shapes=parse_shape_option(options["shapes"]),
        string_length=options["string_length"],
        string_data=options["string_data"],
        batch_size=options["batch_size"],
        given=build_inputs(io, args),
        optional=frozenset(i["name"] for i in config.get("input", []) if i.get("optional")),
    )


@contextlib.contextmanager
def _target(
    settings: Settings,
    client: tritonhttp.InferenceServerClient,
    model: str,
    options: dict[str, Any],
) -> Iterator[tuple[Target, ModelIO]]:
    """Fetch the model, load the data, prepare the requests (and shared memory)."""
    from ._bench_inputs import load_data
    from ._bench_load import Target
    from ._bench_requests import (
        RequestSource,
        SequenceOptions,
        SharedMemory,
        parse_id_range,
        prepare,
        sequence_model,
    )
    from ._infer import fetch_model_io

    version = options["model_version"]
    io = fetch_model_io(client, settings, model, version)
    config = client.get_model_config(model, version, headers=settings.request_headers)
    data = load_data(io, _input_options(options, io, config))
    sequences = None
    if sequence_model(config):
        start, end = parse_id_range(options["sequence_id_range"])
        sequences = SequenceOptions(
            options["sequence_length"], start, end, options["serial_sequences"]
        )
    shm = None
    if options["shared_memory"] != "none":
        shm = SharedMemory(
            options["shared_memory"], client, settings.request_headers, options["device_id"]
        )
    try:
        streams = prepare(data, io, options["binary"], shm)
        if sequences is None:  # streams matter only to sequences: one round-robin list
            streams = [[step for stream in streams for step in stream]]
        source = RequestSource(streams, sequences, data.from_streams)
        target = Target(
            settings,
            client,
            model,
            version,
            source,
            shm,
            options["output_shared_memory_size"],
            tuple(io.outputs),
        )
        yield target, io
    finally:
        if shm is not None:
            shm.close()


def _check_ids(plan: Plan, target: Target, options: dict[str, Any]) -> None:
    """A sequence model needs an id for every sequence in flight at once."""
    sequences = target.source.sequences
    if sequences is None:
        return
    ids = sequences.id_end - sequences.id_start + 1
    if plan.load == "concurrency":
        most, what = int(max(plan.levels)), f"-c {int(max(plan.levels))}"
    else:
        most, what = plan.max_threads, f"--max-threads {plan.max_threads}"
    if ids < most:
        raise InputError(
            f"--sequence-id-range {options['sequence_id_range']} gives {ids} sequence "
            f"id{'s' if ids > 1 else ''}, fewer than the {most} sequences in flight at once "
            f"({what}): sequences would share an id"
        )


def _check_first(target: Target) -> None:
    """One request up front: a bad input or a missing model fails here, at once."""
    prepared = target.source.streams[0][0]
    sequence: dict[str, Any] = {}
    if target.source.sequences is not None:
        sequence = {
            "sequence_id": target.source.sequences.id_start,
            "sequence_start": True,
            "sequence_end": True,
        }
    try:
        target.client.infer(
            target.model,
            prepared.inputs,
            target.version,
            prepared.outputs,
            headers=target.settings.request_headers,
            **sequence,
        )
    except Exception as e:
        raise CliError(describe(e)) from None


def _choose_mode(plan: Plan, target: Target) -> str:
    """``loop`` when every request is the same; otherwise ``sync``."""
    source = target.source
    if plan.mode == "async" and source.sequences is not None:
        return "sync"  # one request in flight per sequence: a worker per sequence
    if plan.mode != "loop":
        return plan.mode
    same = (
        len(source.streams) == 1
        and len(source.streams[0]) == 1
        and source.sequences is None
        and not source.streams[0][0].expected
        and target.shm is None
        and plan.distribution == "constant"
        and not plan.intervals
    )
    if not same:
        return "sync"
    import tritonhttp

    from ._loop import build_request

    prepared = source.streams[0][0]
    body, json_size = tritonhttp.InferenceServerClient.generate_request_body(
        prepared.inputs, prepared.outputs
    )
    target.loop_request = build_request(
        target.settings, target.model, target.version, body, json_size
    )
    return "loop"


def run_bench(settings: Settings, model: str, options: dict[str, Any]) -> None:
    """The whole non-streaming run. Ctrl-C stops it: the levels measured until then are
    reported and written, then the run ends as interrupted (exit 130)."""
    plan = _plan(options)
    pool = int(max(plan.levels)) if plan.load == "concurrency" else plan.max_threads
    with (
        settings.client(concurrency=pool) as client,
        _target(settings, client, model, options) as (target, io),
    ):
        _check_ids(plan, target, options)
        _check_first(target)
        mode = _choose_mode(plan, target)
        batch = options["batch_size"] if io.batches else 1
        measure = measure_options(options, batch, settings)
        facts = model_facts(client, model, target.version, settings.request_headers)
        stats = server_stats(client, model, target.version, settings.request_headers, facts.steps)
        results, interrupted = _sweep(settings, target, plan, mode, measure, stats, options, facts)
    from ._bench_outputs import write_outputs

    extra = {"mode": mode, "batch_size": batch, "response_cache": facts.cache}
    if not interrupted:
        write_outputs(settings, model, plan.load, results, options, extra)
        return
    report_interrupted(lambda: write_outputs(settings, model, plan.load, results, options, extra))


def report_interrupted(write: Callable[[], None]) -> None:
    """After Ctrl-C: write what was measured (a failed-requests error is shown, not
    raised), then end as interrupted."""
    try:
        write()
    except CliError as e:
        e.show()
    raise KeyboardInterrupt


def interrupted_note(what: str | None, measured: int) -> None:
    """The line on stderr saying what Ctrl-C cut short and what is reported."""
    if measured == 0:
        return  # nothing to report: "Error: interrupted" says it all
    cut = f"Interrupted during {what}: that level is left out; " if what else "Interrupted; "
    levels = "the level measured is" if measured == 1 else f"the {measured} levels measured are"
    click.echo(f"{cut}{levels} reported.", err=True)


def _sweep(
    settings: Settings,
    target: Target,
    plan: Plan,
    mode: str,
    measure: MeasureOptions,
    stats: Callable[[], Snapshot],
    options: dict[str, Any],
    facts: ModelFacts,
) -> tuple[list[LevelResult], bool]:
    """Measure the levels: (the results, whether Ctrl-C cut the sweep short)."""
    from ._bench_measure import composing_deltas
    from ._bench_progress import progress_bar

    results: list[LevelResult] = []
    show = not settings.json_output and options["report_path"] != "-"
    sampler = _sampler(settings, target.model, options)
    current: list[str] = []  # the level being measured
    interrupted = False
    with progress_bar(settings, options["progress_interval"]) as start:

        def run(level: float) -> tuple[LevelResult, bool]:
            current[:] = [_level_name(plan.load, level)]
            result, over = _level(target, plan, mode, measure, stats, level, start, sampler)
            result.composing = composing_deltas(*result.readings, facts.steps, target.model)
            # kept before it is shown, so that Ctrl-C cannot leave a shown level out
            if options["binary_search"] or (result.stable and not over):
                results.append(result)
            current.clear()
            if show and result.stable and not over:
                from ._bench_report import level_text

                text = level_text(result, measure.percentile, options["verbose"], facts.cache)
                click.echo(text, file=settings.stdout)
            return result, over

        try:
            if options["binary_search"]:
                _binary_search(plan, run)
            else:
                for level in plan.levels:
                    result, over = run(level)
                    if over or not result.stable:
                        _stop_note(result, measure, over)
                        break
        except KeyboardInterrupt:
            interrupted = True
            if sampler is not None and current:
                sampler.stop()  # the level in progress is left out: just end its sampling
    sys.stderr.flush()
    if interrupted:
        interrupted_note(current[0] if current else None, len(results))
        if not results:
            raise KeyboardInterrupt
        return results, True
    if not results:
        within = " within the latency limit" if measure.latency_threshold_ms is not None else ""
        raise CliError(f"no level gave a stable measurement{within}")
    return results, False


def _level_name(load: str, level: float) -> str:
    return f"concurrency {int(level)}" if load == "concurrency" else f"request rate {level:g}"


def _stop_note(result: LevelResult, measure: MeasureOptions, over: bool) -> None:
    what = _level_name(result.load, result.level)
    if over:
        click.echo(
            f"Measured latency went over the set limit of "
            f"{measure.latency_threshold_ms:g} msec at {what}: the sweep stops.",
            err=True,
        )
    else:
        hint = (
            "--measurement-request-count"
            if measure.mode == "count_windows"
            else "--measurement-interval"
        )
        click.echo(
            f"Failed to obtain stable measurement within {measure.max_trials} "
            f"measurement windows for {what}. Please try to increase the {hint}.",
            err=True,
        )


def _level(
    target: Target,
    plan: Plan,
    mode: str,
    measure: MeasureOptions,
    stats: Callable[[], Snapshot],
    level: float,
    start: Any,
    sampler: Any,
) -> tuple[LevelResult, bool]:
    import time

    from ._bench_load import Load, Schedule
    from ._bench_measure import measure_level

    concurrent = plan.load == "concurrency"
    name = f"concurrency {int(level)}" if concurrent else f"{level:g} req/s"
    schedule = (
        None
        if concurrent
        else Schedule(plan.distribution, level, time.perf_counter() + 0.01, plan.intervals)
    )
    load = Load(
        target,
        mode,
        concurrency=int(level) if concurrent else None,
        schedule=schedule,
        max_threads=plan.max_threads,
        rate=level,
    )
    if sampler is not None:
        sampler.start()
    result, over = measure_level(load, (plan.load, level), measure, stats, start(name))
    if sampler is not None:
        result.metrics = sampler.stop()
    return result, over


def _sampler(settings: Settings, model: str, options: dict[str, Any]) -> Any:
    if not options["collect_metrics"]:
        return None
    from ._bench_metrics import MetricsSampler
    from ._metrics import resolve_metrics_url

    url = resolve_metrics_url(settings, options["metrics_url"])
    return MetricsSampler(settings, url, options["metrics_interval"] / 1000, model)


def _binary_search(plan: Plan, run: Callable[[float], tuple[LevelResult, bool]]) -> None:
    """The highest level in [first, last] whose latency stays under -l (perf_analyzer's
    --binary-search); ``run`` keeps every level measured, in the order measured."""
    low, high = plan.levels[0], plan.levels[-1]
    step = (plan.levels[1] - plan.levels[0]) if len(plan.levels) > 1 else 1.0
    integer = plan.load == "concurrency"

    def good(level: float) -> bool:
        result, over = run(level)
        return result.stable and not over

    if not good(low) or good(high):
        return
    while high - low > step:
        middle = (low + high) / 2
        if integer:
            middle = float(math.floor(middle))
        if good(middle):
            low = middle
        else:
            high = middle
