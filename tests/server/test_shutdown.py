"""SIGTERM side by side on real Triton and ours (both isolation modes): new connections are
refused at once, requests in progress are answered, and a shutdown that outlasts
``--exit-timeout-secs`` cuts off what is left and exits 1."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._real import skip_without_real_triton
from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

from ._wire import Reply, exchange

MODELS = Path(__file__).parent.parent / "models"

Starter = Callable[..., Any]


def _real(*flags: str) -> Any:
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    return rt.start(MODELS, *flags)


def _ours(isolation: str) -> Starter:
    return lambda *flags: _launch.start(MODELS, f"--python-isolation={isolation}", *flags)


@pytest.fixture(
    params=[
        pytest.param(_real, id="real", marks=pytest.mark.real_triton),
        pytest.param(_ours("process"), id="ours-process"),
        pytest.param(_ours("in-process"), id="ours-in-process"),
    ]
)
def start(request: pytest.FixtureRequest) -> Iterator[Starter]:
    started: list[Any] = []

    def starter(*flags: str) -> Any:
        server = request.param(*flags)
        started.append(server)
        return server

    yield starter
    for server in started:
        server.stop()


def _slow(url: str, ms: int) -> Callable[[], Reply | BaseException]:
    """Start a ``slow_model`` request of ``ms`` milliseconds; the returned call joins it."""
    body = json.dumps(
        {"inputs": [{"name": "DELAY_MS", "datatype": "INT32", "shape": [1], "data": [ms]}]}
    )
    outcome: list[Reply | BaseException] = []

    def run() -> None:
        try:
            outcome.append(exchange(url, "POST", "/v2/models/slow_model/infer", body, timeout=30))
        except OSError as e:
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()

    def join() -> Reply | BaseException:
        thread.join(30)
        return outcome[0]

    return join


def _wait(process: subprocess.Popen[bytes], timeout: float) -> tuple[int, float]:
    """The exit status and how long after now the process ended."""
    begun = time.monotonic()
    status = process.wait(timeout)
    return status, time.monotonic() - begun


def test_sigterm_refuses_new_connections_and_answers_requests_in_progress(
    start: Starter,
) -> None:
    server = start("--exit-timeout-secs=20")
    joins = [_slow(server.url, 1500) for _ in range(2)]
    time.sleep(0.5)
    server.process.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    with pytest.raises(ConnectionError):
        exchange(server.url, "GET", "/v2/health/live", timeout=5)
    for join in joins:
        reply = join()
        assert isinstance(reply, Reply) and reply.status == 200, reply
        assert json.loads(reply.body)["outputs"][0]["data"] == [1500]
    status, took = _wait(server.process, 20)
    assert status == 0, server.log()[-2000:]
    assert took < 10


def test_a_shutdown_past_the_exit_timeout_cuts_off_the_rest_and_exits_1(
    start: Starter,
) -> None:
    server = start("--exit-timeout-secs=1")
    join = _slow(server.url, 8000)
    time.sleep(0.5)
    server.process.send_signal(signal.SIGTERM)
    status, took = _wait(server.process, 20)
    assert status == 1
    assert took < 5  # the model's 8 s are not waited for
    assert "failed to stop server: Internal - Exit timeout expired. Exiting immediately." in (
        server.log()
    )
    assert isinstance(join(), ConnectionError)  # the request in progress is cut off
    # no worker process of the server outlives it
    time.sleep(0.5)
    left = subprocess.run(
        ["pgrep", "-f", f"_worker_boot.py .*{server.process.pid}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert left.stdout.strip() == ""
