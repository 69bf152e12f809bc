"""``python -m tritonhttp.server`` as a real process: flags, start-up, control modes, shutdown."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tritonhttp.server import _launch

from ._wire import ADD_SUB_IO, exchange

TESTS = Path(__file__).parent.parent
MODELS = TESTS / "models"


def _run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tritonhttp.server", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--model-repository", str(MODELS), "--no-such-flag"],
            "unrecognized arguments: --no-such-flag",
        ),
        (["--model-repository", str(MODELS), "--allow-grpc=true"], "gRPC is not implemented"),
        ([], "--model-repository is required"),
        (["--model-repository=/nonexistent/repo"], "the model repository does not exist"),
        (["--model-repository", __file__], "repository path is not a valid directory"),
        (["--model-repository", str(MODELS), "--http-port=99999"], "99999 is not a port"),
        (["--model-repository", str(MODELS), "--metrics-port=-1"], "-1 is not a port"),
        (["--model-repository", str(MODELS), "--http-port=x"], "invalid int value: 'x'"),
        (
            ["--model-repository", str(MODELS), "--http-restricted-api=model-reposit:k=v"],
            "unknown restricted api 'model-reposit'",
        ),
        (
            [
                "--model-repository",
                str(MODELS),
                "--http-restricted-api=health:a=b",
                "--http-restricted-api=health,trace:c=d",
            ],
            "api 'health' can not be specified in multiple config groups",
        ),
        (["--model-repository", str(MODELS), "--model-control-mode=sometimes"], "invalid choice"),
        (
            ["--model-repository", str(MODELS), "--load-model=add_sub"],
            "Use of '--load-model' requires setting '--model-control-mode=explicit' as well.",
        ),
        (
            [
                "--model-repository",
                str(MODELS),
                "--model-control-mode=explicit",
                "--load-model=*",
                "--load-model=add_sub",
            ],
            "Wildcard model name '*' must be the ONLY startup model if specified at all.",
        ),
        (["--model-repository", str(MODELS), "--strict-readiness=yes"], "expected a boolean"),
        (["--model-repository", str(MODELS), "--strict-readiness=maybe"], "expected a boolean"),
        (
            ["--model-repository", str(MODELS), "--http-busy-wait-us=-5"],
            "--http-busy-wait-us must not be negative",
        ),
    ],
)
def test_bad_flags_are_clear_errors(args: list[str], message: str) -> None:
    result = _run(*args)
    assert result.returncode == 1  # (tritonserver's status for any flag it refuses)
    assert message in result.stderr


def test_startup_table_and_clean_sigterm_during_a_request(tmp_path: Path) -> None:
    server = _launch.start(MODELS)
    try:
        log = server.log()
        for name in ("add_sub", "identity_all", "slow_model"):
            assert f"| {name}" in log
        assert "READY" in log
        assert "Started HTTPService at 127.0.0.1:" in log
        body = json.dumps(
            {"inputs": [{"name": "DELAY_MS", "datatype": "INT32", "shape": [1], "data": [800]}]}
        )
        answers: list[Any] = []
        t = threading.Thread(
            target=lambda: answers.append(
                exchange(server.url, "POST", "/v2/models/slow_model/infer", body)
            )
        )
        t.start()
        time.sleep(0.3)
        server.process.send_signal(signal.SIGTERM)
        t.join(10)
        assert answers and answers[0].status == 200  # the in-flight request finished
        assert server.process.wait(15) == 0
    finally:
        server.stop()


def test_failing_model_at_startup(tmp_path: Path, model_repo: Any) -> None:
    special = model_repo("special")
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(special / "add_sub", repo / "add_sub")
    shutil.copytree(special / "broken_model", repo / "broken_model")
    result = _run(f"--model-repository={repo}", "--http-port=0", "--allow-metrics=false")
    assert result.returncode == 1
    assert "failed to load all models" in result.stderr
    with _launch.running(repo, "--exit-on-error=false", wait_ready=False) as server:
        assert exchange(server.url, "GET", "/v2/health/ready").status == 400
        assert exchange(server.url, "GET", "/v2/models/add_sub/ready").status == 200
    with _launch.running(repo, "--exit-on-error=false", "--strict-readiness=false") as server:
        assert exchange(server.url, "GET", "/v2/health/ready").status == 200


def test_poll_mode_follows_the_repository(tmp_path: Path, model_repo: Any) -> None:
    special = model_repo("special")
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copytree(special / "add_sub", repo / "add_sub")
    with _launch.running(repo, "--model-control-mode=poll", "--repository-poll-secs=0.2") as server:
        assert exchange(server.url, "POST", "/v2/repository/models/add_sub/load").status == 503
        shutil.copytree(special / "multi_ver", repo / "multi_ver")
        deadline = time.monotonic() + 10
        while exchange(server.url, "GET", "/v2/models/multi_ver/ready").status != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        shutil.rmtree(repo / "add_sub")
        while exchange(server.url, "GET", "/v2/models/add_sub/ready").status != 400:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_explicit_mode_file_overrides_stay_in_their_temp_copy(
    tmp_path: Path, model_repo: Any
) -> None:
    import base64

    special = model_repo("special")

    outside = tmp_path / "escaped.py"
    with _launch.running(special, "--model-control-mode=explicit") as server:
        cfg = (special / "add_sub" / "config.pbtxt").read_text()
        model = base64.b64encode((special / "add_sub" / "1" / "model.py").read_bytes()).decode()
        override = json.dumps(
            {
                "name": "add_sub",
                "backend": "python",
                **ADD_SUB_IO,
            }
        )
        assert cfg
        for bad in ("../escaped.py", "2/../../x.py", "a\\..\\b"):
            body = json.dumps({"parameters": {"config": override, f"file:{bad}": model}})
            r = exchange(server.url, "POST", "/v2/repository/models/add_sub/load", body)
            assert r.status == 500
            assert r.json() == {
                "error": "failed to load 'add_sub', failed to poll from model repository"
            }
        # an absolute path names a file inside the copy, as in Triton (no version folder
        # there, so no version to serve)
        for absolute in ("/abs.py", f"{outside}"):
            body = json.dumps({"parameters": {"config": override, f"file:{absolute}": model}})
            r = exchange(server.url, "POST", "/v2/repository/models/add_sub/load", body)
            assert r.status == 400
            assert "at least one version must be available" in r.json()["error"]
        assert not outside.exists()
        assert not Path("/abs.py").exists()
        body = json.dumps({"parameters": {"config": override, "file:2/model.py": model}})
        assert (
            exchange(server.url, "POST", "/v2/repository/models/add_sub/load", body).status == 200
        )
        meta = json.loads(exchange(server.url, "GET", "/v2/models/add_sub").body)
        assert meta["versions"] == ["2"]


def test_huge_declared_sizes_and_garbage_never_hurt(bundled_server: Any) -> None:
    head = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [4],
                    "parameters": {"binary_data_size": 2**63},
                }
            ]
        }
    ).encode()
    r = exchange(
        bundled_server.url,
        "POST",
        "/v2/models/add_sub/infer",
        head,
        {"Inference-Header-Content-Length": str(len(head))},
    )
    assert r.status == 400
    assert b"expecting" in r.body
    shape = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [2**40, 2**40],
                    "parameters": {"binary_data_size": 16},
                }
            ]
        }
    ).encode()
    r = exchange(
        bundled_server.url,
        "POST",
        "/v2/models/add_sub/infer",
        shape + b"x" * 16,
        {"Inference-Header-Content-Length": str(len(shape))},
    )
    assert r.status == 400
    for junk in (b"\xff\xfe\x00garbage", b"{" * 10000, os.urandom(4096)):
        r = exchange(bundled_server.url, "POST", "/v2/models/add_sub/infer", junk)
        assert r.status in (400, 500)
    import socket

    host, port = bundled_server.url.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: 1099511627776\r\n\r\n" + b"x" * 1000
        )
        reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 400"), reply
    assert b"larger than the server's limit" in reply
    assert exchange(bundled_server.url, "GET", "/v2/health/live").status == 200


def test_log_file_and_iso8601(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with _launch.running(MODELS, f"--log-file={log}", "--log-format=ISO8601"):
        pass
    text = log.read_text()
    assert "Started HTTPService" in text
    first = text.splitlines()[0]
    assert first[4] == "-" and first[10] == "T" and first[19] == "Z", first


#: starts the server (same process, by exec) with the soft open-files limit lowered to 256
_LOW_NOFILE_LAUNCH = (
    "import os, resource, sys\n"
    "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'tritonhttp.server', *sys.argv[1:]])\n"
)


def _open_files_limits(pid: int) -> tuple[str, str]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return soft, hard
    raise AssertionError("no 'Max open files' line")


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="needs Linux /proc")
def test_start_raises_the_open_files_soft_limit() -> None:
    from tritonhttp.server._server import OPEN_FILES_CAP
    from tritonhttp.testing._process import free_ports

    port, metrics_port = free_ports(2)
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _LOW_NOFILE_LAUNCH,
            f"--model-repository={MODELS}",
            "--model-control-mode=explicit",  # nothing to load: a quick start
            f"--http-port={port}",
            f"--metrics-port={metrics_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "the server exited"
            try:
                if exchange(f"127.0.0.1:{port}", "GET", "/v2/health/live").status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        soft, hard = _open_files_limits(process.pid)
        expected = OPEN_FILES_CAP if hard == "unlimited" else min(int(hard), OPEN_FILES_CAP)
        assert int(soft) == expected  # started with 256
    finally:
        process.terminate()
        process.wait(30)


@pytest.mark.skipif(sys.platform == "win32", reason="a shell-script interpreter")
def test_launch_runs_the_server_under_the_interpreter_given(tmp_path: Path) -> None:
    # (backend_bench.py --python compares interpreter builds with this)
    marker = tmp_path / "used"
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\necho "$@" > "{marker}"\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    with _launch.running(MODELS, "--model-control-mode=explicit", python=str(wrapper)) as server:
        assert exchange(server.url, "GET", "/v2/health/live").status == 200
        assert server.args[0] == str(wrapper)
    assert marker.read_text().startswith("-m tritonhttp.server ")
