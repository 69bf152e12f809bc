"""``--http-busy-wait-us``: polling for a quick client's next request never costs an answer.

The server is started with an exaggerated poll (0.3 s) so that every request below lands
while it polls: the next request of the same connection, a request on another open
connection, and a request on a connection opened during the poll (not among the polled
sockets: answered once the poll ends) must all be answered, correctly.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tritonhttp.server import _launch

MODELS = Path(__file__).resolve().parent.parent / "models"

BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]},
]}).encode()  # fmt: skip


def _infer(conn: http.client.HTTPConnection) -> None:
    """One add_sub request on ``conn`` (kept alive), its answer checked."""
    conn.request("POST", "/v2/models/add_sub/infer", body=BODY)
    reply = conn.getresponse()
    body = reply.read()
    assert reply.status == 200, body
    outputs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
    assert outputs == {"OUTPUT0": [2.0, 3.0, 4.0, 5.0], "OUTPUT1": [0.0, 1.0, 2.0, 3.0]}


@pytest.fixture(scope="module")
def polling_server(bundled_server_factory: Callable[..., _launch.BundledServer]) -> Any:
    return bundled_server_factory(
        MODELS, "--python-isolation=in-process", "--http-busy-wait-us=300000"
    )


def test_requests_during_the_poll_are_all_answered(polling_server: Any) -> None:
    host, port = polling_server.url.split(":")

    def connect() -> http.client.HTTPConnection:
        return http.client.HTTPConnection(host, int(port), timeout=10)

    t0 = time.perf_counter()
    first = connect()  # the baseline: a new connection's request, no poll running
    try:
        _infer(first)
    finally:
        first.close()
    baseline = time.perf_counter() - t0
    a, b = connect(), connect()
    try:
        for _ in range(3):  # back to back: the server polls after each answer
            _infer(a)
        _infer(b)  # another open connection, during the poll
        _infer(a)
        t0 = time.perf_counter()
        c = connect()  # a new connection, not among the polled ones
        try:
            _infer(c)
        finally:
            c.close()
        # at most one poll's delay (0.3 s) more than the baseline, never a hang
        assert time.perf_counter() - t0 < 2 * baseline + 2 * 0.3
    finally:
        a.close()
        b.close()
