"""``triton-cli serve`` running the bundled server (skips until tritonhttp.server exists).

The CLI execs ``python -m tritonhttp.server`` with the flags unchanged, so the process
started here *is* the server: signals reach it directly.
"""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import subprocess

import pytest
from cli_helpers import MODELS, SCRIPT, run_script

from tritonhttp.testing._load_log import message_of
from tritonhttp.testing._process import free_ports

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tritonhttp.server") is None,
    reason="the bundled server (tritonhttp.server) is not in this checkout yet",
)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_serve_runs_the_bundled_server(stop_signal: signal.Signals) -> None:
    http_port, metrics_port = free_ports(2)
    url = f"127.0.0.1:{http_port}"
    server = subprocess.Popen(
        [
            str(SCRIPT),
            "serve",
            "--model-repository",
            str(MODELS),
            "--http-address",
            "127.0.0.1",
            "--http-port",
            str(http_port),
            "--metrics-port",
            str(metrics_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert run_script(["--url", url, "health", "ready", "--wait", "60"]).code == 0
        done = run_script(
            [
                "--url",
                url,
                "--json",
                "infer",
                "add_sub",
                "-i",
                "INPUT0=1,2,3,4",
                "-i",
                "INPUT1=10,20,30,40",
            ]
        )
        assert done.code == 0, done.stderr
        assert done.json()["outputs"][0]["data"] == [11.0, 22.0, 33.0, 44.0]
        server.send_signal(stop_signal)
        code = server.wait(timeout=30)
        assert code in (0, -stop_signal, 128 + stop_signal)
        assert run_script(["--url", url, "health", "live"]).code == 1
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        assert server.stderr is not None
        server.stderr.close()


def _start(*flags: str) -> tuple[subprocess.Popen[str], str]:
    http_port, metrics_port = free_ports(2)
    server = subprocess.Popen(
        [str(SCRIPT), "serve", "--model-repository", str(MODELS), "--http-address",
         "127.0.0.1", f"--http-port={http_port}", f"--metrics-port={metrics_port}", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    return server, f"127.0.0.1:{http_port}"


def _read_until(server: subprocess.Popen[str], text: str, timeout: float = 60) -> list[str]:
    """stderr lines up to the first containing ``text``."""
    import threading

    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert server.stderr is not None
        for line in server.stderr:
            lines.append(line)
            if text in line:
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(timeout), "".join(lines)
    return lines


def test_grpc_flags_of_a_tritonserver_command_line_are_accepted_with_a_warning() -> None:
    server, url = _start("--grpc-port", "8001", "--grpc-address=0.0.0.0", "--reuse-grpc-port=1")
    try:
        lines = _read_until(server, "Started HTTPService")
        warnings = [line for line in lines if "gRPC" in line]
        assert len(warnings) == 1, lines
        assert warnings[0].startswith("W")
        assert message_of(warnings[0]).endswith(
            "gRPC is not served (HTTP only): ignoring --grpc-port, --grpc-address, "
            "--reuse-grpc-port"
        )
        assert run_script(["--url", url, "health", "ready"]).code == 0
    finally:
        server.kill()
        server.wait()
        assert server.stderr is not None
        server.stderr.close()


def test_other_unsupported_flags_stay_errors() -> None:
    done = run_script(["serve", "--model-repository", str(MODELS), "--allow-sagemaker=true"])
    assert done.code == 1 and "--allow-sagemaker is not supported" in done.stderr


def test_server_help_gives_every_flag_a_line_and_its_default() -> None:
    done = run_script(["serve", "--", "--help"], env=None)
    assert done.code == 0
    import re

    options = done.stdout.split("options:\n", 1)[1]
    entries = re.split(r"\n(?=  -)", options.strip("\n"))
    flags = [entry.split()[0].rstrip(",") for entry in entries]
    assert "--http-port" in flags and "--python-isolation" in flags
    for entry in entries[1:]:  # (the first is -h, --help)
        assert "default" in entry, entry
    assert "(default: 8000)" in done.stdout


def test_sigint_says_what_it_waits_for_and_a_second_stops_at_once() -> None:
    import threading
    import time

    server, url = _start()
    try:
        _read_until(server, "Started HTTPService")

        def slow() -> None:  # 20 s in execute: the drain would wait for it
            import numpy as np

            import tritonhttp

            delay = tritonhttp.InferInput("DELAY_MS", [1], "INT32")
            delay.set_data_from_numpy(np.array([20000], dtype=np.int32))
            with contextlib.suppress(Exception), tritonhttp.InferenceServerClient(url) as c:
                c.infer("slow_model", [delay])

        sent = time.monotonic()
        threading.Thread(target=slow, daemon=True).start()
        time.sleep(1.5)  # the request is in execute by then (the server is otherwise idle)
        server.send_signal(signal.SIGINT)
        lines = _read_until(server, "in-flight request")
        assert message_of(lines[-1]).endswith(
            "SIGINT: waiting for 1 in-flight request, up to 30 s; Ctrl-C again to stop now"
        ), lines
        server.send_signal(signal.SIGINT)
        code = server.wait(timeout=15)
        assert time.monotonic() - sent < 20  # before the 20 s request could have ended
        assert code == 128 + signal.SIGINT
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        assert server.stderr is not None
        server.stderr.close()
