"""Cancellation from the sync client reaches the model, through our server, in both
isolation modes; and what real Triton does with the same closed connection.

``InferAsyncRequest.cancel()``, a network timeout and leaving a ``generate_stream``
close the request's connection at once. Our server turns that into Triton's
cancellation: a queued request never runs (counted as a failure, reason CANCELED), a
running one sees ``request.is_cancelled()``, a decoupled model's response sender sees
``is_cancelled()``. The connection pool stays usable afterwards.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tritonhttp
from tritonhttp._errors import ReadTimeout, RequestCancelled

from ._cancel_repo import has_mark, wait_mark, write_repo

_ids = itertools.count(1)


class Served:
    def __init__(self, server: Any, marks: Path) -> None:
        self.server = server
        self.marks = marks
        self.url: str = server.url

    def metric(self, name: str, model: str, reason: str | None = None) -> float:
        with urllib.request.urlopen(f"http://{self.server.metrics_url}/metrics") as r:
            text = r.read().decode()
        for line in text.splitlines():
            if not line.startswith(name + "{"):
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
            if labels.get("model") == model and (reason is None or labels.get("reason") == reason):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def wait_pending(self, model: str, n: int) -> None:
        end = time.monotonic() + 20
        while self.metric("nv_inference_pending_request_count", model) != n:
            assert time.monotonic() < end, f"{model} never had {n} pending"
            time.sleep(0.01)


@pytest.fixture(scope="module", params=["process", "in-process"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    from tritonhttp.server import _launch

    repo, marks = write_repo(tmp_path_factory.mktemp("cancel"))
    server = _launch.start(repo, f"--python-isolation={request.param}")
    try:
        yield Served(server, marks)
    finally:
        server.stop()


def _inputs(ident: int, seconds: int) -> list[tritonhttp.InferInput]:
    a = tritonhttp.InferInput("ID", [1], "INT32")
    a.set_data_from_numpy(np.array([ident], dtype=np.int32))
    b = tritonhttp.InferInput("SECONDS", [1], "INT32")
    b.set_data_from_numpy(np.array([seconds], dtype=np.int32))
    return [a, b]


def _stats(client: tritonhttp.InferenceServerClient, model: str) -> dict[str, int]:
    s = client.get_inference_statistics(model)["model_stats"][0]
    return {
        "executions": s["execution_count"],
        "success": s["inference_stats"]["success"]["count"],
        "fail": s["inference_stats"]["fail"]["count"],
    }


def test_cancel_stops_the_running_request_and_drops_the_queued_one(served: Served) -> None:
    running, queued = next(_ids), next(_ids)
    with tritonhttp.InferenceServerClient(served.url, concurrency=3) as client:
        before = _stats(client, "cancellable")
        canceled_before = served.metric("nv_inference_request_failure", "cancellable", "CANCELED")
        first = client.async_infer("cancellable", _inputs(running, 20))
        assert wait_mark(served.marks, "started", running)
        second = client.async_infer("cancellable", _inputs(queued, 20))
        served.wait_pending("cancellable", 1)

        assert second.cancel() is True
        served.wait_pending("cancellable", 0)  # dropped from the queue
        t0 = time.monotonic()
        assert first.cancel() is True
        with pytest.raises(RequestCancelled):
            first.get_result()
        with pytest.raises(RequestCancelled):
            second.get_result()
        assert wait_mark(served.marks, "cancelled", running, timeout=10)
        noticed = time.monotonic() - t0
        # the pool is not poisoned: the next calls work on the same client
        assert client.infer("cancellable", _inputs(next(_ids), 0)).as_numpy("OUT") is not None
        assert client.is_server_live()
        after = _stats(client, "cancellable")
        canceled = served.metric("nv_inference_request_failure", "cancellable", "CANCELED")
    assert not has_mark(served.marks, "started", queued)  # the queued one never ran
    assert not has_mark(served.marks, "finished", running)
    assert noticed < 10  # the model stopped long before its 20 s
    assert after["executions"] - before["executions"] == 2  # the cancelled one and the last
    assert canceled - canceled_before >= 1  # the queued request, counted as Triton does
    assert after["fail"] - before["fail"] >= 1


def test_cancel_reaches_a_request_sent_from_the_callers_thread(served: Served) -> None:
    ident = next(_ids)
    with tritonhttp.InferenceServerClient(served.url) as client:
        client.infer("cancellable", _inputs(next(_ids), 0))  # an idle connection: no thread
        threads = set(threading.enumerate())
        request = client.async_infer("cancellable", _inputs(ident, 20))
        assert wait_mark(served.marks, "started", ident)
        assert set(threading.enumerate()) <= threads  # sent from this thread
        assert request.cancel() is True
        with pytest.raises(RequestCancelled):
            request.get_result()
        assert wait_mark(served.marks, "cancelled", ident, timeout=10)
        assert request.cancel() is False  # over
        assert client.infer("cancellable", _inputs(next(_ids), 0)).as_numpy("OUT") is not None
    assert not has_mark(served.marks, "finished", ident)


def test_a_request_not_yet_sent_is_never_sent(served: Served) -> None:
    busy, waiting = next(_ids), next(_ids)
    with tritonhttp.InferenceServerClient(served.url, concurrency=1, max_greenlets=2) as client:
        first = client.async_infer("cancellable", _inputs(busy, 1))
        second = client.async_infer("cancellable", _inputs(waiting, 1))  # waits for a thread
        assert second.cancel() is True
        # the dropped request gave its max_greenlets place back: this does not block
        third = client.async_infer("cancellable", _inputs(next(_ids), 0))
        assert first.get_result().as_numpy("OUT").tolist() == [busy]
        assert third.get_result().as_numpy("OUT") is not None
        with pytest.raises(RequestCancelled):
            second.get_result()
        assert first.cancel() is False  # already over
    assert not has_mark(served.marks, "started", waiting)


def test_a_network_timeout_cancels_the_request(served: Served) -> None:
    ident = next(_ids)
    with tritonhttp.InferenceServerClient(served.url, network_timeout=1.0) as client:
        with pytest.raises(ReadTimeout):
            client.infer("cancellable", _inputs(ident, 20))
        assert wait_mark(served.marks, "cancelled", ident, timeout=10)
        assert client.infer("cancellable", _inputs(next(_ids), 0)).as_numpy("OUT") is not None


def test_leaving_a_generate_stream_tells_the_response_sender(served: Served) -> None:
    ident = next(_ids)
    with tritonhttp.InferenceServerClient(served.url) as client:
        events = []
        with client.generate_stream("cancellable_stream", {"ID": ident, "SECONDS": 20}) as stream:
            for event in stream:
                events.append(event)
                if len(events) == 3:
                    break
        assert wait_mark(served.marks, "cancelled", ident, timeout=10)
        assert [e["OUT"] for e in events] == [ident] * 3
        assert client.is_server_live()
    assert not has_mark(served.marks, "finished", ident)


# ----------------------------------------------------------------------------- real Triton


@pytest.mark.real_triton
def test_real_triton_runs_a_request_whose_connection_was_closed(
    real_triton_factory: Any, tmp_path: Path
) -> None:
    """Real Triton 2.51 does not cancel on an HTTP disconnect: the model never sees
    ``is_cancelled()`` and runs to its end (only gRPC and the C API cancel there)."""
    repo, marks = write_repo(tmp_path)
    triton = real_triton_factory(repo)
    ident = next(_ids)
    with tritonhttp.InferenceServerClient(triton.url) as client:
        request = client.async_infer("cancellable", _inputs(ident, 2))
        assert wait_mark(marks, "started", ident)
        assert request.cancel() is True
        with pytest.raises(RequestCancelled):
            request.get_result()
        assert wait_mark(marks, "finished", ident, timeout=30)
        assert client.is_server_live()
    assert not has_mark(marks, "cancelled", ident)
