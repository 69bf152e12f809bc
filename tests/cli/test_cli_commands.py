"""Every triton-cli command against real Triton 2.51.0 and against the bundled server
(the ``triton`` fixture runs each test on both), as a subprocess (the installed script)
and in-process (CliRunner) for the variants."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import GENERATE_REPO, SCRIPT
from conftest import Invoke, RunCli, Server

from tritonhttp.testing import _real_triton as rt
from tritonhttp.testing._process import free_port
from tritonhttp.utils import shared_memory as shm

ADD_SUB = ["infer", "add_sub", "-i", "INPUT0=1,2,3,4", "-i", "INPUT1=10,20,30,40"]


def outputs_of(answer: dict) -> dict[str, dict]:
    return {o["name"]: o for o in answer["outputs"]}


# -- health -------------------------------------------------------------------------------


def test_health(run_cli: RunCli) -> None:
    for check in ("live", "ready"):
        done = run_cli("health", check)
        assert (done.code, done.stdout, done.stderr) == (0, "", "")
    assert run_cli("health", "ready", "--model", "add_sub", "--wait", "5").code == 0
    missing = run_cli("health", "ready", "-m", "nope", "--json")
    assert missing.code == 1
    assert missing.json() == {
        "check": "ready",
        "model": "nope",
        "healthy": False,
        "reason": "model 'nope' is not in the repository of the server at "
        + missing.stderr.split(" of the server at ", 1)[1].strip(),
    }
    (line,) = missing.stderr.splitlines()
    assert line.startswith("not healthy: model 'nope' is not in the repository of the server")
    assert run_cli("health", "ready", "-m", "nope", "--quiet").stderr == ""


def test_health_of_a_version_the_model_lacks_says_so(run_cli: RunCli, triton: Server) -> None:
    # it said "model 'add_sub' is not ready: READY"
    done = run_cli("health", "ready", "-m", "add_sub", "--model-version", "7")
    assert (done.code, done.stdout) == (1, "")
    assert done.stderr.strip() == (
        f"not healthy: model 'add_sub' has no version 7 in the repository of the server "
        f"at {triton.url} (versions: 1)"
    )
    assert run_cli("health", "ready", "-m", "add_sub", "--model-version", "1").code == 0


# -- infer --------------------------------------------------------------------------------


def test_infer_add_sub_table_and_json(run_cli: RunCli) -> None:
    table = run_cli(*ADD_SUB)
    assert table.code == 0, table.stderr
    assert "OUTPUT0" in table.stdout and "[11., 22., 33., 44.]" in table.stdout
    assert "[ -9., -18., -27., -36.]" in table.stdout
    answer = run_cli(*ADD_SUB, "--json").json()
    outputs = outputs_of(answer)
    assert outputs["OUTPUT0"] == {
        "name": "OUTPUT0",
        "datatype": "FP32",
        "shape": [4],
        "data": [11.0, 22.0, 33.0, 44.0],
    }
    assert outputs["OUTPUT1"]["data"] == [-9.0, -18.0, -27.0, -36.0]
    assert answer["model_name"] == "add_sub" and answer["model_version"] == "1"


def test_infer_bytes(run_cli: RunCli) -> None:
    done = run_cli("infer", "identity_bytes", "--input", 'INPUT0=["hello", "world"]')
    assert done.code == 0 and '["hello", "world"]' in done.stdout
    answer = run_cli("infer", "identity_bytes", "-i", 'INPUT0=["é", ""]', "--json").json()
    assert outputs_of(answer)["OUTPUT0"] == {
        "name": "OUTPUT0",
        "datatype": "BYTES",
        "shape": [2],
        "data": ["é", ""],
        "encoding": "utf-8",
    }


def test_infer_table_shows_values_as_they_are(run_cli: RunCli) -> None:
    """Text that looks like rich markup or an emoji code is printed, not interpreted."""
    done = run_cli("infer", "identity_bytes", "-i", 'INPUT0=["[bold]x", ":thumbs_up:", "a[/]"]')
    assert done.code == 0, done.stderr
    assert '["[bold]x", ":thumbs_up:", "a[/]"]' in done.stdout
    inf = run_cli("infer", "add_sub", "-i", "INPUT0=inf,nan,3,4", "-i", "INPUT1=1,2,3,4")
    assert inf.code == 0, inf.stderr
    assert "[inf, nan,  6.,  8.]" in inf.stdout


def test_infer_non_utf8_bytes_come_back_as_base64(invoke: Invoke, tmp_path: Path) -> None:
    (tmp_path / "blob").write_bytes(b"\xff\x00\x01")
    result = invoke("infer", "identity_bytes", "-i", f"INPUT0=@{tmp_path / 'blob'}", "--json")
    output = outputs_of(json.loads(result.output))["OUTPUT0"]
    assert output["encoding"] == "base64"
    assert base64.b64decode(output["data"][0]) == b"\xff\x00\x01"


def test_infer_batching_model_gets_the_batch_dimension(invoke: Invoke) -> None:
    values = ",".join(str(i) for i in range(32))
    result = invoke("infer", "simple", "-i", f"INPUT0={values}", "-i", f"INPUT1={values}", "--json")
    assert result.exit_code == 0, result.output
    out = outputs_of(json.loads(result.output))
    assert out["OUTPUT0"]["shape"] == [2, 16]
    assert out["OUTPUT0"]["data"] == [2 * i for i in range(32)]
    assert out["OUTPUT1"]["data"] == [0] * 32


IDENTITY_VALUES = {
    "BOOL": ("true,false,1", [True, False, True]),
    "UINT8": ("0,255", [0, 255]),
    "UINT16": ("0,65535", [0, 65535]),
    "UINT32": ("0,4294967295", [0, 4294967295]),
    "UINT64": ("0,18446744073709551615", [0, 18446744073709551615]),
    "INT8": ("-128,127", [-128, 127]),
    "INT16": ("-32768,32767", [-32768, 32767]),
    "INT32": ("-2147483648,2147483647", [-2147483648, 2147483647]),
    "INT64": (
        "-9223372036854775808,9223372036854775807",
        [-9223372036854775808, 9223372036854775807],
    ),
    "FP16": ("1.5,-2", [1.5, -2.0]),
    "FP32": ("0.25,1e10", [0.25, 1e10]),
    "FP64": ("nan,inf,0.1", ["NaN", "Infinity", 0.1]),
    "STRING": ('["a", "b c"]', ["a", "b c"]),
    "BF16": ("1,-2.5", [1.0, -2.5]),
}


@pytest.mark.parametrize("binary", ["--binary", "--no-binary"])
@pytest.mark.parametrize("datatype", sorted(IDENTITY_VALUES))
def test_infer_every_datatype(invoke: Invoke, datatype: str, binary: str) -> None:
    text, expected = IDENTITY_VALUES[datatype]
    result = invoke(
        "infer",
        "identity_all",
        "-i",
        f"IN_{datatype}={text}",
        "-o",
        f"OUT_{datatype}",
        binary,
        "--json",
    )
    if datatype in ("BF16", "FP16") and binary == "--no-binary":
        # Triton takes half-precision tensors as binary data only (tritonclient refuses
        # BF16 in JSON itself): one error line either way.
        assert result.exit_code == 1 and datatype in result.output
        assert len(result.output.strip().splitlines()) == 1
        return
    assert result.exit_code == 0, result.output
    output = outputs_of(json.loads(result.output))[f"OUT_{datatype}"]
    assert output["datatype"] == ("BYTES" if datatype == "STRING" else datatype)
    assert output["data"] == expected


def test_infer_outputs_parameters_and_version(invoke: Invoke) -> None:
    result = invoke(*ADD_SUB, "-o", "OUTPUT1", "--model-version", "1", "--json")
    assert [o["name"] for o in json.loads(result.output)["outputs"]] == ["OUTPUT1"]
    upper = invoke("infer", "text_echo", "-i", "text_input=hi", "-p", "upper=true", "--json")
    assert outputs_of(json.loads(upper.output))["text_output"]["data"] == ["HI"]


def test_infer_files_save_and_repeat(invoke: Invoke, tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(4, dtype=np.float32))
    (tmp_path / "b.json").write_text("[1, 1, 1, 1]")
    result = invoke(
        "infer",
        "add_sub",
        "-i",
        f"INPUT0=@{tmp_path / 'a.npy'}",
        "-i",
        f"INPUT1=@{tmp_path / 'b.json'}",
        "--save",
        str(tmp_path / "out"),
        "--repeat",
        "3",
        "--json",
    )
    answer = json.loads(result.output)
    assert answer["timing"]["requests"] == 3
    assert sorted(Path(p).name for p in answer["saved"]) == ["OUTPUT0.npy", "OUTPUT1.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "OUTPUT0.npy"), [1, 2, 3, 4])
    table = invoke(
        "infer",
        "identity_bytes",
        "-i",
        "INPUT0=x,y",
        "--save",
        str(tmp_path / "bytes"),
        "--repeat",
        "2",
    )
    assert "2 requests: mean" in table.output and "saved " in table.output
    saved = np.load(tmp_path / "bytes" / "OUTPUT0.npy")  # no pickle needed
    assert saved.tolist() == [b"x", b"y"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["infer", "nope", "-i", "X=1"],
            1,
            "Error: Request for unknown model: 'nope' is not found (HTTP 404)",
        ),
        (
            ["infer", "add_sub", "-i", "INPUT0=1,2,3", "-i", "INPUT1=1,2,3,4"],
            2,
            "Error: shape mismatch: input 'INPUT0' expects [4], got 3 values",
        ),
        (
            ["infer", "add_sub", "-i", "INPUT9=1"],
            2,
            "Error: model 'add_sub' has no input 'INPUT9' (inputs: INPUT0, INPUT1)",
        ),
        (
            ["infer", "add_sub", "-i", "INPUT0=1,2,3,4", "-i", "INPUT1=1,2,3,4", "-o", "X"],
            2,
            "Error: model 'add_sub' has no output 'X' (outputs: OUTPUT0, OUTPUT1)",
        ),
        (
            ["infer", "error_model", "-i", "MODE=0"],
            1,
            "Error: intentional internal error (HTTP 500)",
        ),
        (
            ["infer", "error_model", "-i", "MODE=1"],
            1,
            "Error: intentional invalid argument (HTTP 400)",
        ),
    ],
)
def test_infer_errors_are_one_line(
    run_cli: RunCli, args: list[str], code: int, message: str
) -> None:
    done = run_cli(*args)
    assert (done.code, done.stdout) == (code, "")
    assert done.stderr.strip() == message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("IN_FP16=1e10", "10000000000.0 is out of range for FP16 [-65504, 65504]"),
        ("IN_FP16=1,-65520", "-65520 is out of range for FP16 [-65504, 65504]"),
        ("IN_FP16=[100000]", "100000 is out of range for FP16 [-65504, 65504]"),
        ("IN_FP32=1e300", "1e+300 is out of range for FP32 [-3.40282e+38, 3.40282e+38]"),
        ("IN_BF16=1e39", "1e+39 is out of range for BF16 [-3.38953e+38, 3.38953e+38]"),
        ("IN_FP64=1e400", "1e400 is out of range for FP64 [-1.79769e+308, 1.79769e+308]"),
        ("IN_FP64=[-1e400]", "-1e400 is out of range for FP64"),
        ("IN_FP64=1" + "0" * 400, "is out of range for FP64"),
        ("IN_INT64=1e400", "1e400 is out of range for INT64"),
        ("IN_INT8=@{npy_i64}", "holds 300, out of range for INT8 [-128, 127]"),
        ("IN_FP16=@{npy_f64}", "holds 70000.0, out of range for FP16 [-65504, 65504]"),
    ],
)
def test_infer_values_out_of_range_are_usage_errors(
    run_cli: RunCli, tmp_path: Path, value: str, message: str
) -> None:
    np.save(tmp_path / "i64.npy", np.array([1, 300], dtype=np.int64))
    np.save(tmp_path / "f64.npy", np.array([1.0, 70000.0]))
    value = value.format(npy_i64=tmp_path / "i64.npy", npy_f64=tmp_path / "f64.npy")
    done = run_cli("infer", "identity_all", "-i", value)
    assert (done.code, done.stdout) == (2, ""), done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"Error: input '{value.partition('=')[0]}': ") and message in line


def test_infer_values_at_the_edge_of_a_float_range_are_sent(run_cli: RunCli) -> None:
    # 65519 rounds to FP16's largest value; infinities typed as such are values too.
    answer = run_cli(
        "infer",
        "identity_all",
        "-i",
        "IN_FP16=65519,-inf",
        "-i",
        "IN_FP64=Infinity,1e308",
        "--json",
    ).json()
    assert outputs_of(answer)["OUT_FP16"]["data"] == [65504.0, "-Infinity"]
    assert outputs_of(answer)["OUT_FP64"]["data"] == ["Infinity", 1e308]


def test_infer_missing_required_input_is_caught_before_sending(run_cli: RunCli) -> None:
    def counts() -> tuple[int, int]:
        (entry,) = run_cli("model", "stats", "add_sub", "--json").json()["model_stats"]
        stats = entry["inference_stats"]
        return stats["success"]["count"], stats["fail"]["count"]

    before = counts()
    done = run_cli("infer", "add_sub", "-i", "INPUT0=1,2,3,4")
    assert (done.code, done.stdout) == (2, "")
    assert done.stderr.strip() == (
        "Error: model 'add_sub' needs input 'INPUT1' (give -i INPUT1=...)"
    )
    assert counts() == before  # nothing reached the server
    # optional inputs may be left out
    assert run_cli("infer", "identity_all", "-i", "IN_INT32=1,2").code == 0


def test_ctrl_c_during_a_shared_memory_infer_leaves_nothing_registered(
    run_cli: RunCli, triton: Server
) -> None:
    # the server refused the unregistration while the request still used the region:
    # the CLI exited 1 with that error and left the region registered for good
    process = subprocess.Popen(
        [str(SCRIPT), "--url", triton.url, "infer", "slow_model", "-i", "DELAY_MS=3000",
         "--shm", "system"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    time.sleep(1.5)  # the request is in flight (the model answers after 3 s)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert (process.returncode, out) == (130, ""), err
    assert err.splitlines()[-1] == "Error: interrupted", err
    tag = f"triton_cli_{process.pid}_"
    regions = run_cli("shm", "status", "--json").json()["system"]
    assert not [r for r in regions if r["name"].startswith(tag)]
    assert not [f for f in os.listdir("/dev/shm") if f.startswith(tag)]


def test_infer_through_system_shared_memory(run_cli: RunCli, invoke: Invoke) -> None:
    before = set(os.listdir("/dev/shm"))
    answer = run_cli(*ADD_SUB, "--shm", "system", "--repeat", "2", "--json").json()
    assert outputs_of(answer)["OUTPUT0"]["data"] == [11.0, 22.0, 33.0, 44.0]
    values = ",".join(str(i) for i in range(32))
    batched = json.loads(
        invoke(
            "infer",
            "simple",
            "-i",
            f"INPUT0={values}",
            "-i",
            f"INPUT1={values}",
            "--shm",
            "system",
            "--json",
        ).output
    )
    assert outputs_of(batched)["OUTPUT0"]["data"] == [2 * i for i in range(32)]
    # Variable-size outputs (BYTES here) come back over HTTP.
    strings = json.loads(
        invoke(
            "infer", "identity_bytes", "-i", 'INPUT0=["a", "bc"]', "--shm", "system", "--json"
        ).output
    )
    assert outputs_of(strings)["OUTPUT0"]["data"] == ["a", "bc"]
    # An error on the way cleans up too.
    failed = invoke("infer", "error_model", "-i", "MODE=0", "--shm", "system")
    assert failed.exit_code == 1
    left = set(os.listdir("/dev/shm")) - before  # (other processes may come and go)
    assert {name for name in left if name.startswith("triton_cli_")} == set()
    status = json.loads(invoke("shm", "status", "--json").output)
    assert [r for r in status["system"] if r["name"].startswith("triton_cli_")] == []


def test_infer_cuda_shared_memory_without_a_gpu(invoke: Invoke) -> None:
    from tritonhttp.utils import cuda_shared_memory as cudashm

    try:
        region = cudashm.create_shared_memory_region("probe", 64, 0)
    except cudashm.CudaSharedMemoryException:
        pass
    else:
        cudashm.destroy_shared_memory_region(region)
        pytest.skip("a GPU is present (tests/shm covers CUDA regions on GPUs)")
    result = invoke(*ADD_SUB, "--shm", "cuda")
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and len(result.output.strip().splitlines()) == 1
    status = json.loads(invoke("shm", "status", "--json").output)
    assert status["cuda"] == []


# -- generate -----------------------------------------------------------------------------


def test_generate(run_cli: RunCli) -> None:
    done = run_cli("generate", "text_echo", "--text-input", "hello", "-p", "upper=true")
    assert (done.code, done.stdout) == (0, "HELLO\n")
    streamed = run_cli("generate", "text_stream", "-t", "one two three", "--stream")
    assert (streamed.code, streamed.stdout) == (0, "one two three\n")
    events = run_cli("generate", "text_stream", "-t", "one two", "--stream", "--json")
    lines = [json.loads(line) for line in events.stdout.splitlines()]
    assert [e["text_output"] for e in lines] == ["one ", "two"]
    other = run_cli("generate", "identity_bytes", "-i", "INPUT0=hi", "--json")
    assert other.json()["OUTPUT0"] == "hi"


def test_generate_errors(run_cli: RunCli) -> None:
    failed = run_cli("generate", "text_stream", "-t", "", "--stream")
    assert failed.code == 1 and failed.stderr.strip() == "Error: empty text_input (HTTP 400)"
    decoupled = run_cli("generate", "text_stream", "-t", "a b")
    assert decoupled.code == 1 and "exactly 1 response" in decoupled.stderr
    unknown = run_cli("generate", "nope", "-t", "x")
    assert unknown.stderr.strip() == (
        "Error: Request for unknown model: 'nope' is not found (HTTP 404)"
    )


# -- models -------------------------------------------------------------------------------


def test_model_list(run_cli: RunCli) -> None:
    done = run_cli("model", "list")
    assert done.code == 0
    for name in ("add_sub", "simple", "identity_all", "text_stream"):
        assert name in done.stdout
    index = run_cli("model", "list", "--json").json()
    assert {"name": "add_sub", "version": "1", "state": "READY"} in index


def test_model_metadata_config_stats_ready(run_cli: RunCli) -> None:
    metadata = run_cli("model", "metadata", "simple")
    assert metadata.code == 0 and "[-1,16]" in metadata.stdout and "INPUT0" in metadata.stdout
    assert run_cli("model", "metadata", "simple", "--json").json()["inputs"][0]["shape"] == [-1, 16]
    config = run_cli("model", "config", "simple")
    assert config.code == 0 and '"max_batch_size": 8' in config.stdout
    assert run_cli("model", "config", "simple", "--json").json()["max_batch_size"] == 8
    run_cli(*ADD_SUB)
    stats = run_cli("model", "stats", "add_sub")
    assert stats.code == 0 and "add_sub" in stats.stdout
    raw = run_cli("model", "stats", "add_sub", "--json").json()
    assert raw["model_stats"][0]["inference_count"] >= 1
    ready = run_cli("model", "ready", "add_sub")
    assert (ready.code, ready.stdout) == (0, "add_sub: ready\n")
    not_ready = run_cli("model", "ready", "nope", "--json")
    assert not_ready.code == 1 and not_ready.json()["ready"] is False
    missing = run_cli("model", "config", "nope")
    assert missing.code == 1 and "unknown model" in missing.stderr


def test_model_unload_and_load(run_cli: RunCli, invoke: Invoke) -> None:
    try:
        done = run_cli("model", "unload", "text_echo")
        assert (done.code, done.stdout) == (0, "unloaded model 'text_echo'\n")
        assert run_cli("model", "ready", "text_echo").code == 1
    finally:
        loaded = run_cli("model", "load", "text_echo", "--json")
    assert loaded.json() == {"model": "text_echo", "loaded": True}
    assert invoke("model", "ready", "text_echo").exit_code == 0


def test_model_load_with_config_and_files(run_cli: RunCli, tmp_path: Path) -> None:
    config = {
        "backend": "python",
        "input": [{"name": "text_input", "data_type": "TYPE_STRING", "dims": [1]}],
        "output": [{"name": "text_output", "data_type": "TYPE_STRING", "dims": [1]}],
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    source = GENERATE_REPO / "text_echo" / "1" / "model.py"
    try:
        done = run_cli(
            "model",
            "load",
            "uploaded_echo",
            "--config",
            f"@{tmp_path / 'config.json'}",
            "--file",
            f"1/model.py=@{source}",
        )
        assert done.code == 0, done.stderr
        echo = run_cli("generate", "uploaded_echo", "-t", "uploaded")
        assert echo.stdout == "uploaded\n"
    finally:
        assert run_cli("model", "unload", "uploaded_echo").code == 0
    no_config = run_cli("model", "load", "x", "--file", f"1/model.py=@{source}")
    assert no_config.code == 2 and "--file needs --config" in no_config.stderr
    bad = run_cli("model", "load", "x", "--config", "{not json")
    assert bad.code == 2 and "--config is not valid JSON" in bad.stderr
    unknown = run_cli("model", "load", "does_not_exist")
    assert unknown.code == 1 and "failed to load 'does_not_exist'" in unknown.stderr


# -- server, log, trace, shm --------------------------------------------------------------


def test_server_metadata(run_cli: RunCli) -> None:
    done = run_cli("server", "metadata")
    assert done.code == 0 and rt.TRITON_VERSION in done.stdout
    answer = run_cli("server", "metadata", "--json").json()
    assert answer["version"] == rt.TRITON_VERSION and "logging" in answer["extensions"]


def test_log_get_and_set(run_cli: RunCli) -> None:
    assert "log_verbose_level" in run_cli("log", "get").stdout
    try:
        changed = run_cli("log", "set", "log_verbose_level=1", "log_info=off", "--json")
        assert changed.code == 0, changed.stderr
        answer = changed.json()
        assert answer["log_verbose_level"] == 1 and answer["log_info"] is False
        assert run_cli("log", "get", "--json").json()["log_verbose_level"] == 1
    finally:
        run_cli("log", "set", "log_verbose_level=0", "log_info=true")
    bad = run_cli("log", "set", "log_info=maybe")
    assert bad.code == 2 and "takes true or false" in bad.stderr


def test_trace_get_and_set(run_cli: RunCli) -> None:
    assert run_cli("trace", "get", "--json").json()["trace_level"] == ["OFF"]
    changed = run_cli("trace", "set", "-m", "add_sub", "trace_rate=7", "trace_count=3", "--json")
    assert changed.code == 0, changed.stderr
    assert (changed.json()["trace_rate"], changed.json()["trace_count"]) == ("7", "3")
    assert run_cli("trace", "get", "-m", "add_sub", "--json").json()["trace_rate"] == "7"
    assert run_cli("trace", "get", "--json").json()["trace_rate"] == "1000"  # global unchanged
    cleared = run_cli("trace", "set", "-m", "add_sub", "trace_rate=", "trace_count=", "--json")
    assert (cleared.json()["trace_rate"], cleared.json()["trace_count"]) == ("1000", "-1")
    table = run_cli("trace", "get", "-m", "add_sub")
    assert "Trace settings (add_sub)" in table.stdout and "trace_rate" in table.stdout
    refused = run_cli("trace", "set", "trace_file=trace.json")
    assert refused.code == 1 and "(HTTP 501)" in refused.stderr


def test_shm_register_status_unregister(run_cli: RunCli) -> None:
    key = f"/triton_cli_test_{os.getpid()}"
    region = shm.create_shared_memory_region("cli_test_region", key, 64)
    try:
        done = run_cli("shm", "register", "cli_test_region", "--key", key, "--byte-size", "64")
        assert done.code == 0, done.stderr
        status = run_cli("shm", "status", "--json").json()
        assert {"name": "cli_test_region", "key": key, "offset": 0, "byte_size": 64} in status[
            "system"
        ]
        table = run_cli("shm", "status", "--kind", "system")
        assert "cli_test_region" in table.stdout and key in table.stdout
        gone = run_cli("shm", "unregister", "cli_test_region", "--kind", "system", "--json")
        assert gone.json() == {"region": "cli_test_region", "kind": "system", "unregistered": True}
        assert run_cli("shm", "status", "--kind", "system", "--json").json() == {"system": []}
    finally:
        run_cli("shm", "unregister", "cli_test_region", "--kind", "system")
        shm.destroy_shared_memory_region(region)
    bad = run_cli("shm", "register", "r", "--key", "/no_such_region_here", "--byte-size", "8")
    assert bad.stderr.strip() == (
        "Error: Unable to open shared memory region: '/no_such_region_here' (HTTP 500)"
    )
    assert bad.code == 1
    handle = run_cli("shm", "register", "r", "--raw-handle", "!!", "--byte-size", "8")
    assert handle.code == 2 and "not valid base64" in handle.stderr


# -- metrics ------------------------------------------------------------------------------


def test_metrics(run_cli: RunCli, triton: Server) -> None:
    run_cli(*ADD_SUB)
    url = triton.metrics_url
    table = run_cli("metrics", "--metrics-url", url, "--filter", "nv_inference_count.*add_sub")
    assert table.code == 0, table.stderr
    assert "nv_inference_count" in table.stdout and "model=add_sub" in table.stdout
    rows = run_cli("metrics", "--metrics-url", url, "--filter", "add_sub", "--json").json()
    names = {r["name"] for r in rows}
    assert "nv_inference_request_success" in names
    assert all(r["labels"].get("model") == "add_sub" for r in rows)
    count = next(r for r in rows if r["name"] == "nv_inference_count")
    assert count["type"] == "counter" and count["value"] >= 1
    down = run_cli("metrics", "--metrics-url", f"127.0.0.1:{free_port()}")
    assert down.code == 1 and down.stderr.startswith("Error: cannot fetch metrics from")


def test_model_name_completion(triton: Server) -> None:
    from click.shell_completion import ShellComplete
    from tritonhttp_cli import cli

    complete = ShellComplete(cli, {}, "triton-cli", "_TRITON_CLI_COMPLETE")
    names = [c.value for c in complete.get_completions(["--url", triton.url, "infer"], "text_")]
    assert names == ["text_echo", "text_stream"]
    down = [
        c.value
        for c in complete.get_completions(["--url", f"127.0.0.1:{free_port()}", "infer"], "")
    ]
    assert down == []


def test_verbose_traffic_goes_to_stderr(run_cli: RunCli) -> None:
    done = run_cli("--verbose", "--json", "model", "ready", "add_sub")
    assert done.code == 0
    assert done.json() == {"model": "add_sub", "version": "", "ready": True}
    assert "GET /v2/models/add_sub/ready" in done.stderr


def test_headers_are_sent(run_cli: RunCli) -> None:
    done = run_cli("-H", "X-Test: yes", "-H", "X-Other:1", "--verbose", "model", "ready", "add_sub")
    assert done.code == 0
    assert "'X-Test': 'yes'" in done.stderr and "'X-Other': '1'" in done.stderr


def test_infer_at_sign_without_a_path_is_a_usage_error(run_cli: RunCli) -> None:
    done = run_cli("infer", "add_sub", "-i", "INPUT0=@", "-i", "INPUT1=1,2,3,4")
    assert (done.code, done.stdout) == (2, ""), done.stderr
    assert done.stderr.strip() == "Error: input 'INPUT0': '@' names no file (give @PATH)"


def test_infer_save_folder_that_cannot_be_made_fails_before_the_inference(
    run_cli: RunCli, tmp_path: Path
) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    # slow_model would take 3 s: the error comes before any request
    started = time.monotonic()
    done = run_cli(
        "infer", "slow_model", "-i", "DELAY_MS=3000", "--save", str(tmp_path / "a_file" / "out")
    )
    assert (done.code, done.stdout) == (2, ""), done.stderr
    assert done.stderr.startswith(f"Error: --save: cannot create {tmp_path / 'a_file' / 'out'}:")
    assert time.monotonic() - started < 3
