"""``triton-cli bench`` against perf_analyzer: differences its users would notice.

Each test runs the installed script in a subprocess, against the bundled server (or
none, for usage errors found before any request). The facts come from perf_analyzer's
``report_writer.cc``, ``inference_profiler.cc`` and ``command_line_parser.cc``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import run_script

from tritonhttp.server import _launch as bundled

#: Nothing listens here: usage errors must come before any request.
NO_SERVER = ["--url", "127.0.0.1:9"]


def _bench(server: bundled.BundledServer, *args: str) -> list[str]:
    return ["--url", server.url, "bench", "add_sub", "-n", "20", "--warmup", "0", *args]


def _csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_csv_has_the_percentile_column_and_no_average_with_percentile(
    bundled_server: bundled.BundledServer,
) -> None:
    """perf_analyzer's -f with --percentile Q: a ``pQ latency`` column among p50..p99 (in
    order), and --verbose-csv leaves ``Avg latency`` out."""
    done = run_script(_bench(bundled_server, "--percentile", "85", "--verbose-csv", "-f", "-"))
    assert done.code == 0, done.stderr
    header, row = _csv(done.stdout)
    assert header[9:] == [
        "p50 latency",
        "p85 latency",
        "p90 latency",
        "p95 latency",
        "p99 latency",
        "request/response",
        "response wait",
    ]
    assert len(row) == len(header)
    p50, p85, p90 = (int(v) for v in row[9:12])
    assert p50 <= p85 <= p90
    # A percentile already reported adds no column; without --percentile, Avg latency.
    same = run_script(_bench(bundled_server, "--percentile", "90", "--verbose-csv", "-f", "-"))
    assert _csv(same.stdout)[0][9:] == [
        "p50 latency",
        "p90 latency",
        "p95 latency",
        "p99 latency",
        "request/response",
        "response wait",
    ]
    plain = run_script(_bench(bundled_server, "--verbose-csv", "-f", "-"))
    assert _csv(plain.stdout)[0][13:] == ["Avg latency", "request/response", "response wait"]


def test_gpu_columns_come_with_verbose_csv_and_metrics_are_printed_per_level(
    bundled_server: bundled.BundledServer,
) -> None:
    """perf_analyzer writes the four GPU columns of --collect-metrics only in the
    --verbose-csv layout, and prints a "Server Prometheus Metrics" block per level."""
    metrics = ["--collect-metrics", "--metrics-url", bundled_server.metrics_url]
    done = run_script(_bench(bundled_server, *metrics, "-f", "-"))
    assert done.code == 0, done.stderr
    header = _csv(done.stdout)[0]
    assert header[-1] == "p99 latency" and len(header) == 13
    verbose = run_script(_bench(bundled_server, *metrics, "--verbose-csv", "-f", "-"))
    assert _csv(verbose.stdout)[0][-4:] == [
        "Avg GPU Utilization",
        "Avg GPU Power Usage",
        "Max GPU Memory Usage",
        "Total GPU Memory",
    ]
    text = run_script(_bench(bundled_server, *metrics))
    assert text.code == 0, text.stderr
    lines = text.stdout.splitlines()
    start = lines.index("  Server Prometheus Metrics: ")
    titles = [line for line in lines[start + 1 :] if line.startswith("    Avg ")]
    assert titles[:2] == ["    Avg GPU Utilization:", "    Avg GPU Power Usage:"]
    assert "    Max GPU Memory Usage:" in lines and "    Total GPU Memory:" in lines


def test_latency_threshold_zero_is_no_limit(bundled_server: bundled.BundledServer) -> None:
    """perf_analyzer's -l 0 means no limit (its default); it was refused as out of range.
    With --binary-search it is still refused, as perf_analyzer refuses it."""
    done = run_script(_bench(bundled_server, "-c", "1:2", "-l", "0", "--json"))
    assert done.code == 0, done.stderr
    assert [level["level"] for level in done.json()["levels"]] == [1, 2]
    search = run_script([*NO_SERVER, "bench", "add_sub", "-c", "1:4", "-l", "0", "--binary-search"])
    assert search.code == 2
    assert "--binary-search needs -l/--latency-threshold above 0" in search.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # perf_analyzer: "Failed to parse --string-length. The value must be > 0"
        (["--string-length", "0"], "'--string-length': 0 is not in the range x>=1"),
        # perf_analyzer: "The dimensions of input tensor must be > 0."
        (["--shape", "IN:0,2"], "'IN:0,2': dims must be > 0"),
        # perf_analyzer: "Must specify --collect-metrics when using the --metrics-url option."
        (["--metrics-url", "127.0.0.1:8002"], "--metrics-url is read only with --collect-metrics"),
        (["--metrics-interval", "100"], "--metrics-interval is read only with --collect-metrics"),
        # perf_analyzer: "--request-count can not be less than concurrency"
        (["-c", "1,4", "-n", "3"], "-n/--request-count 3 is less than concurrency 4"),
    ],
)
def test_values_perf_analyzer_refuses_are_usage_errors(args: list[str], message: str) -> None:
    """Each was taken and ignored, or measured something else than asked (-n 3 at
    concurrency 4 never had 4 requests in flight)."""
    done = run_script([*NO_SERVER, "bench", "add_sub", *args])
    assert done.code == 2, done.stderr
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_dash_r_is_the_request_rate_not_max_trials(bundled_server: bundled.BundledServer) -> None:
    """A kept difference (docs/cli.md): perf_analyzer's -r is --max-trials; bench's -r is
    --request-rate-range, as its docs and help say. -n below the rate is taken (each
    level is one window of N requests), where perf_analyzer refuses it."""
    done = run_script(_bench(bundled_server, "-r", "50"))
    assert done.code == 0, done.stderr
    assert done.stdout.startswith("Request Rate: 50 inference requests per second\n")


def test_streaming_metrics_have_genai_perfs_percentiles(
    bundled_server_factory: Callable[..., bundled.BundledServer],
    model_repo: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    """genai-perf gives every request metric p1, p5, p10, p25, p50, p75, p90, p95 and p99
    (``genai_perf/metrics/statistics.py``); p1 to p25 were missing from --json and the
    profile export."""
    server = bundled_server_factory(model_repo("bench_models"))
    export = tmp_path / "profile.json"
    done = run_script(
        [
            "--url",
            server.url,
            "--json",
            "bench",
            "timed_stream",
            "--streaming",
            "-n",
            "4",
            "--num-prompts",
            "4",
            "--synthetic-input-tokens-mean",
            "4",
            "--output-tokens-mean",
            "3",
            "--extra-inputs",
            "first_ms:1",
            "--extra-inputs",
            "gap_ms:1",
            "--profile-export-file",
            str(export),
        ]
    )
    assert done.code == 0, done.stderr
    (level,) = done.json()["levels"]
    wanted = ["p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99"]
    for name in ("time_to_first_token", "inter_token_latency", "request_latency"):
        stats = level["metrics"][name]
        assert set(wanted) <= set(stats), (name, stats)
        values = [stats[p] for p in wanted]
        assert values == sorted(values) and stats["min"] <= values[0] <= values[-1] <= stats["max"]
    header = export.with_suffix(".csv").read_text().splitlines()[0].split(",")
    assert header[header.index("p1") : header.index("p99") + 1] == wanted
