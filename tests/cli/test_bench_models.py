"""``bench`` measures truly: models of known timing (tests/repos/bench_models) on real
Triton and on the bundled server. Bounds are lower bounds that follow from the model
(a 20 ms service time, a first token after D1, later tokens D2 apart) or relative ones;
never an absolute upper time bound. Also perf_analyzer input files, sequences and
validation end to end, and the streaming mode's outputs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import Run, run_script
from conftest import Server

import tritonhttp
from tritonhttp.utils import InferenceServerException

SERVICE_US = 20_000  # service_time sleeps 20 ms per execution
D1_MS, D2_MS, TOKENS = 60, 30, 4  # timed_stream's first wait, gap and responses


@pytest.fixture(
    scope="module",
    params=[pytest.param("real", marks=pytest.mark.real_triton), "bundled"],
)
def bench_server(request: pytest.FixtureRequest, model_repo: Callable[[str], Path]) -> Server:
    """tests/repos/bench_models on real Triton (``[real]``) or the bundled server."""
    name = "real_triton_factory" if request.param == "real" else "bundled_server_factory"
    factory: Callable[..., Server] = request.getfixturevalue(name)
    return factory(model_repo("bench_models"))


@pytest.fixture
def bench(bench_server: Server) -> Callable[..., Run]:
    def run(*args: str) -> Run:
        return run_script(["--url", bench_server.url, "bench", *args], timeout=180)

    return run


def test_server_compute_is_the_service_time(bench: Callable[..., Run]) -> None:
    done = bench("service_time", "-n", "30", "--warmup", "0", "--mode", "sync", "--json")
    assert done.code == 0, done.stderr
    (level,) = done.json()["levels"]
    server, latency_us = level["server_us"], level["latency_ms"]["avg"] * 1000
    # The model sleeps 20 ms inside execute: compute infer cannot be less ...
    assert server["compute_infer"] >= SERVICE_US * 0.99
    # ... and the server's time for a request cannot exceed what the client waited.
    assert server["request"] <= latency_us * 1.02
    assert server["compute_infer"] >= 0.5 * latency_us
    assert level["client_us"]["wait_us"] >= server["compute_infer"]


def test_streaming_first_token_and_gaps(bench: Callable[..., Run]) -> None:
    done = bench(
        "timed_stream",
        "--streaming",
        "-c",
        "2",
        "-n",
        "6",
        "--synthetic-input-tokens-mean",
        "12",
        "--output-tokens-mean",
        str(TOKENS),
        "--extra-inputs",
        f"first_ms:{D1_MS}",
        "--extra-inputs",
        f"gap_ms:{D2_MS}",
        "--json",
    )
    assert done.code == 0, done.stderr
    (level,) = done.json()["levels"]
    assert (level["concurrency"], level["requests"], level["errors"]) == (2, 6, 0)
    m = level["metrics"]
    assert m["time_to_first_token"]["min"] >= D1_MS
    # Gaps are D2 apart when sent; the delivery of the first token may lag behind that
    # of the next by a little, so the bound on gaps allows for it.
    assert m["time_to_second_token"]["avg"] >= 0.9 * D2_MS
    assert m["inter_token_latency"]["avg"] >= 0.9 * D2_MS
    assert m["inter_token_latency"]["min"] >= 0.5 * D2_MS
    assert m["request_latency"]["min"] >= D1_MS + (TOKENS - 1) * D2_MS
    assert m["output_sequence_length"]["min"] == m["output_sequence_length"]["max"] == TOKENS
    assert m["input_sequence_length"]["avg"] == 12
    assert m["output_token_throughput_per_user"]["max"] <= 1000 / (0.5 * D2_MS)
    # Relative: the first token comes well before the whole answer.
    assert m["time_to_first_token"]["avg"] < m["request_latency"]["avg"]
    units = {name: value["unit"] for name, value in m.items()}
    assert units == {
        "time_to_first_token": "ms",
        "time_to_second_token": "ms",
        "inter_token_latency": "ms",
        "request_latency": "ms",
        "output_sequence_length": "tokens",
        "input_sequence_length": "tokens",
        "output_token_throughput_per_user": "tokens/sec/user",
        "output_token_throughput": "tokens/sec",
        "request_throughput": "requests/sec",
    }
    for name in ("time_to_first_token", "inter_token_latency"):
        assert {"avg", "min", "max", "p50", "p75", "p90", "p95", "p99", "std"} <= set(m[name])
    tokens_per_s = m["output_token_throughput"]["avg"]
    assert tokens_per_s == pytest.approx(m["request_throughput"]["avg"] * TOKENS)


def test_streaming_goodput_rate_and_outputs(bench: Callable[..., Run], tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"text": "one two three"}\n{"text": "four five"}\n')
    export, plot = tmp_path / "profile.json", tmp_path / "stream.png"
    done = bench(
        "timed_stream",
        "--streaming",
        "-r",
        "20",
        "-n",
        "4",
        "--input-file",
        str(prompts),
        "--extra-inputs",
        "first_ms:10",
        "--extra-inputs",
        "gap_ms:5",
        "--output-tokens-mean",
        "3",
        "--goodput",
        "time_to_first_token:1",
        "--profile-export-file",
        str(export),
        "--plot",
        str(plot),
    )
    assert done.code == 0, done.stderr
    for label in ("TTFT (ms)", "ITL (ms)", "TT2T (ms)", "latency (ms)", "out tokens"):
        assert label in done.stdout
    assert "request_goodput: 0.00 requests/sec" in done.stdout  # no TTFT is under 1 ms
    document = json.loads(export.read_text())
    assert document["settings"]["streaming"] is True
    (experiment,) = document["experiments"]
    assert experiment["request_rate"] == 20
    assert experiment["metrics"]["input_sequence_length"]["max"] == 3
    assert experiment["metrics"]["time_to_first_token"]["min"] >= 10
    assert export.with_suffix(".csv").read_text().startswith("request_rate,metric,unit,avg")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_streaming_failures_are_clear(bench: Callable[..., Run]) -> None:
    missing = bench("service_time", "--streaming", "-n", "1")
    assert missing.code == 2 and "--prompt-input" in missing.stderr
    tokenizer = bench("timed_stream", "--streaming", "--tokenizer", "gpt2", "-n", "1")
    assert tokenizer.code == 2 and "transformers" in tokenizer.stderr


def write_json(tmp_path: Path, document: object, name: str = "data.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def test_sequences_play_streams_in_order(bench: Callable[..., Run], tmp_path: Path) -> None:
    """Each stream is one sequence: the running sum matches validation_data only when the
    steps reach the model in order, under one correlation id, started by START."""
    good = write_json(
        tmp_path,
        {
            "data": [[{"INPUT": [1]}, {"INPUT": [2]}, {"INPUT": [3]}], [{"INPUT": [10]}]],
            "validation_data": [
                [{"OUTPUT": [1]}, {"OUTPUT": [3]}, {"OUTPUT": [6]}],
                [{"OUTPUT": [10]}],
            ],
        },
    )
    done = bench(
        "seq_accumulate",
        "--input-data",
        good,
        "-c",
        "3",
        "-n",
        "40",
        "--warmup",
        "0",
        "--sequence-id-range",
        "100:199",
        "--serial-sequences",
        "--json",
    )
    assert done.code == 0, done.stderr
    (level,) = done.json()["levels"]
    assert level["errors"] == 0 and level["sequences"] >= 10
    wrong = write_json(
        tmp_path,
        {
            "data": [{"INPUT": [1]}, {"INPUT": [2]}],
            "validation_data": [{"OUTPUT": [1]}, {"OUTPUT": [4]}],
        },
        "w.json",
    )
    # Steps (not streams) make sequences of --sequence-length: 1, then 1+2=3, not 4.
    failed = bench(
        "seq_accumulate",
        "--input-data",
        wrong,
        "--sequence-length",
        "2",
        "-n",
        "10",
        "--warmup",
        "0",
    )
    assert failed.code == 1 and "validation: output 'OUTPUT' differs" in failed.stderr


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stopping_load_ends_its_sequences(
    bench: Callable[..., Run], bench_server: Server, mode: str
) -> None:
    """``-n 7`` stops three workers in the middle of 5-step sequences: each sends one more
    request with the END flag, unmeasured, as perf_analyzer does, so none holds a server
    slot until its idle timeout (the next run's sequences would wait out that timeout).
    After the run a request without START for any of the ids is refused: no sequence
    under them is open."""
    args = ["seq_accumulate", "-c", "3", "-n", "7", "--sequence-length", "5", "--json"]
    done = bench(*args, "--warmup", "0", "--sequence-id-range", "100:103", "--mode", mode)
    assert done.code == 0, done.stderr
    assert done.json()["levels"][0]["requests"] == 7
    one = tritonhttp.InferInput("INPUT", [1], "INT32")
    one.set_data_from_numpy(np.array([1], dtype=np.int32))
    with tritonhttp.InferenceServerClient(bench_server.url) as client:
        for ident in (100, 101, 102):
            with pytest.raises(InferenceServerException, match="must specify the START flag"):
                client.infer("seq_accumulate", [one], sequence_id=ident)


def test_variable_shapes_batches_and_bad_files(bench: Callable[..., Run], tmp_path: Path) -> None:
    needs = bench("shaped", "-n", "3")
    assert needs.code == 2 and "--shape IN:D1,D2" in needs.stderr
    shaped = bench(
        "shaped",
        "--shape",
        "IN:2,3",
        "--shape",
        "TEXT:4",
        "-b",
        "2",
        "-n",
        "10",
        "--string-data",
        "abc",
        "--input-data",
        "zero",
        "--json",
    )
    assert shaped.code == 0, shaped.stderr
    assert shaped.json()["levels"][0]["server_us"]["inference_count"] >= 2 * (10 - 1)
    data = write_json(
        tmp_path,
        {
            "data": [
                {
                    "IN": {"content": [1, 2, 3, 4], "shape": [2, 2]},
                    "TEXT": {"content": ["a", "b"], "shape": [2]},
                }
            ],
            "validation_data": [{"OUT": {"content": [2, 3, 4, 5], "shape": [2, 2]}, "COUNT": [2]}],
        },
    )
    checked = bench("shaped", "--input-data", data, "-n", "10", "--json")
    assert checked.code == 0, checked.stderr
    bad = write_json(
        tmp_path,
        {"data": [{"IN": {"content": [1, 2, 3], "shape": [2, 2]}, "TEXT": ["a"]}]},
        "bad.json",
    )
    rejected = bench("shaped", "--input-data", bad, "-n", "1")
    assert rejected.code == 2
    assert "bad.json step 0 'IN': 3 values, shape [2, 2] needs 4" in rejected.stderr


def test_streaming_progress_and_sequence_id_errors(bench: Callable[..., Run]) -> None:
    done = bench(
        "timed_stream",
        "--streaming",
        "-n",
        "6",
        "--extra-inputs",
        "first_ms:100",
        "--progress-interval",
        "0.2",
    )
    assert done.code == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("bench: ")]
    assert len(lines) >= 2 and "% done" in lines[-1]
    for bad in ("0", "9:3", "a:b"):
        wrong = bench("seq_accumulate", "--sequence-id-range", bad, "-n", "1")
        assert wrong.code == 2 and "--sequence-id-range" in wrong.stderr


def test_loop_mode_sends_requests_larger_than_a_socket_buffer(bench: Callable[..., Run]) -> None:
    """8 MB per request: each send stops part way and goes on when the socket can take
    more, on two connections at once, and every answer still counts."""
    done = bench(
        "shaped",
        "--shape",
        "IN:1,2000000",
        "--shape",
        "TEXT:1",
        "--input-data",
        "zero",
        "-c",
        "2",
        "-n",
        "6",
        "--warmup",
        "0",
        "--mode",
        "loop",
        "--json",
    )
    assert done.code == 0, done.stderr
    report = done.json()
    assert report["mode"] == "loop"
    (level,) = report["levels"]
    assert (level["requests"], level["errors"]) == (6, 0)
    assert level["server_us"]["success_count"] >= 6 - 2


def test_sequences_in_flight_never_share_an_id(bench: Callable[..., Run], tmp_path: Path) -> None:
    """A long and a short stream on two workers with two ids (END is excluded, as in
    perf_analyzer): the id a short sequence frees is taken next, never the id of the
    long sequence still being played. A shared id restarts the other sequence's sum."""
    data = write_json(
        tmp_path,
        {
            "data": [[{"INPUT": [1]}] * 6, [{"INPUT": [1]}]],
            "validation_data": [[{"OUTPUT": [i]} for i in range(1, 7)], [{"OUTPUT": [1]}]],
        },
        "streams.json",
    )
    args = ["seq_accumulate", "--input-data", data, "-n", "80", "--warmup", "0", "--json"]
    done = bench(*args, "-c", "2", "--sequence-id-range", "7:9")
    assert done.code == 0, done.stderr
    (level,) = done.json()["levels"]
    assert level["errors"] == 0 and level["sequences"] >= 10
    # fewer ids than sequences in flight: refused, as perf_analyzer refuses it
    for bad in (
        ["-c", "3", "--sequence-id-range", "7:9"],
        ["-r", "50", "--max-threads", "4", "--sequence-id-range", "1:4"],
    ):
        refused = bench(*args, *bad)
        assert refused.code == 2 and "sequences would share an id" in refused.stderr, bad
