"""triton-cli without a server: option parsing, value parsing, rendering, usage errors."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import invoke_offline, json_shape, run_script
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonhttp_cli._bench import parse_levels
from tritonhttp_cli._bench_measure import percentile
from tritonhttp_cli._errors import CliError, InputError
from tritonhttp_cli._metrics import parse_metrics, resolve_metrics_url
from tritonhttp_cli._render import format_array, json_text
from tritonhttp_cli._serve import server_command
from tritonhttp_cli._settings import Settings
from tritonhttp_cli._values import TensorSpec, fit_shape, parse_tensor_value, to_array

from tritonhttp.testing._process import free_port

COMMANDS = [
    "bench",
    "generate",
    "health",
    "infer",
    "log",
    "metrics",
    "model",
    "serve",
    "server",
    "shm",
    "trace",
]


def value(
    name: str,
    text: str,
    datatype: str,
    dims: list[int],
    batches: bool = False,
    override: list[int] | None = None,
) -> np.ndarray:
    raw = parse_tensor_value(name, text)
    array = to_array(raw, datatype)
    return fit_shape(array, raw, TensorSpec(name, datatype, dims), batches, override)


# -- the group, help and usage errors -----------------------------------------------------


def test_help_lists_every_command() -> None:
    result = invoke_offline("--help")
    assert result.exit_code == 0
    for command in COMMANDS:
        assert f"  {command} " in result.output


@pytest.mark.parametrize(
    "args",
    [[c] for c in COMMANDS]
    + [["model", c] for c in ("list", "load", "unload", "config", "metadata", "stats", "ready")]
    + [
        ["health", "live"],
        ["health", "ready"],
        ["log", "get"],
        ["log", "set"],
        ["trace", "get"],
        ["trace", "set"],
        ["shm", "status"],
        ["shm", "register"],
        ["shm", "unregister"],
        ["server", "metadata"],
    ],
)
def test_every_command_has_help(args: list[str]) -> None:
    result = invoke_offline(*args, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output and args[-1] in result.output


def test_version() -> None:
    result = invoke_offline("--version")
    assert result.exit_code == 0 and "triton-cli, version" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--header", "nocolon", "health", "live"], "expected K:V"),
        (["--timeout", "0", "health", "live"], "--timeout"),
        (["health", "ready", "--model-version", "1"], "--model-version needs --model"),
        (["health", "ready", "--wait", "-1"], "--wait"),
        (["shm", "register", "r", "--byte-size", "8"], "exactly one of --key"),
        (
            ["shm", "register", "r", "--key", "/k", "--raw-handle", "AA==", "--byte-size", "8"],
            "exactly one of --key",
        ),
        (["shm", "unregister"], "NAME or --all"),
        (["shm", "unregister", "r", "--all"], "NAME or --all"),
        (["bench", "m", "-c", "1", "-r", "10"], "not both"),
        (["bench", "m", "-d", "1", "-n", "10"], "not both"),
        (["bench", "m", "-c", "0"], "positive"),
        (["bench", "m", "-c", "1.5"], "whole numbers"),
        (["bench", "m", "-r", "x"], "START:END"),
        (["generate", "m"], "nothing to send"),
        (["--json", "bench", "m", "--csv", "-"], "both want stdout"),
        (["infer", "m", "-i", "NOEQUALS"], "expected NAME=VALUE"),
        (["metrics", "--filter", "("], "invalid regular expression"),
        (["log", "set", "novalue"], "expected NAME=VALUE"),
        (
            ["log", "set", "log_level=1"],
            "unknown log setting 'log_level' (valid keys: log_file, log_info, log_warning, "
            "log_error, log_verbose_level, log_format)",
        ),
        (["model", "stats", "--model-version", "1"], "needs a model NAME"),
        (["infer"], "Missing argument 'MODEL'"),
        (["nosuchcommand"], "No such command"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = invoke_offline(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_url_forms() -> None:
    def make(url: str) -> Settings:
        return Settings.from_options(url=url, ssl=False)

    assert make("http://h:1/base/").url == "h:1/base"
    https = make("HTTPS://h:443")
    assert (https.url, https.ssl, https.base_url) == ("h:443", True, "https://h:443")
    assert make("h:8000").host == "h"
    assert make("[::1]:8000/x").host == "[::1]"
    assert make("example.com").host == "example.com"


def test_metrics_url_defaults_to_port_8002_of_the_server() -> None:
    settings = Settings.from_options(url="triton.local:9000/base", ssl=False)
    assert resolve_metrics_url(settings, None) == "http://triton.local:8002/metrics"
    assert resolve_metrics_url(settings, "m:1") == "http://m:1/metrics"
    assert resolve_metrics_url(settings, "https://m:1/x") == "https://m:1/x"


def test_serve_dry_run_passes_every_flag_through() -> None:
    # Everything after the first server flag goes through untouched (even "--").
    flags = [
        "--model-repository",
        "/models",
        "--http-port=8005",
        "--log-verbose",
        "1",
        "--strict-readiness=false",
        "--",
        "--help",
    ]
    assert server_command(flags)[1:3] == ["-m", "tritonhttp.server"]
    result = invoke_offline("serve", "--dry-run", *flags)
    assert result.exit_code == 0, result.output
    words = result.output.split()
    assert words[1:] == [
        "-m",
        "tritonhttp.server",
        "--model-repository",
        "/models",
        "--http-port=8005",
        "--log-verbose",
        "1",
        "--strict-readiness=false",
        "--",
        "--help",
    ]


def test_serve_passes_help_after_double_dash() -> None:
    result = invoke_offline("serve", "--dry-run", "--", "--help")
    assert result.output.split()[-1] == "--help"


def _no_exec(*args: object) -> None:
    raise AssertionError(f"the server was run: {args}")


@pytest.mark.parametrize("missing", ["tritonhttp.server", "google.protobuf", "prometheus_client"])
def test_serve_without_the_bundled_server_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """The server, or a package of the ``server`` extra, made unimportable in this process
    (``sys.modules[name] = None``, what ``find_spec`` reports as not installed): one line
    says how to get it."""
    monkeypatch.setitem(sys.modules, missing, None)
    monkeypatch.setattr(os, "execv", _no_exec)  # (a regression must not replace pytest)
    result = invoke_offline("serve", "--model-repository", "x")
    assert result.exit_code == 1
    assert result.output.strip() == (
        "Error: the bundled server (tritonhttp.server) is not installed: "
        "pip install 'tritonhttp[server]'"
    )


# -- server down --------------------------------------------------------------------------


def test_server_down_is_one_line_and_exit_1() -> None:
    url = f"127.0.0.1:{free_port()}"
    done = run_script(["--url", url, "model", "list"])
    assert done.code == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: failed to connect to")
    assert "Connection refused" in lines[0]
    verbose = run_script(["--url", url, "--verbose", "model", "list"])
    assert verbose.code == 1 and "Traceback" in verbose.stderr


def test_health_when_down_says_why_exit_1_and_waits() -> None:
    url = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    done = run_script(["--url", url, "health", "ready"])
    quick = time.monotonic() - start  # the baseline: one probe, no waiting
    assert (done.code, done.stdout) == (1, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"not healthy: the server at {url} is not reachable: ")
    assert "Connection refused" in line
    quiet = run_script(["--url", url, "health", "ready", "-q"])
    assert (quiet.code, quiet.stdout, quiet.stderr) == (1, "", "")
    start = time.monotonic()
    waited = run_script(["--url", url, "health", "live", "--wait", "0.6", "--json"])
    elapsed = time.monotonic() - start
    assert waited.code == 1
    answer = waited.json()
    assert answer == {"check": "live", "model": None, "healthy": False, "reason": answer["reason"]}
    assert answer["reason"].startswith(f"the server at {url} is not reachable: ")
    assert answer["reason"].endswith("(still after waiting 0.6 s)")
    assert waited.stderr.strip().endswith("(still after waiting 0.6 s)")
    assert elapsed >= 0.6  # it polled for the whole --wait
    assert elapsed < 2 * quick + 2 * 0.6, (elapsed, quick)  # ...and then stopped


def test_triton_url_environment_variable() -> None:
    url = f"127.0.0.1:{free_port()}"
    done = run_script(["model", "list"], env={**os.environ, "TRITON_URL": url})
    assert done.code == 1 and url in done.stderr


def test_shell_completion_script() -> None:
    done = run_script([], env={**os.environ, "_TRITON_CLI_COMPLETE": "bash_source"})
    assert done.code == 0 and "_TRITON_CLI_COMPLETE=bash_complete" in done.stdout


# -- tensor values ------------------------------------------------------------------------


def test_comma_list_fills_a_fixed_shape() -> None:
    array = value("X", "1,2,3,4", "FP32", [4])
    assert array.dtype == np.float32 and array.tolist() == [1, 2, 3, 4]


def test_batch_dimension_is_added_for_batching_models() -> None:
    one = value("X", ",".join(map(str, range(16))), "INT32", [-1, 16], batches=True)
    assert one.shape == (1, 16) and one.dtype == np.int32
    two = value("X", ",".join(map(str, range(32))), "INT32", [-1, 16], batches=True)
    assert two.shape == (2, 16) and two[1, 0] == 16
    nested = value("X", json.dumps([list(range(16))]), "INT32", [-1, 16], batches=True)
    assert nested.shape == (1, 16)


def test_a_variable_dimension_takes_the_length() -> None:
    assert value("X", "1,2,3", "INT64", [-1]).shape == (3,)
    assert value("X", "1,2,3,4,5,6", "INT64", [2, -1]).shape == (2, 3)
    assert value("X", "", "INT64", [-1]).shape == (0,)


@pytest.mark.parametrize(
    ("text", "datatype", "dims", "batches", "message"),
    [
        ("1,2,3", "FP32", [4], False, "shape mismatch: input 'X' expects [4], got 3 values"),
        ("[[1,2],[3,4]]", "FP32", [4], False, "expects [4], got [2,2]"),
        ("1,2,3", "INT32", [-1, 16], True, "expects [-1,16] (batch + [16]) (16 values per"),
        ("1,2", "INT32", [-1, -1], False, "several variable dimensions"),
        ("1,a", "FP32", [2], False, "'a' is not a number (FP32)"),
        ("1.5", "INT8", [1], False, "1.5 is not an integer (INT8)"),
        ("300", "UINT8", [1], False, "300 is out of range for UINT8 [0, 255]"),
        ("-1", "UINT64", [1], False, "out of range for UINT64"),
        ("1e10", "FP16", [1], False, "10000000000.0 is out of range for FP16 [-65504, 65504]"),
        ("65520", "FP16", [1], False, "65520 is out of range for FP16"),
        ("[1e39]", "FP32", [1], False, "1e+39 is out of range for FP32"),
        ("-1e39", "BF16", [1], False, "-1e+39 is out of range for BF16"),
        ("1e400", "FP64", [1], False, "1e400 is out of range for FP64"),
        ("1e400", "INT64", [1], False, "1e400 is out of range for INT64"),
        ("maybe", "BOOL", [1], False, "'maybe' is not a BOOL"),
        ("[1, [2]]", "INT32", [-1], False, "nested lists have different lengths"),
        ("[1,", "INT32", [-1], False, "invalid JSON"),
        ("1", "NOTATYPE", [1], False, "unknown datatype 'NOTATYPE'"),
    ],
)
def test_bad_values_are_input_errors(
    text: str, datatype: str, dims: list[int], batches: bool, message: str
) -> None:
    with pytest.raises(InputError) as info:
        value("X", text, datatype, dims, batches)
    assert message in info.value.format_message()
    assert info.value.exit_code == 2


def test_shape_override() -> None:
    assert value("X", "1,2,3,4,5,6", "FP32", [-1, -1], override=[2, 3]).shape == (2, 3)
    with pytest.raises(InputError, match=r"--shape \[4\] needs 4 values, got 6"):
        value("X", "1,2,3,4,5,6", "FP32", [-1], override=[4])


def test_bytes_values() -> None:
    listed = value("X", '["hello", "wörld", ""]', "BYTES", [-1])
    assert listed.dtype == object and listed.tolist() == [b"hello", "wörld".encode(), b""]
    assert value("X", "a,b", "BYTES", [-1]).tolist() == [b"a", b"b"]
    assert value("X", '"one, with comma"', "BYTES", [-1]).tolist() == [b"one, with comma"]


def test_bool_tokens() -> None:
    assert value("X", "true,false,1,0", "BOOL", [4]).tolist() == [True, False, True, False]


def test_special_floats() -> None:
    array = value("X", "nan,inf,-inf,1e3", "FP64", [4])
    assert math.isnan(array[0]) and array[1] == math.inf and array[3] == 1000
    assert value("X", "65519,-Infinity", "FP16", [2]).tolist() == [65504, -math.inf]
    assert value("X", '["1e400"]', "BYTES", [1]).tolist() == [b"1e400"]
    assert value("X", "[1e400]", "BYTES", [1]).tolist() == [b"1e400"]


def test_files(tmp_path: Path) -> None:
    np.save(tmp_path / "i64.npy", np.arange(4, dtype=np.int64))
    as_float = value("X", f"@{tmp_path / 'i64.npy'}", "FP32", [4])
    assert as_float.dtype == np.float32 and as_float.tolist() == [0, 1, 2, 3]
    np.save(tmp_path / "f.npy", np.ones(4))
    with pytest.raises(InputError, match="holds FP64 values, the model expects INT32"):
        value("X", f"@{tmp_path / 'f.npy'}", "INT32", [4])
    np.save(tmp_path / "obj.npy", np.array([b"a"], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="holds Python objects"):
        value("X", f"@{tmp_path / 'obj.npy'}", "BYTES", [-1])
    np.save(tmp_path / "s.npy", np.array([b"ab", b"c"]))
    assert value("X", f"@{tmp_path / 's.npy'}", "BYTES", [-1]).tolist() == [b"ab", b"c"]
    (tmp_path / "v.json").write_text("[[1, 2], [3, 4]]")
    assert value("X", f"@{tmp_path / 'v.json'}", "INT32", [2, 2]).tolist() == [[1, 2], [3, 4]]
    (tmp_path / "blob.bin").write_bytes(b"\x00\xffraw")
    assert value("X", f"@{tmp_path / 'blob.bin'}", "BYTES", [-1]).tolist() == [b"\x00\xffraw"]
    with pytest.raises(InputError, match="read as one BYTES element, but the input is FP32"):
        value("X", f"@{tmp_path / 'blob.bin'}", "FP32", [-1])
    with pytest.raises(InputError, match="cannot read"):
        value("X", f"@{tmp_path / 'missing.npy'}", "FP32", [-1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=40))
def test_int_lists_round_trip(numbers: list[int]) -> None:
    array = value("X", ",".join(map(str, numbers)), "INT32", [-1])
    assert array.dtype == np.int32 and array.tolist() == numbers


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=False, width=64), min_size=1, max_size=40))
def test_float_lists_round_trip(numbers: list[float]) -> None:
    array = value("X", ",".join(map(repr, numbers)), "FP64", [-1])
    assert array.tolist() == numbers


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(), max_size=20))
def test_string_lists_round_trip(texts: list[str]) -> None:
    array = value("X", json.dumps(texts), "BYTES", [-1])
    assert array.tolist() == [t.encode("utf-8") for t in texts]


# -- rendering ----------------------------------------------------------------------------


def test_long_arrays_are_abbreviated() -> None:
    text = format_array(np.arange(10_000, dtype=np.int32))
    assert "..." in text and len(text) < 100 and text.startswith("[   0,    1,    2")
    assert format_array(np.array([b"a", b"\xff"], dtype=object)) == "[\"a\", b'\\xff']"


def test_json_text_keeps_scalar_lists_on_one_line() -> None:
    text = json_text({"a": [1, 2, 3], "b": [{"c": math.nan}], "d": {}})
    assert (
        text == '{\n  "a": [1, 2, 3],\n  "b": [\n    {\n      "c": "NaN"\n    }\n  ],\n  "d": {}\n}'
    )
    assert json.loads(text)["b"][0]["c"] == "NaN"


def test_json_shape_merges_list_items() -> None:
    shape = json_shape([{"name": "a", "state": "READY"}, {"name": "b", "reason": "x"}])
    assert shape == [{"name": "string", "reason": "string", "state": "string"}]


def test_levels_and_percentiles() -> None:
    assert parse_levels("1,2,4", "-c", True) == [1, 2, 4]
    assert parse_levels("1:8:2", "-c", True) == [1, 3, 5, 7]
    assert parse_levels("100:300:100,500", "-r", False) == [100, 200, 300, 500]
    ordered = [float(i) for i in range(1, 101)]
    assert [percentile(ordered, q) for q in (50, 90, 99, 100)] == [50, 90, 99, 100]
    assert percentile([7.0], 99) == 7.0 and math.isnan(percentile([], 50))


def test_metrics_parser_keeps_the_server_names() -> None:
    text = (
        "# HELP nv_inference_count Number of inferences\n"
        "# TYPE nv_inference_count counter\n"
        'nv_inference_count{model="add_sub",version="1"} 12\n'
        "# HELP nv_cpu_utilization CPU\n"
        "# TYPE nv_cpu_utilization gauge\n"
        "nv_cpu_utilization 0.25\n"
    )
    samples = parse_metrics(text)
    assert [(s.name, s.type, s.labels, s.value) for s in samples] == [
        ("nv_inference_count", "counter", {"model": "add_sub", "version": "1"}, 12.0),
        ("nv_cpu_utilization", "gauge", {}, 0.25),
    ]
    assert samples[0].selector == 'nv_inference_count{model="add_sub",version="1"}'
    with pytest.raises(CliError, match="not in the Prometheus text format"):
        parse_metrics("this is { not metrics\n")


def test_python_dash_m() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "tritonhttp_cli", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("triton-cli, version ")


def test_health_imports_nothing_it_does_not_need() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, runpy\n"
        "sys.argv = ['triton-cli', '--url', '127.0.0.1:1', 'health', 'live']\n"
        "try:\n"
        "    runpy.run_module('tritonhttp_cli', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('rich', 'prometheus_client', 'matplotlib') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "", done.stdout + done.stderr
