"""``bench`` at its edges, through the installed script: Ctrl-C in the middle of a sweep,
numbers that are not finite, output paths that cannot be written, and perf_analyzer
input files at the limits of the format."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import SCRIPT, Run, run_script
from conftest import RunCli, Server


def _interrupt(url: str, args: list[str], after: str, cwd: Path, on_stderr: bool = False) -> Run:
    """Run ``bench`` and send SIGINT once ``after`` has appeared on its stdout (or
    stderr)."""
    process = subprocess.Popen(
        [str(SCRIPT), "--url", url, "bench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    watched = process.stderr if on_stderr else process.stdout
    assert watched is not None
    seen = ""
    deadline = time.monotonic() + 120
    while after not in seen and time.monotonic() < deadline:
        line = watched.readline()
        if not line:
            break
        seen += line
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    return Run(
        process.returncode, out if on_stderr else seen + out, seen + err if on_stderr else err
    )


@pytest.mark.parametrize("shm", ["none", "system"])
def test_ctrl_c_reports_the_levels_measured(triton: Server, tmp_path: Path, shm: str) -> None:
    done = _interrupt(
        triton.url,
        [
            "add_sub",
            "-c",
            "1:50",
            "-d",
            "0.3",
            "--warmup",
            "0",
            "--shared-memory",
            shm,
            "-f",
            "perf.csv",
            "--profile-export-file",
            "export.json",
        ],
        after="Request concurrency: 3",
        cwd=tmp_path,
    )
    assert done.code == 130, done.stderr
    assert done.stderr.strip().endswith("Error: interrupted"), done.stderr
    # "Interrupted during concurrency N: that level is left out; ..." (or, between two
    # levels, "Interrupted; ...")
    assert "levels measured are reported" in done.stderr.splitlines()[0], done.stderr
    # every level measured is in the table and the files; the one cut short is not
    rows = (tmp_path / "perf.csv").read_text().splitlines()
    levels = sorted(int(row.split(",")[0]) for row in rows[1:])
    assert levels[:3] == [1, 2, 3] and levels == list(range(1, len(levels) + 1))
    assert len(levels) < 50
    assert "add_sub: times in ms" in done.stdout
    assert (tmp_path / "export.json").is_file()
    # nothing left behind
    assert not [
        n for n in os.listdir("/dev/shm") if n.startswith(f"triton_cli_bench_{os.getpid()}")
    ]
    status = run_script(["--url", triton.url, "shm", "status", "--json"]).json()
    assert not [r for r in status["system"] if r["name"].startswith("triton_cli_bench_")]


def test_ctrl_c_before_any_level_ends_is_just_interrupted(triton: Server, tmp_path: Path) -> None:
    done = _interrupt(
        triton.url,
        ["add_sub", "-d", "30", "--warmup", "0", "-f", "perf.csv", "--progress-interval", "0.2"],
        after="bench: concurrency 1",  # the first level is under way
        cwd=tmp_path,
        on_stderr=True,
    )
    assert done.code == 130 and done.stderr.strip().endswith("interrupted"), done.stderr
    assert not (tmp_path / "perf.csv").exists()


def test_ctrl_c_in_streaming_mode(triton: Server, tmp_path: Path) -> None:
    done = _interrupt(
        triton.url,
        [
            "text_stream",
            "--streaming",
            "-c",
            "1:50",
            "-d",
            "0.4",
            "--warmup",
            "0",
            "--synthetic-input-tokens-mean",
            "3",
            "--progress-interval",
            "0.05",
            "--profile-export-file",
            "export.json",
        ],
        after="bench: concurrency 3:",
        cwd=tmp_path,
        on_stderr=True,
    )
    assert done.code == 130, done.stderr
    assert "Interrupted during concurrency 3: that level is left out" in done.stderr
    assert "the 2 levels measured are reported" in done.stderr
    assert "text_stream, concurrency 2" in done.stdout
    assert "concurrency 3" not in done.stdout
    export = json.loads((tmp_path / "export.json").read_text())
    assert [e["concurrency"] for e in export["experiments"]] == [1, 2]


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "m", "-c", "nan"],
        ["bench", "m", "-r", "inf"],
        ["bench", "m", "-r", "1:inf"],
        ["bench", "m", "-c", "1:1e12"],
        ["bench", "m", "-d", "nan"],
        ["bench", "m", "--warmup", "inf"],
        ["bench", "m", "-s", "nan"],
        ["bench", "m", "-l", "nan"],
        ["--timeout", "nan", "model", "list"],
        ["--timeout", "inf", "model", "list"],
        ["health", "ready", "--wait", "nan"],
        ["health", "ready", "--interval", "inf"],
    ],
)
def test_numbers_that_are_not_finite_are_usage_errors(args: list[str]) -> None:
    # these used to hang (a NaN duration or rate never ends) or fail late with exit 1
    done = run_script(["--url", "127.0.0.1:9", *args], timeout=30)
    assert done.code == 2, (args, done.stderr)
    assert "finite" in done.stderr or "levels" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-f", "."], "-f: cannot write .: it is a directory"),
        (["-f", "no/such/dir/perf.csv"], "no directory no/such/dir"),
        (["--profile-export-file", "no/such/p.json"], "no directory no/such"),
        (["--profile-export-file", "p.csv"], "give a .json path"),
        (
            ["-f", "perf.csv", "--profile-export-file", "perf.json"],
            "-f and the CSV beside --profile-export-file would both write perf.csv",
        ),
        (["-f", "out.png", "--plot", "./out.png"], "-f and --plot would both write"),
        # --streaming writes perf_analyzer's CSV too: its -f is checked the same way
        (["--streaming", "-f", "."], "-f: cannot write .: it is a directory"),
    ],
)
def test_output_files_are_checked_before_any_load(
    tmp_path: Path, args: list[str], message: str
) -> None:
    # the server is not even contacted (nothing listens on port 9): a long sweep no
    # longer ends in "cannot write", and one output no longer overwrites another
    done = subprocess.run(
        [str(SCRIPT), "--url", "127.0.0.1:9", "bench", "m", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_unwritable_file(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):
        pytest.skip("running as a user who may write anywhere")
    done = run_script(["--url", "127.0.0.1:9", "bench", "m", "-f", str(locked / "perf.csv")])
    assert done.code == 2 and "permission denied" in done.stderr, done.stderr


def _b64(raw: bytes) -> str:
    import base64

    return base64.b64encode(raw).decode()


@pytest.mark.parametrize(
    ("model", "document", "message"),
    [
        # a misspelt optional input was silently left out
        (
            "identity_all",
            {"data": [{"IN_INT32": {"content": [1, 2], "shape": [2]}, "IN_FP3": [1.0]}]},
            "step 0: model 'identity_all' has no input 'IN_FP3'",
        ),
        (
            "add_sub",
            {
                "data": [{"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 2, 3, 4]}],
                "validation_data": [{"OUTPUT0": [2, 4, 6, 8], "OUTPUT9": [0, 0, 0, 0]}],
            },
            "step 0 validation: model 'add_sub' has no output 'OUTPUT9'",
        ),
        # a shape the model cannot take was sent, and the server refused it
        (
            "add_sub",
            {"data": [{"INPUT0": {"content": [1, 2, 3, 4], "shape": [2, 2]}, "INPUT1": [1] * 4}]},
            "step 0 'INPUT0': \"shape\" [2, 2] does not fit the model's dims [4]",
        ),
    ],
)
def test_input_files_perf_analyzer_refuses(
    run_cli: RunCli, tmp_path: Path, model: str, document: object, message: str
) -> None:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(document))
    done = run_cli("bench", model, "--input-data", str(path), "-n", "5", "--warmup", "0")
    assert done.code == 2, done.stderr
    assert done.stderr.startswith(f"Error: data.json {message}"), done.stderr


def test_input_files_perf_analyzer_accepts(run_cli: RunCli, tmp_path: Path) -> None:
    import struct

    # "b64" beside "shape" in one object, and the "model" key of a step
    path = tmp_path / "data.json"
    path.write_text(
        json.dumps(
            {
                "data": [
                    {
                        "model": "add_sub",
                        "INPUT0": {"b64": _b64(struct.pack("<4f", 1, 2, 3, 4)), "shape": [4]},
                        "INPUT1": [10, 20, 30, 40],
                    }
                ],
                "validation_data": [{"OUTPUT0": {"content": [11, 22, 33, 44], "shape": [4]}}],
            }
        )
    )
    done = run_cli("bench", "add_sub", "--input-data", str(path), "-n", "5", "--warmup", "0")
    assert done.code == 0, done.stderr


def test_raw_bytes_files_hold_one_element_per_newline(run_cli: RunCli, tmp_path: Path) -> None:
    # two elements: "a<FF>b<CR>" and "c<0xff>"; a form feed or a CR is no line break
    # for perf_analyzer, and bytes that are not UTF-8 stay as they are
    data = tmp_path / "data"
    data.mkdir()
    (data / "INPUT0").write_bytes(b"a\x0cb\r\nc\xff\n")
    (data / "OUTPUT0").write_bytes(b"a\x0cb\r\nc\xff\n")
    args = ["bench", "identity_bytes", "--input-data", str(data), "--shape", "INPUT0:2"]
    done = run_cli(*args, "-n", "5", "--warmup", "0")
    assert done.code == 0, done.stderr  # the echo equals the file, element by element
    (data / "OUTPUT0").write_bytes(b"a\x0cb\nc\xff\n")  # without the CR: differs
    done = run_cli(*args, "-n", "5", "--warmup", "0")
    assert done.code == 1 and "differs from validation_data" in done.stderr, done.stderr


def test_progress_counts_every_window_tried(run_cli: RunCli) -> None:
    # -s 0 never agrees, so all 4 windows run; the share done used to stay under 25%
    done = run_cli(
        "bench",
        "add_sub",
        "-p",
        "300",
        "-s",
        "0",
        "--max-trials",
        "4",
        "--warmup",
        "0",
        "--progress-interval",
        "0.1",
    )
    shares = [
        int(line.rsplit(",", 1)[1].split("%")[0])
        for line in done.stderr.splitlines()
        if line.startswith("bench: concurrency 1:")
    ]
    assert shares and max(shares) >= 60, done.stderr
    assert shares == sorted(shares) and max(shares) <= 100


def test_streaming_follows_request_intervals(run_cli: RunCli, tmp_path: Path) -> None:
    # a 2 s gap, then nine requests 1 µs apart: a burst. The intervals used to be
    # replaced by a constant rate of the same mean (5/s), 10 requests over ~1.8 s.
    intervals = tmp_path / "gaps.txt"
    intervals.write_text("2000000\n" + "1\n" * 9)
    done = run_cli(
        "bench",
        "text_stream",
        "--streaming",
        "--request-intervals",
        str(intervals),
        "-n",
        "10",
        "--synthetic-input-tokens-mean",
        "3",
        "--json",
    )
    assert done.code == 0, done.stderr
    (level,) = done.json()["levels"]
    assert level["requests"] == 10
    assert level["metrics"]["request_throughput"]["avg"] > 20  # a burst, not 5/s


def test_empty_input_data_is_not_the_current_folder(run_cli: RunCli) -> None:
    done = run_cli("bench", "add_sub", "--input-data", "", "-n", "5")
    assert done.code == 2, done.stderr
    assert done.stderr.strip() == (
        "Error: --input-data: an empty value: give zero, random, a directory or a file"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--streaming", "--collect-metrics"], "--collect-metrics is not used by --streaming"),
        (["--streaming", "-b", "2"], "--batch-size is not used by --streaming"),
        (["--streaming", "--input-data", "zero"], "--input-data is not used by --streaming"),
        (["--streaming", "-l", "5"], "--latency-threshold is not used by --streaming"),
        (["--streaming", "--no-binary"], "--binary/--no-binary is not used by --streaming"),
        (["--tokenizer", "gpt2"], "--tokenizer is used only by --streaming"),
        (["--goodput", "time_to_first_token:5"], "--goodput is used only by --streaming"),
    ],
)
def test_options_the_mode_never_reads_are_usage_errors(args: list[str], message: str) -> None:
    # they were accepted and silently left out
    done = run_script(["--url", "127.0.0.1:9", "bench", "m", *args])
    assert done.code == 2 and message in done.stderr, done.stderr


def _bench_with_open_file_limit(
    soft: int, hard: int, args: list[str], url: str = "127.0.0.1:9"
) -> Run:
    """``bench`` under RLIMIT_NOFILE ``(soft, hard)`` (by default against a port nothing
    listens on)."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    done = subprocess.run(
        [str(SCRIPT), "--url", url, "bench", *args],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit,
    )
    return Run(done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize(
    ("args", "flag", "workers"),
    [
        (["-c", "1000000000"], "--concurrency", 1000000000),
        (["-c", "1,200"], "--concurrency", 200),
        (["-r", "10", "--max-threads", "200"], "--max-threads", 200),
        (["--streaming", "-c", "200"], "--concurrency", 200),
    ],
)
def test_more_requests_in_flight_than_open_files_is_a_usage_error(
    args: list[str], flag: str, workers: int
) -> None:
    # it failed minutes later, with "Too many open files"
    started = time.monotonic()
    done = _bench_with_open_file_limit(128, 128, ["m", *args])
    assert time.monotonic() - started < 30
    assert done.code == 2, done.stderr
    assert (
        f"Invalid value for {flag}: {workers} requests in flight need about " in done.stderr
        and "more than this process's open-file limit of 128 (ulimit -n): lower "
        f"{flag} or raise the limit"
        in done.stderr
    ), done.stderr


def test_the_soft_open_file_limit_is_raised_to_the_hard_one(triton: Server) -> None:
    # 200 connections fit under the hard limit, not under the soft one
    args = ["add_sub", "-c", "200", "-n", "400", "--json"]
    done = _bench_with_open_file_limit(128, 1024, args, triton.url)
    assert done.code == 0, done.stderr
    (level,) = done.json()["levels"]
    assert level["errors"] == 0
