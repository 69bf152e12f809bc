"""A client that goes away: its queued request never runs (counted as CANCELED), a
running one is flagged for the model (``is_cancelled()``).

Real Triton 2.51 does not act on HTTP disconnects (only gRPC and the C API cancel):
it runs such requests to the end. These tests show both behaviours side by side.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

from ._probe import Probe, body, counts, info, metric_counts, wait_for

pytestmark = pytest.mark.real_triton


def _raw_send(p: Probe, model: str, data: str) -> socket.socket:
    host, port = p.url.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    payload = data.encode()
    sock.sendall(
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: x\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    return sock


def _abandon_queued(p: Probe, model: str, batch: int | None) -> tuple[dict[str, Any], ...]:
    before = counts(p.stats(model)), metric_counts(p, model)
    first, hold = p.send_held(model, "a", batch=batch)
    sock = _raw_send(p, model, body("gone", 0, batch))
    p.wait_pending(model, 1)
    sock.close()
    if p.name == "ours":
        p.wait_pending(model, 0)
    hold.touch()
    assert first.result().status == 200
    wait_for(lambda: p.pending(model) == 0, "queue never drained")
    wait_for(
        lambda: (
            counts(p.stats(model))["success"] + counts(p.stats(model))["fail"]
            >= before[0]["success"] + before[0]["fail"] + 2
        ),
        "the abandoned request was never accounted",
    )
    after = counts(p.stats(model)), metric_counts(p, model)
    return tuple(
        {k: after[i][k] - before[i][k] for k in after[i] if k != "batches"} for i in range(2)
    )


@pytest.mark.parametrize(("model", "batch"), [("cancel_plain", None), ("cancel_dyn", 1)])
def test_a_queued_request_whose_client_left_never_runs(
    probes: dict[str, Probe], model: str, batch: int | None
) -> None:
    ours_stats, ours_metrics = _abandon_queued(probes["ours"], model, batch)
    assert ours_stats["execution_count"] == 1  # only the request that stayed
    assert (ours_stats["success"], ours_stats["fail"]) == (1, 1)
    assert ours_metrics["nv_inference_request_failure[CANCELED]"] == 1
    assert ours_metrics["nv_inference_request_success"] == 1
    triton_stats, triton_metrics = _abandon_queued(probes["triton"], model, batch)
    assert triton_stats["execution_count"] == 2  # Triton runs it anyway
    assert triton_metrics["nv_inference_request_failure[CANCELED]"] == 0


def _abandon_running(p: Probe) -> list[bool]:
    first, hold = p.send_held("cancel_dyn", "z")
    params, mark, hold2 = p.gate()
    sock = _raw_send(p, "cancel_dyn", body("x", 0, 1, params=params))
    p.wait_pending("cancel_dyn", 1)
    stays = p.send("cancel_dyn", "y")
    p.wait_pending("cancel_dyn", 2)
    hold.touch()
    first.result()
    wait_for(mark.exists, "x never started")  # x and y run together now
    sock.close()
    time.sleep(0.3)  # the server notices the closed connection (ours flags x)
    hold2.touch()
    doc = info(stays.result())
    assert doc["ids"] == ["x", "y"]
    cancelled: list[bool] = doc["cancelled"]
    return cancelled


def test_real_triton_does_not_cancel_running_http_requests(probes: dict[str, Probe]) -> None:
    assert _abandon_running(probes["triton"]) == [False, False]


def test_a_running_request_whose_client_left_is_cancelled(probes: dict[str, Probe]) -> None:
    assert _abandon_running(probes["ours"]) == [True, False]
