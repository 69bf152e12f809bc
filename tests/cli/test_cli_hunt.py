"""Defects found by using the installed ``triton-cli`` script as a user would.

Each test runs the script in a subprocess against the bundled server (or none, for
usage errors found before any request).
"""

from __future__ import annotations

from pathlib import Path

from cli_helpers import run_script

from tritonhttp.server import _launch as bundled


def _bench(server: bundled.BundledServer, *args: str) -> list[str]:
    return ["--url", server.url, "bench", *args, "-n", "5", "--warmup", "0"]


def test_bytes_that_are_not_utf8_are_sent_as_given_or_refused_as_usage_errors(
    bundled_server: bundled.BundledServer, tmp_path: Path
) -> None:
    url = ["--url", bundled_server.url]
    # A command-line byte that is not UTF-8 is sent as that byte.
    done = run_script([*url, "--json", "infer", "identity_bytes", "-i", "INPUT0=a\udcffb"])
    assert done.code == 0, done.stderr
    (output,) = done.json()["outputs"]
    assert (output["data"], output["encoding"]) == (["Yf9i"], "base64")  # b"a\xffb"
    # A lone surrogate in JSON has no bytes: a usage error naming the input.
    lone = run_script([*url, "infer", "identity_bytes", "-i", 'INPUT0=["\\ud800"]'])
    assert lone.code == 2
    assert lone.stderr.startswith("Error: input 'INPUT0': '\\ud800' is a lone UTF-16 surrogate")
    assert "Traceback" not in lone.stderr
    # The same for bench: -i, --string-data and --input-data files.
    bench_i = run_script(_bench(bundled_server, "identity_bytes", "-i", 'INPUT0=["\\ud800"]'))
    assert bench_i.code == 2 and "lone UTF-16 surrogate" in bench_i.stderr
    data = tmp_path / "data.json"
    data.write_text('{"data": [{"INPUT0": ["\\ud800"]}]}')
    from_file = run_script(
        _bench(bundled_server, "identity_bytes", "--shape", "INPUT0:1", "--input-data", str(data))
    )
    assert from_file.code == 2, from_file.stderr
    assert "'INPUT0': '\\ud800' is a lone UTF-16 surrogate" in from_file.stderr
    string_data = run_script(
        _bench(bundled_server, "identity_bytes", "--shape", "INPUT0:1", "--string-data", "\udcff")
    )
    assert string_data.code == 0, string_data.stderr


def test_bench_json_reports_the_percentile_asked_for(
    bundled_server: bundled.BundledServer,
) -> None:
    """perf_analyzer reports the --percentile it stabilises on; so does --json."""
    done = run_script([*_bench(bundled_server, "add_sub", "--percentile", "85"), "--json"])
    assert done.code == 0, done.stderr
    (level,) = done.json()["levels"]
    latency = level["latency_ms"]
    assert list(latency) == ["avg", "std", "min", "p50", "p85", "p90", "p95", "p99", "max"]
    assert latency["p50"] <= latency["p85"] <= latency["p90"]
    plain = run_script([*_bench(bundled_server, "add_sub"), "--json"])
    assert "p85" not in plain.json()["levels"][0]["latency_ms"]


def test_ranges_perf_analyzer_reads_otherwise_are_usage_errors() -> None:
    """END 0 means "until -l" to perf_analyzer, and a fractional step of a concurrency
    range used to be taken silently; both are refused before any request."""
    url = ["--url", "127.0.0.1:9"]  # nothing listens: the checks come first
    for flag, text in (("-c", "2:0"), ("-c", "1:0:2"), ("-r", "10:0:5")):
        done = run_script([*url, "bench", "add_sub", flag, text, "-l", "5"])
        assert done.code == 2, (text, done.stderr)
        assert "an open range (END 0" in done.stderr, done.stderr
    for text in ("1:2:1.5", "1.5:3", "1:3.5"):
        done = run_script([*url, "bench", "add_sub", "-c", text])
        assert done.code == 2, (text, done.stderr)
        assert "must be whole numbers" in done.stderr, done.stderr


def test_a_url_that_cannot_name_a_server_is_a_usage_error() -> None:
    """A bad port or an unclosed IPv6 bracket is found before any request (exit 2), not
    reported as a failure of the server (exit 1, "not healthy")."""
    for url, why in (
        ("localhost:99999", "Port out of range"),
        ("localhost:abc", "Port could not be cast"),
        ("http://[::1", "Invalid IPv6 URL"),
        (":8000", "has no host"),
    ):
        done = run_script(["--url", url, "health", "live"])
        assert done.code == 2, (url, done.stderr)
        assert "Invalid value for '--url'" in done.stderr and why in done.stderr, done.stderr
    # Well-formed addresses still reach the connection attempt.
    fine = run_script(["--url", "[::1]:9/base/", "--timeout", "2", "health", "live"])
    assert fine.code == 1 and "is not reachable" in fine.stderr, fine.stderr


def test_saved_bf16_outputs_are_numbers_that_load_back(
    bundled_server: bundled.BundledServer, tmp_path: Path
) -> None:
    """--save wrote BF16 as opaque 2-byte voids, which --input @file.npy refused."""
    import numpy as np

    url = ["--url", bundled_server.url]
    args = ["infer", "identity_all", "-o", "OUT_BF16", "--save", str(tmp_path)]
    done = run_script([*url, *args, "-i", "IN_BF16=1.5,-2,inf"])
    assert done.code == 0, done.stderr
    saved = np.load(tmp_path / "OUT_BF16.npy", allow_pickle=False)
    assert saved.dtype == np.float32 and saved.tolist() == [1.5, -2.0, float("inf")]
    again = run_script([*url, "--json", *args, "-i", f"IN_BF16=@{tmp_path / 'OUT_BF16.npy'}"])
    assert again.code == 0, again.stderr
    assert again.json()["outputs"][0]["data"] == [1.5, -2.0, "Infinity"]
