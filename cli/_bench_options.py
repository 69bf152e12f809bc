"""The options of ``bench``, grouped as perf_analyzer and genai-perf group them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ._types import FiniteFloatRange

__all__ = [
    "export_options",
    "input_options",
    "load_options",
    "measurement_options",
    "streaming_options",
]

Decorator = Callable[[Any], Any]


def _apply(options: list[Decorator]) -> Decorator:
    def wrap(function: Any) -> Any:
        for option in reversed(options):
            function = option(function)
        return function

    return wrap


load_options = _apply(
    [
        click.option(
            "--concurrency",
            "--concurrency-range",
            "-c",
            "concurrency",
            metavar="LIST",
            help="Closed loop: requests kept in flight, e.g. 1,2,4 or START:END[:STEP] "
            "(default 1).",
        ),
        click.option(
            "--request-rate",
            "--request-rate-range",
            "-r",
            "request_rate",
            metavar="LIST",
            help="Open loop: requests per second, e.g. 100,200 or START:END[:STEP].",
        ),
        click.option(
            "--request-distribution",
            type=click.Choice(["constant", "poisson"]),
            default="constant",
            show_default=True,
            help="Open loop: time between requests, fixed or exponential.",
        ),
        click.option(
            "--request-intervals",
            type=click.Path(dir_okay=False),
            metavar="FILE",
            help="Open loop: the gaps between requests, in microseconds, one a line (cycled).",
        ),
        click.option(
            "--binary-search",
            is_flag=True,
            help="Search START:END of -c/-r for the highest level within -l.",
        ),
        click.option(
            "--latency-threshold",
            "-l",
            type=FiniteFloatRange(min=0),
            metavar="MS",
            help="Stop the sweep at a level whose latency reaches MS (0: no limit).",
        ),
        click.option(
            "--mode",
            type=click.Choice(["loop", "sync", "async"]),
            default="loop",
            show_default=True,
            help="loop: one thread, N connections, body encoded once (falls back to sync "
            "when requests differ); sync: a thread and connection per request in "
            "flight, client times measured; async: async_infer.",
        ),
        click.option(
            "--max-threads",
            type=click.IntRange(min=1),
            default=16,
            show_default=True,
            help="Open loop: most requests in flight.",
        ),
    ]
)

measurement_options = _apply(
    [
        click.option(
            "--measurement-interval",
            "-p",
            type=click.IntRange(min=1),
            default=5000,
            show_default=True,
            metavar="MS",
            help="Length of a time window.",
        ),
        click.option(
            "--measurement-mode",
            type=click.Choice(["time_windows", "count_windows"]),
            default="time_windows",
            show_default=True,
            help="Windows of time or of requests.",
        ),
        click.option(
            "--measurement-request-count",
            type=click.IntRange(min=1),
            default=50,
            show_default=True,
            help="Requests in a count window.",
        ),
        click.option(
            "--stability-percentage",
            "-s",
            type=FiniteFloatRange(min=0),
            default=10.0,
            show_default=True,
            help="Three windows agreeing within this percentage are stable.",
        ),
        click.option(
            "--max-trials",
            type=click.IntRange(min=1),
            default=10,
            show_default=True,
            help="Windows tried per level before giving up.",
        ),
        click.option(
            "--percentile",
            type=click.IntRange(1, 99),
            metavar="Q",
            help="Stabilise on (and -l compares) the Q-th percentile, not the average.",
        ),
        click.option(
            "--duration",
            "-d",
            type=FiniteFloatRange(min=0, min_open=True),
            metavar="SECONDS",
            help="One window of SECONDS per level (no stability runs).",
        ),
        click.option(
            "--requests",
            "--request-count",
            "-n",
            "request_count",
            type=click.IntRange(min=1),
            help="One window of N requests per level (no stability runs).",
        ),
        click.option(
            "--warmup",
            type=FiniteFloatRange(min=0),
            default=0.5,
            show_default=True,
            metavar="SECONDS",
            help="Unmeasured load before each level.",
        ),
        click.option(
            "--warmup-request-count",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="Unmeasured requests before each level.",
        ),
    ]
)

input_options = _apply(
    [
        click.option(
            "--input-data",
            "input_data",
            multiple=True,
            metavar="zero|random|PATH",
            help="Data of the requests: zero, random, a directory of raw files or a "
            "perf_analyzer JSON file (repeatable).",
        ),
        click.option(
            "--input",
            "-i",
            "inputs",
            multiple=True,
            metavar="NAME=VALUE",
            help="A fixed value for one input, as for infer (repeatable).",
        ),
        click.option(
            "--datatype",
            "datatypes",
            multiple=True,
            metavar="NAME=TYPE",
            help="Datatype of an --input value.",
        ),
        click.option(
            "--shape",
            "shapes",
            multiple=True,
            metavar="NAME:D1,D2",
            help="Dims of a variable-size input, without the batch dimension.",
        ),
        click.option(
            "--batch-size",
            "-b",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Batch size of each request (models that batch).",
        ),
        click.option(
            "--string-length",
            type=click.IntRange(min=1),
            default=128,
            show_default=True,
            help="Length of generated BYTES elements.",
        ),
        click.option(
            "--string-data", metavar="TEXT", help="The value of generated BYTES elements."
        ),
        click.option(
            "--shared-memory",
            type=click.Choice(["none", "system", "cuda"]),
            default="none",
            show_default=True,
            help="Pass tensors through shared memory.",
        ),
        click.option(
            "--output-shared-memory-size",
            type=click.IntRange(min=0),
            default=102400,
            show_default=True,
            metavar="BYTES",
            help="Bytes reserved for each output in shared memory (0: outputs over HTTP).",
        ),
        click.option(
            "--device-id",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="GPU of --shared-memory cuda.",
        ),
        click.option(
            "--sequence-length",
            type=click.IntRange(min=1),
            default=20,
            show_default=True,
            help="Requests per sequence (sequence models).",
        ),
        click.option(
            "--sequence-id-range",
            metavar="START[:END]",
            help="Sequence ids to use (sequence models).",
        ),
        click.option(
            "--serial-sequences",
            is_flag=True,
            help="At most one request in flight per sequence (always so here).",
        ),
        click.option("--model-version", default="", metavar="VERSION", help="Model version."),
        click.option(
            "--binary/--no-binary",
            default=True,
            show_default=True,
            help="Tensors as binary data (or inside the JSON).",
        ),
    ]
)

export_options = _apply(
    [
        click.option(
            "--latency-report-file",
            "--csv",
            "-f",
            "report_path",
            metavar="FILE",
            help="perf_analyzer's CSV of the results (- for stdout).",
        ),
        click.option(
            "--verbose-csv",
            is_flag=True,
            help="Add average latency, request/response and response wait to -f.",
        ),
        click.option(
            "--profile-export-file",
            "export_path",
            metavar="PATH.json",
            help="Settings and every metric per level as JSON, and a CSV beside it.",
        ),
        click.option(
            "--plot",
            "plot_path",
            type=click.Path(dir_okay=False),
            metavar="FILE.png",
            help="Plot latency against throughput (streaming: TTFT and ITL too).",
        ),
        click.option(
            "--collect-metrics",
            is_flag=True,
            help="Sample the server's /metrics during each level.",
        ),
        click.option(
            "--metrics-url",
            metavar="URL",
            help="Where the metrics are (default: the server's host, port 8002).",
        ),
        click.option(
            "--metrics-interval",
            type=click.IntRange(min=1),
            default=1000,
            show_default=True,
            metavar="MS",
            help="How often --collect-metrics samples.",
        ),
        click.option(
            "--progress-interval",
            type=FiniteFloatRange(min=0, min_open=True),
            default=10.0,
            show_default=True,
            metavar="SECONDS",
            help="When stderr is not a terminal: a progress line this often.",
        ),
        click.option(
            "--verbose",
            "-v",
            "verbose",
            is_flag=True,
            help="Each window, and the client's own overhead per request.",
        ),
    ]
)

streaming_options = _apply(
    [
        click.option(
            "--streaming",
            is_flag=True,
            help="LLM mode: genai-perf's metrics through generate_stream.",
        ),
        click.option(
            "--prompt-input",
            metavar="NAME",
            help="Streaming: the input that takes the prompt (default: text_input, or "
            "the model's only BYTES input).",
        ),
        click.option(
            "--output-field",
            default="text_output",
            show_default=True,
            metavar="NAME",
            help="Streaming: the output holding the generated text.",
        ),
        click.option(
            "--input-file",
            type=click.Path(dir_okay=False),
            metavar="FILE.jsonl",
            help='Streaming: prompts, one JSON object a line ({"text": ...}).',
        ),
        click.option(
            "--num-prompts",
            type=click.IntRange(min=1),
            default=100,
            show_default=True,
            help="Streaming: synthetic prompts to make.",
        ),
        click.option(
            "--synthetic-input-tokens-mean",
            type=click.IntRange(min=1),
            default=550,
            show_default=True,
            help="Streaming: words per synthetic prompt.",
        ),
        click.option(
            "--synthetic-input-tokens-stddev",
            type=FiniteFloatRange(min=0),
            default=0.0,
            show_default=True,
            help="Streaming: spread of the prompt lengths.",
        ),
        click.option(
            "--output-tokens-mean",
            type=click.IntRange(min=1),
            help="Streaming: tokens to ask for, sent as --output-tokens-param.",
        ),
        click.option(
            "--output-tokens-stddev",
            type=FiniteFloatRange(min=0),
            default=0.0,
            show_default=True,
            help="Streaming: spread of the tokens asked for.",
        ),
        click.option(
            "--output-tokens-param",
            default="max_tokens",
            show_default=True,
            metavar="NAME",
            help="Streaming: the request parameter that takes it.",
        ),
        click.option(
            "--extra-inputs",
            multiple=True,
            metavar="NAME:VALUE",
            help="Streaming: a parameter sent with every request (repeatable).",
        ),
        click.option(
            "--tokenizer",
            metavar="NAME",
            help="Streaming: count tokens with this Hugging Face tokenizer (needs "
            "transformers) instead of one token per response.",
        ),
        click.option(
            "--goodput",
            metavar='"METRIC:MS ..."',
            help='Streaming: e.g. "time_to_first_token:75 inter_token_latency:20".',
        ),
    ]
)
