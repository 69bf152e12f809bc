"""``triton-cli bench`` against real Triton and the bundled server: every mode and load,
exports, failures."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import pytest
from conftest import Invoke, RunCli


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


@pytest.mark.parametrize("mode", ["loop", "sync", "async"])
def test_request_rate(invoke: Invoke, mode: str) -> None:
    result = invoke(
        "bench", "add_sub", "-r", "200", "-d", "1", "--warmup", "0.2", "--mode", mode, "--json"
    )
    assert result.exit_code == 0, result.output
    (level,) = levels_of(result.output)
    assert level["level"] == 200 and level["errors"] == 0
    # An open loop sends on schedule: 200 requests a second of the window it measured,
    # never more; fewer only when the sender fell behind (and then it says so).
    scheduled = 200 * level["window_s"]
    assert level["window_s"] >= 1.0  # (-d 1)
    assert level["requests"] <= 1.1 * scheduled + 2
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
    given = invoke("bench", "identity_bytes", "-i", 'INPUT0=["x"]', "-n", "10", "--json")
    assert levels_of(given.output)[0]["requests"] == 10


def test_table_csv_and_plot(run_cli: RunCli, tmp_path: Path) -> None:
    done = run_cli(
        "bench",
        "add_sub",
        "-c",
        "1,2",
        "-n",
        "30",
        "--warmup",
        "0",
        "--csv",
        str(tmp_path / "out.csv"),
        "--plot",
        str(tmp_path / "out.png"),
    )
    assert done.code == 0, done.stderr
    assert "concurrency" in done.stdout and "p99" in done.stdout
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out.csv").read_text())))
    assert [r["level"] for r in rows] == ["1", "2"]
    assert all(int(r["requests"]) == 30 and r["errors"] == "0" for r in rows)
    assert float(rows[0]["latency_p99_ms"]) >= float(rows[0]["latency_p50_ms"]) > 0
    assert (tmp_path / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    to_stdout = run_cli("bench", "add_sub", "-n", "10", "--warmup", "0", "--csv", "-")
    assert to_stdout.stdout.splitlines()[0].startswith("load,level,requests,errors")
    assert len(to_stdout.stdout.splitlines()) == 2


def test_failures(run_cli: RunCli, invoke: Invoke) -> None:
    # The first request fails: nothing is generated, one line says why.
    bad = run_cli("bench", "error_model", "-i", "MODE=0", "-d", "10")
    assert bad.code == 1 and bad.stderr.strip() == ("Error: intentional internal error (HTTP 500)")
    start = time.monotonic()
    unknown = run_cli("bench", "nope")
    baseline = time.monotonic() - start  # a run that fails at its first answer
    assert unknown.code == 1 and "unknown model" in unknown.stderr
    # A server that does not answer in --timeout fails the bench at once.
    start = time.monotonic()
    slow = run_cli("--timeout", "0.3", "bench", "slow_model", "-i", "DELAY_MS=2000")
    assert slow.code == 1 and "timed out" in slow.stderr.lower()
    # ...before the model's 2 s answer could have come
    assert time.monotonic() - start < baseline + 2.0
