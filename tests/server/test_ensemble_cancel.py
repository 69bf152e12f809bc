"""A client that leaves while its ensemble request waits: the step request queued for it
leaves its step's queue and never runs (our server cancels requests whose HTTP client
went away; real Triton 2.51 runs them to the end, see tests/scheduling/test_cancellation.py).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from scheduling._probe import Probe, body, counts, wait_for

ARGS = ("--model-control-mode=explicit", "--load-model=ens_probe")


def _send_and_leave(p: Probe, model: str, data: str) -> socket.socket:
    host, port = p.url.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    payload = data.encode()
    sock.sendall(
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    return sock


def test_queued_step_of_a_departed_client_never_runs(
    bundled_server_factory: Any, model_repo: Any, tmp_path: Path
) -> None:
    p = Probe(bundled_server_factory(model_repo("ensemble_basic"), *ARGS), tmp_path, "ours")
    before = counts(p.stats("probe"))
    first, hold = p.send_held("ens_probe", "a", batch=None)
    sock = _send_and_leave(p, "ens_probe", body("gone", 0, None))
    p.wait_pending("probe", 1)  # the step request waits for the busy instance
    sock.close()
    p.wait_pending("probe", 0)
    hold.touch()
    assert first.result().status == 200
    wait_for(lambda: counts(p.stats("ens_probe"))["fail"] == 1, "the ensemble never counted it")
    after = counts(p.stats("probe"))
    assert after["execution_count"] - before["execution_count"] == 1
    assert after["fail"] - before["fail"] == 1  # (the step request, cancelled)
    assert counts(p.stats("ens_probe"))["success"] == 1
    assert p.model_metrics("ens_probe")["nv_inference_request_failure[CANCELED]"] == 1
