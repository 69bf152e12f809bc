"""``bench`` measurement and report rules without a server: perf_analyzer's stability
rule, percentiles, the server-side breakdown, schedules, genai-perf's metrics and
statistics, ``--goodput``, prompts, and the exact CSV layouts."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from pathlib import Path

import pytest
from tritonhttp_cli._bench_load import Schedule
from tritonhttp_cli._bench_measure import LevelResult, percentile, server_delta, stable
from tritonhttp_cli._bench_outputs import export_csv_text
from tritonhttp_cli._bench_prompts import (
    make_prompts,
    parse_extra_inputs,
    parse_goodput,
    token_counter,
)
from tritonhttp_cli._bench_report import csv_text, level_text, profile_record
from tritonhttp_cli._bench_stats import STATS, interpolated, summary
from tritonhttp_cli._bench_stream import StreamRecord, compute_metrics
from tritonhttp_cli._errors import InputError

PA_HEADER = (
    "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,"
    "Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,"
    "p50 latency,p90 latency,p95 latency,p99 latency"
)


def test_stability_rule_three_windows_within_the_percentage() -> None:
    assert not stable([(100, 10), (100, 10)], 0.1)  # fewer than three windows
    assert stable([(50, 99), (100, 10), (105, 10.5), (109, 10.9)], 0.1)
    assert not stable([(100, 10), (105, 10.5), (111, 10.9)], 0.1)  # throughput 11 % apart
    assert not stable([(100, 10), (105, 10.5), (109, 11.1)], 0.1)  # latency 11 % apart
    assert not stable([(0, 10), (0, 10), (0, 10)], 0.1)  # nothing finished
    assert not stable([(100, math.inf), (100, 10), (100, 10)], 0.1)
    assert stable([(100, 10), (125, 12.5), (110, 11)], 0.25)


def test_nearest_rank_percentile() -> None:
    values = [float(v) for v in range(1, 101)]
    assert [percentile(values, q) for q in (50, 90, 99, 100)] == [50, 90, 99, 100]
    assert percentile([7.0], 99) == 7 and math.isnan(percentile([], 50))


def test_server_delta_is_the_difference_per_request() -> None:
    before = (
        10,
        10,
        {
            k: (10, 10_000)
            for k in ("success", "queue", "compute_input", "compute_infer", "compute_output")
        },
    )
    after = (
        30,
        25,
        {
            "success": (30, 10_000 + 20 * 900_000),
            "queue": (30, 10_000 + 20 * 50_000),
            "compute_input": (30, 10_000 + 20 * 10_000),
            "compute_infer": (30, 10_000 + 20 * 800_000),
            "compute_output": (30, 10_000 + 20 * 5_000),
        },
    )
    delta = server_delta(before, after)
    assert delta is not None
    assert (delta["inference_count"], delta["execution_count"], delta["success_count"]) == (
        20,
        15,
        20,
    )
    assert (delta["request"], delta["queue"], delta["compute_infer"]) == (900, 50, 800)
    assert delta["overhead"] == pytest.approx(900 - 50 - 10 - 800 - 5)
    assert server_delta(None, after) is None


def test_schedules() -> None:
    constant = Schedule("constant", 100, 5.0)
    assert [round(constant.next(), 6) for _ in range(3)] == [5.0, 5.01, 5.02]
    poisson = Schedule("poisson", 1000, 0.0)
    times = [poisson.next() for _ in range(4000)]
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    assert all(g >= 0 for g in gaps) and statistics.fmean(gaps) == pytest.approx(0.001, rel=0.1)
    assert statistics.pstdev(gaps) == pytest.approx(0.001, rel=0.15)  # exponential: sd = mean
    custom = Schedule("constant", 1, 0.0, [0.001, 0.003])
    assert [round(custom.next(), 6) for _ in range(4)] == [0.001, 0.004, 0.005, 0.008]


def test_genai_perf_statistics() -> None:
    values = [float(v) for v in range(1, 11)]
    stats = summary(values)
    assert tuple(stats) == STATS
    assert (stats["avg"], stats["min"], stats["max"]) == (5.5, 1, 10)
    assert stats["p50"] == 5.5 and stats["p90"] == pytest.approx(9.1)
    assert stats["std"] == pytest.approx(statistics.pstdev(values))
    assert interpolated([1.0, 2.0], 75) == 1.75
    assert all(math.isnan(v) for v in summary([]).values())


def stream_record(start: float, times: list[float], end: float, inputs: int = 5) -> StreamRecord:
    return StreamRecord(start, [(t, 1) for t in times], end, inputs)


def test_streaming_metrics_from_known_times() -> None:
    # Two requests: tokens at +0.1, +0.13, +0.16 s and at +0.2, +0.25 s.
    records = [
        stream_record(0.0, [0.1, 0.13, 0.16], 0.17),
        stream_record(1.0, [1.2, 1.25], 1.3),
        StreamRecord(2.0, [], 2.1, error="boom"),
    ]
    metrics = compute_metrics(records, 2.0, {"time_to_first_token": 150})
    assert metrics["time_to_first_token"]["avg"] == pytest.approx(150)
    assert metrics["time_to_first_token"]["unit"] == "ms"
    assert metrics["time_to_second_token"]["min"] == pytest.approx(30)
    assert metrics["inter_token_latency"]["min"] == pytest.approx(30)
    assert metrics["inter_token_latency"]["max"] == pytest.approx(50)
    assert metrics["request_latency"]["max"] == pytest.approx(300)
    assert metrics["output_sequence_length"]["avg"] == 2.5
    assert metrics["input_sequence_length"]["unit"] == "tokens"
    assert metrics["output_token_throughput_per_user"]["max"] == pytest.approx(1000 / 30)
    assert metrics["output_token_throughput"] == {"unit": "tokens/sec", "avg": 2.5}
    assert metrics["request_throughput"]["avg"] == 1.0
    assert metrics["request_goodput"]["avg"] == 0.5  # only the first has TTFT <= 150 ms


def test_goodput_extra_inputs_and_tokenizer_options() -> None:
    assert parse_goodput("time_to_first_token:75 inter_token_latency:20") == {
        "time_to_first_token": 75,
        "inter_token_latency": 20,
    }
    for bad, words in (
        ("ttft:5", "unknown metric"),
        ("request_latency:x", "positive"),
        ("request_latency", "positive"),
    ):
        with pytest.raises(InputError, match=words):
            parse_goodput(bad)
    assert parse_extra_inputs(("gap_ms:5", "mode:fast", "flags:[1,2]")) == {
        "gap_ms": 5,
        "mode": "fast",
        "flags": [1, 2],
    }
    with pytest.raises(InputError, match="NAME:VALUE"):
        parse_extra_inputs(("nocolon",))
    assert token_counter(None) is None
    with pytest.raises(InputError, match="transformers"):
        token_counter("gpt2")  # the extra is not installed here: a clear error, no download


def options(**given: object) -> dict[str, object]:
    base: dict[str, object] = {
        "input_file": None,
        "synthetic_input_tokens_mean": 6,
        "synthetic_input_tokens_stddev": 0.0,
        "num_prompts": 4,
        "output_tokens_mean": None,
        "output_tokens_stddev": 0.0,
    }
    return {**base, **given}


def test_prompts_synthetic_and_from_a_file(tmp_path: Path) -> None:
    prompts = make_prompts(options(output_tokens_mean=7))
    assert len(prompts) == 4 and all(len(p.text.split()) == 6 for p in prompts)
    assert {p.output_tokens for p in prompts} == {7}
    spread = make_prompts(options(synthetic_input_tokens_stddev=3.0, num_prompts=50))
    assert len({len(p.text.split()) for p in spread}) > 3
    path = tmp_path / "in.jsonl"
    path.write_text('{"text": "a b"}\n\n{"text_input": "c"}\n')
    assert [p.text for p in make_prompts(options(input_file=str(path)))] == ["a b", "c"]
    path.write_text('{"other": 1}\n')
    with pytest.raises(InputError, match=":1: expected"):
        make_prompts(options(input_file=str(path)))


def level(latencies: list[float], load: str = "concurrency", value: float = 2) -> LevelResult:
    return LevelResult(
        load,
        value,
        len(latencies),
        0,
        2.0,
        sorted(latencies),
        server={
            "inference_count": 4,
            "execution_count": 4,
            "success_count": 4,
            "request": 900,
            "queue": 50,
            "compute_input": 10,
            "compute_infer": 800,
            "compute_output": 5,
            "overhead": 35,
        },
        client={
            "send_us": 20,
            "wait_us": 970,
            "recv_us": 10,
            "cpu_per_request_us": 30,
            "busy_pct": 3,
        },
    )


def test_perf_analyzer_csv_layout() -> None:
    results = [level([0.001] * 4, value=2), level([0.002] * 2, value=1)]
    rows = list(csv.reader(io.StringIO(csv_text(results, False, False))))
    assert ",".join(rows[0]) == PA_HEADER
    assert [r[0] for r in rows[1:]] == ["1", "2"]  # by increasing throughput
    assert rows[2][1:9] == ["2", "20", "105", "50", "10", "800", "5", "10"]
    verbose = next(csv.reader(io.StringIO(csv_text(results, True, True))))
    assert verbose[13:16] == ["Avg latency", "request/response", "response wait"]
    assert verbose[16:] == [
        "Avg GPU Utilization",
        "Avg GPU Power Usage",
        "Max GPU Memory Usage",
        "Total GPU Memory",
    ]
    rate = csv_text([level([0.001], "request_rate", 50.0)], False, False)
    assert rate.startswith("Request Rate,Inferences/Second,")


def test_level_text_as_perf_analyzer_prints_it() -> None:
    text = level_text(level([0.001] * 4), None, True)
    assert text.splitlines()[:3] == ["Request concurrency: 2", "  Client: ", "    Request count: 4"]
    assert "    Avg client overhead: 3.00% (30 usec CPU per request)" in text
    assert (
        "    Avg HTTP time: 1000 usec (send 20 usec + response wait 970 usec + receive 10 usec)"
        in text
    )
    assert (
        "    Avg request latency: 900 usec (overhead 35 usec + queue 50 usec + compute input "
        "10 usec + compute infer 800 usec + compute output 5 usec)"
    ) in text
    quiet = level_text(level([0.001] * 4), 95, False)
    assert "Avg latency" not in quiet and "p95 latency: 1000 usec" in quiet
    assert "send/recv 30 usec + response wait 970 usec" in quiet


def test_profile_export_record_and_csv() -> None:
    record = profile_record(level([0.001, 0.003]))
    assert record["request_latency"]["unit"] == "ms"
    assert record["request_latency"]["avg"] == pytest.approx(2.0)
    assert set(STATS) <= set(record["request_latency"])
    assert record["server_compute_infer"] == {"unit": "us", "avg": 800}
    text = export_csv_text([{"concurrency": 2, "metrics": record}], "concurrency")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["concurrency", "metric", "unit", *STATS]
    assert ["2", "request_latency", "ms", "2"] in [r[:4] for r in rows]
    json.dumps(record)  # plain JSON values
