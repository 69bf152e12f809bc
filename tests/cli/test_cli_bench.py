"""``triton-cli bench`` against real Triton and the bundled server (tests/models): every
way of sending, both loads, the perf_analyzer report, the table at 80 and 60 columns,
progress lines, failures."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import time
from pathlib import Path

import pytest
from cli_helpers import SCRIPT, Run, run_script
from conftest import Invoke, RunCli, Server


def levels_of(output: str) -> list[dict]:
    report = json.loads(output)
    return report["levels"]


@pytest.mark.parametrize("mode", ["loop", "sync", "async"])
def test_concurrency_sweep(invoke: Invoke, mode: str) -> None:
    result = invoke(
        "bench", "add_sub", "-c", "1,3", "-n", "40", "--warmup", "0.1", "--mode", mode, "--json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["mode"], report["load"], report["batch_size"]) == (mode, "concurrency", 1)
    assert [level["level"] for level in report["levels"]] == [1, 3]
    for level in report["levels"]:
        assert (level["requests"], level["errors"]) == (40, 0)
        latency = level["latency_ms"]
        assert 0 < latency["min"] <= latency["p50"] <= latency["p90"] <= latency["p95"]
        assert latency["p95"] <= latency["p99"] <= latency["max"]
        assert level["throughput"]["requests_per_s"] > 0
        assert level["server_us"]["compute_infer"] > 0
        # The server counted the requests the client measured, give or take those in
        # flight at the window's start (finished on the server before it, on the client
        # after it).
        assert level["server_us"]["success_count"] >= 40 - level["level"]


def test_sync_mode_times_the_client(invoke: Invoke) -> None:
    """sync mode splits each request in send / response wait / receive (perf_analyzer's
    client columns): each is positive and together they are within the latency."""
    result = invoke("bench", "add_sub", "-n", "50", "--warmup", "0", "--mode", "sync", "--json")
    (level,) = levels_of(result.output)
    client = level["client_us"]
    assert client["send_us"] > 0 and client["wait_us"] > 0 and client["recv_us"] > 0
    total = client["send_us"] + client["wait_us"] + client["recv_us"]
    assert total <= level["latency_ms"]["avg"] * 1000 * 1.01
    assert client["cpu_per_request_us"] > 0


@pytest.mark.parametrize("mode", ["loop", "sync", "async"])
def test_request_rate(invoke: Invoke, mode: str) -> None:
    result = invoke(
        "bench", "add_sub", "-r", "200", "-d", "1", "--warmup", "0.2", "--mode", mode, "--json"
    )
    assert result.exit_code == 0, result.output
    (level,) = levels_of(result.output)
    assert level["level"] == 200 and level["errors"] == 0
    # An open loop sends on schedule: 200 requests a second of the window it measured.
    # A sender that fell behind catches up (its late requests, counted as delayed, may
    # crowd a window); the requests sent on time never outnumber the schedule, and with
    # none late the window holds the schedule.
    scheduled = 200 * level["window_s"]
    assert level["window_s"] >= 1.0  # (-d 1)
    assert level["requests"] - level["delayed_requests"] <= 1.1 * scheduled + 2
    if level["delayed_requests"] == 0:
        assert level["requests"] >= 0.9 * scheduled - 2
    assert level["throughput"]["requests_per_s"] == pytest.approx(
        level["requests"] / level["window_s"], rel=0.01
    )


def test_batching_model_and_given_inputs(invoke: Invoke) -> None:
    result = invoke("bench", "simple", "-b", "4", "-n", "20", "--warmup", "0", "--json")
    report = json.loads(result.output)
    assert report["batch_size"] == 4
    level = report["levels"][0]
    assert level["throughput"]["inferences_per_s"] == pytest.approx(
        4 * level["throughput"]["requests_per_s"]
    )
    # The server saw batches of 4: four inferences per request.
    assert level["server_us"]["inference_count"] >= 4 * (20 - 1)  # (one may be in flight)
    given = invoke("bench", "identity_bytes", "-i", 'INPUT0=["x"]', "-n", "10", "--json")
    assert levels_of(given.output)[0]["requests"] == 10


def test_perf_analyzer_report(run_cli: RunCli) -> None:
    done = run_cli("bench", "add_sub", "-c", "1,2", "-n", "30", "--warmup", "0", "-v")
    assert done.code == 0, done.stderr
    out = done.stdout
    for line in (
        "Request concurrency: 1",
        "Request concurrency: 2",
        "  Client: ",
        "    Request count: 30",
        "  Server: ",
        "    Successful request count: ",
        "    Avg client overhead: ",
        "  Pass [1] throughput: ",
    ):
        assert line in out, out
    assert "Avg request latency: " in out and "(overhead " in out and "compute infer " in out
    assert "p99 latency: " in out and "Throughput: " in out


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "│" in line or "┃" in line]


@pytest.mark.parametrize("columns", [80, 60])
def test_table_fits_the_terminal(triton: Server, columns: int) -> None:
    """In a terminal of 80 (and 60) columns every table line fits and no number is
    split: each row keeps one line, its level first."""
    env = {**os.environ, "COLUMNS": str(columns), "FORCE_COLOR": "1", "NO_COLOR": "1"}
    done = run_script(
        ["--url", triton.url, "bench", "add_sub", "-c", "1,16", "-n", "40", "--warmup", "0"],
        env=env,
    )
    assert done.code == 0, done.stderr
    lines = _table_lines(re.sub(r"\x1b\[[0-9;]*m", "", done.stdout))
    assert len(lines) == 3, done.stdout  # header + two rows, none wrapped
    assert all(len(line) <= columns for line in lines)
    assert [line.split("│")[0].strip() for line in lines[1:]] == ["1", "16"]
    assert "p50" in lines[0] and "infer/s" in lines[0]


def test_progress_lines_when_not_a_terminal(run_cli: RunCli) -> None:
    done = run_cli("bench", "add_sub", "-d", "1.5", "--warmup", "0", "--progress-interval", "0.4")
    assert done.code == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("bench: ")]
    assert len(progress) >= 2, done.stderr
    assert "concurrency 1" in progress[0] and "requests" in progress[0]


def test_failures(run_cli: RunCli, invoke: Invoke) -> None:
    # The first request fails: nothing is generated, one line says why.
    bad = run_cli("bench", "error_model", "-i", "MODE=0", "-d", "10")
    assert bad.code == 1 and bad.stderr.strip() == ("Error: intentional internal error (HTTP 500)")
    start = time.monotonic()
    unknown = run_cli("bench", "nope")
    baseline = time.monotonic() - start  # a run that fails at its first answer
    assert unknown.code == 1 and "unknown model" in unknown.stderr
    # A server that does not answer in --timeout fails the bench at once...
    start = time.monotonic()
    slow = run_cli("--timeout", "0.3", "bench", "slow_model", "-i", "DELAY_MS=2000")
    assert slow.code == 1 and "timed out" in slow.stderr.lower()
    # ...before the model's 2 s answer could have come
    assert time.monotonic() - start < baseline + 2.0


def test_usage_errors_before_any_request() -> None:
    def run(*args: str) -> Run:
        return run_script(["--url", "127.0.0.1:9", "bench", "m", *args])

    for args, words in (
        (("-c", "1", "-r", "5"), "not both"),
        (("-d", "1", "-n", "5"), "not both"),
        (("--binary-search", "-c", "1:4"), "--latency-threshold"),
        (("-f", "-", "--json"), "stdout"),
        (("--streaming", "--shared-memory", "system"), "shared memory"),
        (("-c", "0"), "positive"),
        (("--measurement-mode", "hours"), "hours"),
    ):
        done = run(*args)
        assert done.code == 2 and words in done.stderr, (args, done.stderr)
    assert SCRIPT.exists()


def test_stable_windows_and_percentile(invoke: Invoke) -> None:
    """Without -n/-d a level runs windows until three agree within -s percent; the
    result merges those three."""
    result = invoke(
        "bench",
        "add_sub",
        "-p",
        "150",
        "-s",
        "100",
        "--percentile",
        "90",
        "--warmup",
        "0",
        "--json",
    )
    assert result.exit_code == 0, result.output
    (level,) = levels_of(result.output)
    assert level["stable"] is True and level["windows"] == 3
    assert level["window_s"] >= 3 * 0.15
    counted = invoke(
        "bench",
        "add_sub",
        "--measurement-mode",
        "count_windows",
        "--measurement-request-count",
        "25",
        "-s",
        "100",
        "--warmup-request-count",
        "5",
        "--json",
    )
    (level,) = levels_of(counted.output)
    assert level["windows"] == 3 and level["requests"] >= 75


def test_unstable_level_stops_the_sweep(run_cli: RunCli) -> None:
    # -s 0 asks three windows to agree exactly: no level gets stable.
    done = run_cli(
        "bench", "add_sub", "-c", "1,2", "-p", "60", "-s", "0", "--max-trials", "3", "--warmup", "0"
    )
    assert done.code == 1
    assert (
        "Failed to obtain stable measurement within 3 measurement windows for concurrency 1"
    ) in done.stderr
    assert "Request concurrency: 2" not in done.stdout


def test_latency_threshold_and_binary_search(run_cli: RunCli, invoke: Invoke) -> None:
    # slow_model takes DELAY_MS per request on 2 instances: at concurrency 4 requests
    # queue, so the latency is at least twice the delay.
    over = run_cli(
        "bench",
        "slow_model",
        "-i",
        "DELAY_MS=40",
        "-c",
        "1,4,8",
        "-n",
        "8",
        "--warmup",
        "0",
        "-l",
        "60",
    )
    assert over.code == 0, over.stderr
    assert "went over the set limit of 60 msec at concurrency 4" in over.stderr
    assert "Request concurrency: 1" in over.stdout and "concurrency: 8" not in over.stdout
    search = invoke(
        "bench",
        "slow_model",
        "-i",
        "DELAY_MS=40",
        "-c",
        "1:8",
        "-n",
        "8",
        "--warmup",
        "0",
        "-l",
        "60",
        "--binary-search",
        "--json",
    )
    assert search.exit_code == 0, search.output
    measured = [level["level"] for level in levels_of(search.output)]
    # 1 and 8 first, then halves: 4, 2, 3 -- 2 instances keep c=2 under the limit.
    assert measured[:3] == [1, 8, 4] and 2 in measured and len(measured) <= 6


def test_poisson_and_request_intervals(invoke: Invoke, tmp_path: Path) -> None:
    poisson = invoke(
        "bench",
        "add_sub",
        "-r",
        "200",
        "--request-distribution",
        "poisson",
        "-d",
        "1",
        "--warmup",
        "0.2",
        "--json",
    )
    (level,) = levels_of(poisson.output)
    assert poisson.exit_code == 0 and 120 <= level["requests"] <= 280
    intervals = tmp_path / "intervals.txt"
    intervals.write_text("2000\n8000\n")  # 2 requests every 10 ms: 200/s on average
    custom = invoke(
        "bench",
        "add_sub",
        "--request-intervals",
        str(intervals),
        "-d",
        "1",
        "--warmup",
        "0.2",
        "--json",
    )
    (level,) = levels_of(custom.output)
    assert custom.exit_code == 0 and level["level"] == pytest.approx(200)
    assert 150 <= level["requests"] <= 260
    intervals.write_text("soon\n")
    bad = invoke("bench", "add_sub", "--request-intervals", str(intervals))
    assert bad.exit_code == 2 and "microseconds" in bad.output


def test_csv_export_and_plot(run_cli: RunCli, tmp_path: Path) -> None:
    report, export, plot = tmp_path / "perf.csv", tmp_path / "p.json", tmp_path / "p.png"
    done = run_cli(
        "bench",
        "add_sub",
        "-c",
        "1,2",
        "-n",
        "30",
        "--warmup",
        "0",
        "--mode",
        "sync",
        "-f",
        str(report),
        "--verbose-csv",
        "--profile-export-file",
        str(export),
        "--plot",
        str(plot),
    )
    assert done.code == 0, done.stderr
    rows = list(csv.reader(io.StringIO(report.read_text())))
    assert rows[0][:2] == ["Concurrency", "Inferences/Second"]
    assert rows[0][-3:] == ["Avg latency", "request/response", "response wait"]
    assert sorted(r[0] for r in rows[1:]) == ["1", "2"]
    for row in rows[1:]:
        values = dict(zip(rows[0], row, strict=True))
        assert int(values["Client Send"]) > 0 and int(values["Server Compute Infer"]) > 0
        assert int(values["p99 latency"]) >= int(values["p50 latency"]) > 0
    document = json.loads(export.read_text())
    assert document["settings"]["model"] == "add_sub"
    assert [e["concurrency"] for e in document["experiments"]] == [1, 2]
    latency = document["experiments"][0]["metrics"]["request_latency"]
    assert latency["unit"] == "ms" and latency["p99"] >= latency["p50"] > 0
    assert export.with_suffix(".csv").read_text().startswith("concurrency,metric,unit,avg")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    to_stdout = run_cli("bench", "add_sub", "-n", "10", "--warmup", "0", "-f", "-")
    assert to_stdout.stdout.splitlines()[0].startswith("Concurrency,Inferences/Second,")
    assert len(to_stdout.stdout.splitlines()) == 2


def test_collect_metrics(invoke: Invoke, triton: Server) -> None:
    result = invoke(
        "bench",
        "add_sub",
        "-n",
        "40",
        "--warmup",
        "0",
        "--collect-metrics",
        "--metrics-url",
        triton.metrics_url,
        "--metrics-interval",
        "50",
        "--json",
    )
    assert result.exit_code == 0, result.output
    (level,) = levels_of(result.output)
    metrics = level["metrics"]
    assert metrics["samples"] >= 2 and metrics["errors"] == []
    success = [
        v for k, v in metrics["counters"].items() if k.startswith("nv_inference_request_success")
    ]
    assert success and sum(success) >= 40


def test_system_shared_memory(invoke: Invoke) -> None:
    result = invoke(
        "bench",
        "simple",
        "-b",
        "2",
        "-n",
        "20",
        "--warmup",
        "0",
        "--shared-memory",
        "system",
        "--output-shared-memory-size",
        "128",
        "--json",
    )
    assert result.exit_code == 0, result.output
    (level,) = levels_of(result.output)
    assert (level["requests"], level["errors"]) == (20, 0)
    report = json.loads(result.output)
    assert report["mode"] == "sync"  # requests naming regions go through the sync driver


def test_cuda_shared_memory_without_a_gpu(run_cli: RunCli) -> None:
    import shutil

    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU is present: --shared-memory cuda can work here")
    done = run_cli("bench", "add_sub", "-n", "5", "--shared-memory", "cuda", "--device-id", "0")
    assert done.code == 2 and done.stderr.startswith("Error: --shared-memory cuda")
    assert "CUDA" in done.stderr and done.stderr.count("\n") == 1


def test_aliases_versions_json_bodies_and_datatypes(invoke: Invoke) -> None:
    ranged = invoke(
        "bench",
        "add_sub",
        "--concurrency-range",
        "1:2",
        "-n",
        "10",
        "--warmup",
        "0",
        "--model-version",
        "1",
        "--no-binary",
        "--json",
    )
    assert ranged.exit_code == 0, ranged.output
    report = json.loads(ranged.output)
    assert [lv["level"] for lv in report["levels"]] == [1, 2] and report["binary"] is False
    assert all(lv["errors"] == 0 for lv in report["levels"])
    rate = invoke(
        "bench", "add_sub", "--request-rate-range", "100", "-d", "0.5", "--warmup", "0", "--json"
    )
    assert [lv["level"] for lv in levels_of(rate.output)] == [100]
    typed = invoke(
        "bench",
        "identity_bytes",
        "-i",
        'INPUT0=["x","y"]',
        "--datatype",
        "INPUT0=BYTES",
        "-n",
        "5",
        "--json",
    )
    assert typed.exit_code == 0 and levels_of(typed.output)[0]["requests"] == 5
    missing = invoke("bench", "add_sub", "--model-version", "9", "-n", "1")
    assert missing.exit_code == 1


def test_late_requests_are_reported(run_cli: RunCli) -> None:
    """An open loop the client cannot keep (2 requests in flight, each 20 ms, 200 due per
    second) says so, as perf_analyzer does."""
    done = run_cli(
        "bench",
        "slow_model",
        "-i",
        "DELAY_MS=20",
        "-r",
        "200",
        "--max-threads",
        "2",
        "--mode",
        "sync",
        "-d",
        "1",
        "--warmup",
        "0",
    )
    assert done.code == 0, done.stderr
    assert "[WARNING]" in done.stdout and "sent late" in done.stdout


def test_streaming_one_piece_models_and_stream_options(invoke: Invoke) -> None:
    # text_echo is not decoupled: one answer through generate, one token.
    echo = invoke(
        "bench",
        "text_echo",
        "--streaming",
        "-n",
        "5",
        "--num-prompts",
        "3",
        "--prompt-input",
        "text_input",
        "--output-field",
        "text_output",
        "--json",
    )
    assert echo.exit_code == 0, echo.output
    (level,) = levels_of(echo.output)
    m = level["metrics"]
    assert level["requests"] == 5 and m["output_sequence_length"]["max"] == 1
    assert m["time_to_first_token"]["max"] <= m["request_latency"]["max"]
    # text_stream sends each word back `repeat` times over: 5 words, repeat 2 -> 10 tokens.
    repeated = invoke(
        "bench",
        "text_stream",
        "--streaming",
        "-c",
        "2",
        "-n",
        "4",
        "--synthetic-input-tokens-mean",
        "5",
        "--output-tokens-mean",
        "2",
        "--output-tokens-param",
        "repeat",
        "--json",
    )
    (level,) = levels_of(repeated.output)
    assert level["metrics"]["output_sequence_length"]["min"] == 10
    assert level["metrics"]["input_sequence_length"]["avg"] == 5
    spread = invoke(
        "bench",
        "text_stream",
        "--streaming",
        "-n",
        "12",
        "--synthetic-input-tokens-mean",
        "4",
        "--output-tokens-mean",
        "3",
        "--output-tokens-stddev",
        "2",
        "--output-tokens-param",
        "repeat",
        "--json",
    )
    lengths = levels_of(spread.output)[0]["metrics"]["output_sequence_length"]
    assert lengths["min"] < lengths["max"]  # the repeat asked for varies
    # Without the output field among the model's outputs, every response is a token.
    every = invoke(
        "bench",
        "text_stream",
        "--streaming",
        "-n",
        "2",
        "--output-field",
        "none",
        "--synthetic-input-tokens-mean",
        "3",
        "--json",
    )
    assert levels_of(every.output)[0]["metrics"]["output_sequence_length"]["min"] >= 3
    timed = invoke(
        "bench",
        "text_stream",
        "--streaming",
        "-d",
        "0.5",
        "--warmup",
        "0.1",
        "--synthetic-input-tokens-mean",
        "3",
        "-v",
        "--json",
    )
    (level,) = levels_of(timed.output)
    assert timed.exit_code == 0 and level["requests"] >= 1 and level["errors"] == 0
    # -v: the client's own CPU per request, and its busy share of the run.
    assert level["metrics"]["client_cpu_per_request"]["avg"] > 0
    assert level["metrics"]["client_busy"]["unit"] == "%"


def test_steps_round_robin_with_validation(run_cli: RunCli, tmp_path: Path) -> None:
    """Streams given to a model without sequences are steps sent in turn; each answer is
    checked against its step's validation_data (here the second step's is wrong)."""
    data = tmp_path / "steps.json"
    data.write_text(
        json.dumps(
            {
                "data": [
                    [{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}],
                    [{"INPUT0": [5, 6, 7, 8], "INPUT1": [1, 1, 1, 1]}],
                ],
                "validation_data": [[{"OUTPUT0": [2, 3, 4, 5]}], [{"OUTPUT0": [0, 0, 0, 0]}]],
            }
        )
    )
    done = run_cli("bench", "add_sub", "--input-data", str(data), "-n", "20", "--warmup", "0")
    assert done.code == 1
    assert "10 of 20 requests failed; first error: validation: output 'OUTPUT0'" in done.stderr
