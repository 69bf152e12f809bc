"""``bench --streaming``: LLM-style measurement with genai-perf's metrics.

Each request sends a prompt through ``generate_stream`` (a decoupled model) or
``generate`` (a model that answers in one piece) and records when every response
arrives. A token is one response carrying the output field, unless ``--tokenizer``
counts the tokens of its text. Per level (``-c`` concurrency or ``-r`` rate), over the
requests that finished in the measured span:

* ``time_to_first_token``: first response - request sent (ms);
* ``time_to_second_token``: second response - first response (ms);
* ``inter_token_latency``: (last response - first response) / (output tokens - 1) (ms);
* ``request_latency``: end of the stream - request sent (ms);
* ``output_sequence_length`` / ``input_sequence_length`` (tokens);
* ``output_token_throughput_per_user``: 1000 / inter_token_latency (tokens/sec/user);
* ``output_token_throughput``: output tokens / span, ``request_throughput``:
  requests / span, and with ``--goodput`` ``request_goodput``: requests meeting every
  target / span.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._errors import CliError, InputError, describe

if TYPE_CHECKING:
    import tritonhttp

    from ._bench_load import Schedule
    from ._bench_measure import LevelResult, Snapshot
    from ._bench_prompts import Prompt
    from ._settings import Settings

__all__ = ["StreamRecord", "compute_metrics", "run_streaming"]

#: Metric name -> unit, in the order shown.
UNITS = {
    "time_to_first_token": "ms",
    "time_to_second_token": "ms",
    "inter_token_latency": "ms",
    "request_latency": "ms",
    "output_sequence_length": "tokens",
    "input_sequence_length": "tokens",
    "output_token_throughput_per_user": "tokens/sec/user",
    "output_token_throughput": "tokens/sec",
    "request_throughput": "requests/sec",
    "request_goodput": "requests/sec",
}


@dataclass
class StreamRecord:
    """One streamed request: when it was sent, when each token and the end arrived."""

    start: float
    tokens: list[tuple[float, int]] = field(default_factory=list)  # (time, token count)
    end: float = 0.0
    input_tokens: int = 0
    error: str | None = None
    responses: int = 0  # every response received, with or without a token

    @property
    def output_tokens(self) -> int:
        """Tokens received."""
        return sum(n for _, n in self.tokens)


@dataclass
class _Stream:
    """What every request of the run shares."""

    client: tritonhttp.InferenceServerClient
    settings: Settings
    model: str
    version: str
    decoupled: bool
    prompt_input: str
    output_field: str
    count_events: bool  # the output field is not among the model's outputs
    tokens_param: str
    extra: dict[str, Any]
    counter: Callable[[str], int] | None
    prompts: list[Prompt]
    _next: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def prompt(self) -> Prompt:
        """The next prompt, round-robin."""
        with self._lock:
            return self.prompts[next(self._next) % len(self.prompts)]

    def _tokens(self, event: Any) -> int:
        if not isinstance(event, dict):
            return 0
        if self.output_field not in event:
            return 1 if self.count_events else 0
        if self.counter is None:
            return 1
        value = event[self.output_field]
        text = value if isinstance(value, str) else "".join(map(str, value))
        return self.counter(text)

    def one(self) -> StreamRecord:
        """Send one prompt and time its responses."""
        prompt = self.prompt()
        parameters = dict(self.extra)
        if prompt.output_tokens is not None:
            parameters[self.tokens_param] = prompt.output_tokens
        inputs = {self.prompt_input: prompt.text}
        count = self.counter(prompt.text) if self.counter else len(prompt.text.split())
        headers = self.settings.request_headers
        record = StreamRecord(time.perf_counter(), input_tokens=count)
        try:
            if self.decoupled:
                stream = self.client.generate_stream(
                    self.model, inputs, self.version, parameters, headers=headers
                )
                with stream:
                    for event in stream:
                        record.tokens.append((time.perf_counter(), self._tokens(event)))
                        record.responses += 1
            else:
                answer = self.client.generate(
                    self.model, inputs, self.version, parameters, headers=headers
                )
                record.tokens.append((time.perf_counter(), self._tokens(answer)))
                record.responses = 1
        except Exception as e:
            record.error = describe(e)
        record.end = time.perf_counter()
        record.tokens = [t for t in record.tokens if t[1] > 0]
        return record


def _per_request(r: StreamRecord) -> dict[str, float]:
    """The per-request metrics (ms, tokens) of one finished request."""
    out = {
        "request_latency": (r.end - r.start) * 1000,
        "output_sequence_length": float(r.output_tokens),
        "input_sequence_length": float(r.input_tokens),
    }
    if r.tokens:
        out["time_to_first_token"] = (r.tokens[0][0] - r.start) * 1000
    if len(r.tokens) > 1:
        out["time_to_second_token"] = (r.tokens[1][0] - r.tokens[0][0]) * 1000
    if r.output_tokens > 1 and len(r.tokens) > 1:
        itl = (r.tokens[-1][0] - r.tokens[0][0]) * 1000 / (r.output_tokens - 1)
        out["inter_token_latency"] = itl
        if itl > 0:
            out["output_token_throughput_per_user"] = 1000 / itl
    return out


def _meets(values: dict[str, float], goodput: dict[str, float]) -> bool:
    from ._bench_prompts import GOODPUT_METRICS

    for name, target in goodput.items():
        value = values.get(name)
        if value is None:
            return False
        if (value < target) if GOODPUT_METRICS[name] else (value > target):
            return False
    return True


def compute_metrics(
    records: list[StreamRecord], span_s: float, goodput: dict[str, float]
) -> dict[str, dict[str, Any]]:
    """genai-perf's metrics of the successful ``records`` over ``span_s`` seconds."""
    from ._bench_stats import summary

    done = [r for r in records if r.error is None]
    per = [_per_request(r) for r in done]
    metrics: dict[str, dict[str, Any]] = {}
    for name in list(UNITS)[:7]:
        values = [p[name] for p in per if name in p]
        metrics[name] = {"unit": UNITS[name], **summary(values)}
    span = span_s if span_s > 0 else float("nan")
    tokens = sum(r.output_tokens for r in done)
    metrics["output_token_throughput"] = {
        "unit": UNITS["output_token_throughput"],
        "avg": tokens / span,
    }
    metrics["request_throughput"] = {"unit": UNITS["request_throughput"], "avg": len(done) / span}
    if goodput:
        good = sum(1 for p in per if _meets(p, goodput))
        metrics["request_goodput"] = {"unit": UNITS["request_goodput"], "avg": good / span}
    return metrics


# -- driving a level -----------------------------------------------------------------------


def _drive(
    stream: _Stream,
    concurrency: int | None,
    schedule: Schedule | None,
    threads: int,
    done: Callable[[list[StreamRecord]], bool],
) -> tuple[list[StreamRecord], float]:
    """Run requests until ``done(records)``: (records, first send to last end in s)."""
    records: list[StreamRecord] = []
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            if schedule is not None:
                delay = schedule.next() - time.perf_counter()
                if delay > 0 and stop.wait(delay):
                    return
            record = stream.one()
            if not stop.is_set():
                records.append(record)
                if done(records):
                    stop.set()

    pool = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency or threads)]
    begin = time.perf_counter()
    for thread in pool:
        thread.start()
    try:
        for thread in pool:
            thread.join()
    except KeyboardInterrupt:
        stop.set()  # no new requests; those in flight end with the process
        raise
    end = max((r.end for r in records), default=begin)
    return records, end - begin


def _intervals(options: dict[str, Any]) -> list[float] | None:
    """The gaps of ``--request-intervals`` in seconds (None without it)."""
    if not options["request_intervals"]:
        return None
    from ._bench_run import _read_intervals

    return _read_intervals(options["request_intervals"])


def _level(
    stream: _Stream,
    load: str,
    level: float,
    options: dict[str, Any],
    report: Callable[[float, int], None],
    stats: Callable[[], Snapshot] | None = None,
) -> Any:
    """Run one level: (the measured records, the measured span in seconds, the client's
    CPU per request and busy share, the server's readings). The first
    ``--warmup-request-count`` requests, and with ``-d`` those sent in the first
    ``--warmup`` seconds, are not measured. ``stats`` (for ``-f``) is read when the
    warm-up is over and once every request has ended."""
    from ._bench_load import Schedule

    count: int | None = options["request_count"]
    if count is None and not options["duration"]:
        count = len(stream.prompts)
    warm: int = options["warmup_request_count"]
    begin = time.perf_counter()
    measured_from = begin + (options["warmup"] if options["duration"] else 0.0)
    deadline = measured_from + (options["duration"] or 0.0)
    readings: list[Snapshot] = []
    edge = threading.Lock()

    def warm_edge(finished: int, now: float) -> None:
        if stats is not None and not readings and finished >= warm and now >= measured_from:
            with edge:
                if not readings:
                    readings.append(stats())

    warm_edge(0, begin)

    def done(records: list[StreamRecord]) -> bool:
        now = time.perf_counter()
        warm_edge(len(records), now)
        if count is not None:
            report(len(records) / (warm + count), len(records))
            return len(records) >= warm + count
        report((now - begin) / max(deadline - begin, 1e-9), len(records))
        return now >= deadline

    concurrency = int(level) if load == "concurrency" else None
    schedule = None
    if concurrency is None:
        intervals = _intervals(options)
        distribution = "constant" if intervals else options["request_distribution"]
        schedule = Schedule(distribution, level, begin, intervals)
    cpu = time.process_time()
    records, wall = _drive(stream, concurrency, schedule, options["max_threads"], done)
    cpu = time.process_time() - cpu
    client = {
        "client_cpu_per_request": {"unit": "us", "avg": cpu / max(len(records), 1) * 1e6},
        "client_busy": {"unit": "%", "avg": cpu / wall * 100 if wall > 0 else float("nan")},
    }
    if stats is not None:
        readings[1:] = [stats()]
    measured = [r for r in records[warm:] if r.start >= measured_from]
    if count is not None:
        measured = measured[:count]
    span = max(r.end for r in measured) - min(r.start for r in measured) if measured else 0.0
    return measured, span, client, tuple(readings) if len(readings) == 2 else (None, None)


def _setup(settings: Settings, client: Any, model: str, options: dict[str, Any]) -> _Stream:
    from ._bench_prompts import make_prompts, parse_extra_inputs, token_counter
    from ._infer import fetch_model_io

    version = options["model_version"]
    io = fetch_model_io(client, settings, model, version)
    config = client.get_model_config(model, version, headers=settings.request_headers)
    decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled"))
    prompt_input = options["prompt_input"]
    if prompt_input is None:
        texts = [n for n, s in io.inputs.items() if s.datatype == "BYTES"]
        prompt_input = (
            "text_input" if "text_input" in io.inputs else (texts[0] if len(texts) == 1 else None)
        )
        if prompt_input is None:
            raise InputError(
                f"model '{model}': name the prompt's input with --prompt-input "
                f"(inputs: {', '.join(io.inputs)})"
            )
    io.input(prompt_input)
    return _Stream(
        client,
        settings,
        model,
        version,
        decoupled,
        prompt_input,
        options["output_field"],
        options["output_field"] not in io.outputs,
        options["output_tokens_param"],
        parse_extra_inputs(options["extra_inputs"]),
        token_counter(options["tokenizer"]),
        make_prompts(options),
    )


def _pa_result(
    load: str, level: float, records: list[StreamRecord], span: float, readings: Any
) -> LevelResult:
    """A level as perf_analyzer's ``-f`` CSV sees it: every request's latency to its
    last response, its responses, no client send or receive (perf_analyzer times
    neither for a streamed model), the server's figures between the readings."""
    from ._bench_measure import LevelResult, server_delta

    ok = sorted(r.end - r.start for r in records if r.error is None)
    errors = [r.error for r in records if r.error is not None]
    return LevelResult(
        load,
        level,
        len(ok),
        len(errors),
        span,
        ok,
        first_error=errors[0] if errors else None,
        server=server_delta(*readings),
        readings=readings,
        responses=sum(r.responses for r in records if r.error is None),
    )


def run_streaming(settings: Settings, model: str, options: dict[str, Any]) -> None:
    """The whole ``--streaming`` run: every level, then the outputs (with ``-f``,
    perf_analyzer's CSV of the levels too)."""
    from ._bench_measure import composing_deltas
    from ._bench_progress import progress_bar
    from ._bench_prompts import parse_goodput
    from ._bench_report import csv_text
    from ._bench_run import (
        _level_name,
        _plan,
        interrupted_note,
        model_facts,
        report_interrupted,
        server_stats,
    )

    goodput = parse_goodput(options["goodput"])
    plan = _plan(options)
    pool = int(max(plan.levels)) if plan.load == "concurrency" else plan.max_threads
    results = []
    measured: list[LevelResult] = []
    current: str | None = None  # the level being measured
    interrupted = False
    with settings.client(concurrency=pool) as client:
        stream = _setup(settings, client, model, options)
        first = stream.one()
        if first.error is not None:
            raise CliError(first.error)
        headers = settings.request_headers
        facts = model_facts(client, model, stream.version, headers)
        stats = None
        if options["report_path"]:
            stats = server_stats(client, model, stream.version, headers, facts.steps)
        with progress_bar(settings, options["progress_interval"]) as start:
            try:
                for level in plan.levels:
                    current = _level_name(plan.load, level)
                    name = (
                        f"concurrency {int(level)}"
                        if plan.load == "concurrency"
                        else f"{level:g}/s"
                    )
                    records, span, cost, readings = _level(
                        stream, plan.load, level, options, start(name), stats
                    )
                    metrics = compute_metrics(records, span, goodput)
                    if options["verbose"]:  # the client's own cost: is it the limit?
                        metrics.update(cost)
                    result = _pa_result(plan.load, level, records, span, readings)
                    result.composing = composing_deltas(
                        readings[0], readings[1], facts.steps, model
                    )
                    measured.append(result)
                    results.append((level, records, metrics))
                    current = None
            except KeyboardInterrupt:
                interrupted = True
    from ._bench_stream_report import write_stream_outputs

    def write() -> None:
        table = None
        if options["report_path"]:
            table = csv_text(
                measured, False, False, None, cache=facts.cache, decoupled=stream.decoupled
            )
        write_stream_outputs(
            settings, model, plan.load, results, options, table, measured, facts.cache
        )

    if not interrupted:
        write()
        return
    interrupted_note(current, len(results))
    if not results:
        raise KeyboardInterrupt
    report_interrupted(write)
