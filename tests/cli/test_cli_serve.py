"""``triton-cli serve`` running the bundled server (skips until tritonhttp.server exists).

The CLI execs ``python -m tritonhttp.server`` with the flags unchanged, so the process
started here *is* the server: signals reach it directly.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess

import pytest
from cli_helpers import MODELS, SCRIPT, run_script

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
