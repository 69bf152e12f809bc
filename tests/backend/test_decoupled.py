"""Decoupled models and the response sender, against real Triton 2.51 (both isolation
modes): zero or many responses, FINAL flags, errors in a stream, responses from threads
after ``execute`` returned, ``async def execute``, generate's exactly-one rule, /infer's
refusal; and the sender in default mode."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from ._http import exchange, infer_body
from .conftest import REPOS, Start

REPO = REPOS / "backend_decoupled"

#: dec_modes: MODE -> the N values worth sending
DEC_MODES = {0: (0, 1, 3), 1: (1, 3), 2: (1,), 3: (1,), 4: (1,), 5: (1,), 6: (1,), 7: (1,),
             8: (1,), 9: (0, 1, 3), 10: (1,), 11: (1,)}  # fmt: skip
CASES = [(ep, m, n) for ep in ("generate_stream", "generate") for m, ns in DEC_MODES.items()
         for n in ns]  # fmt: skip


@pytest.fixture(scope="module")
def real(real_triton_factory: Any) -> Any:
    return real_triton_factory(REPO)


def _same(a: Any, b: Any) -> None:
    assert (b.status, b.headers.get("content-type"), b.body) == (
        a.status,
        a.headers.get("content-type"),
        a.body,
    )


@pytest.mark.real_triton
@pytest.mark.parametrize(("endpoint", "mode", "n"), CASES)
def test_decoupled_responses_match_triton(
    real: Any, ours: Start, endpoint: str, mode: int, n: int
) -> None:
    body = json.dumps({"MODE": mode, "N": n})
    path = f"/v2/models/dec_modes/{endpoint}"
    _same(exchange(real.url, "POST", path, body), exchange(ours(REPO).url, "POST", path, body))


@pytest.mark.real_triton
@pytest.mark.parametrize("mode", [0, 1, 2, 3, 5, 6])
@pytest.mark.parametrize("endpoint", ["infer", "generate_stream", "generate"])
def test_response_sender_in_default_mode_matches_triton(
    real: Any, ours: Start, endpoint: str, mode: int
) -> None:
    body = (
        infer_body(("MODE", "INT32", [1], [mode]))
        if endpoint == "infer"
        else json.dumps({"MODE": mode})
    )
    path = f"/v2/models/sender_default/{endpoint}"
    _same(exchange(real.url, "POST", path, body), exchange(ours(REPO).url, "POST", path, body))


def test_second_response_in_default_mode_is_an_error(ours: Start) -> None:
    # Triton 2.51 sends the held first response and then the error (on /infer: two JSON
    # documents in one body); here the client gets the error alone.
    r = exchange(ours(REPO).url, "POST", "/v2/models/sender_default/infer",
                 infer_body(("MODE", "INT32", [1], [4])))  # fmt: skip
    assert r.status == 500
    assert "Non-decoupled model cannot send more than one response." in r.json()["error"]


@pytest.mark.real_triton
@pytest.mark.parametrize("path", ["/v2/models/dec_modes/infer", "/v2/models/dec_async/infer"])
def test_infer_refuses_decoupled_models(real: Any, ours: Start, path: str) -> None:
    body = infer_body(("MODE", "INT32", [1], [0]), ("N", "INT32", [1], [1]))
    _same(exchange(real.url, "POST", path, body), exchange(ours(REPO).url, "POST", path, body))
    assert exchange(ours(REPO).url, "POST", path, body).status == 501


def test_stream_events_arrive_as_they_are_sent(ours: Start) -> None:
    """mode 9 sends from a thread, 10 ms apart: the first event comes before the last one
    is sent (the body is streamed, not collected)."""
    import http.client

    server = ours(REPO)
    host, port = server.url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/v2/models/dec_modes/generate_stream",
                     body=json.dumps({"MODE": 9, "N": 20}))  # fmt: skip
        r = conn.getresponse()
        t0 = time.monotonic()
        first = r.readline()
        t_first = time.monotonic() - t0
        rest = r.read()
        t_all = time.monotonic() - t0
    finally:
        conn.close()
    assert first.startswith(b"data: {")
    assert rest.count(b"data: ") == 19
    assert t_all - t_first > 0.1  # 19 more responses at 10 ms each came later


def test_async_decoupled_requests_overlap_in_one_instance(ours: Start) -> None:
    server = ours(REPO)
    results: dict[int, tuple[float, Any]] = {}

    def call(delay: int) -> None:
        t = time.monotonic()
        r = exchange(server.url, "POST", "/v2/models/dec_async/generate_stream",
                     json.dumps({"DELAY_MS": delay}))  # fmt: skip
        results[delay] = (time.monotonic() - t, r.events())

    threads = [threading.Thread(target=call, args=(d,)) for d in (600, 100)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert results[600][1][0]["OUT"] == 600 and results[100][1][0]["OUT"] == 100
    assert results[600][0] >= 0.6 and results[100][0] >= 0.1  # (their own delays)
    # together, not one after the other: queued behind the 600 ms one (which it follows
    # by 50 ms), the 100 ms request would take longer than it
    assert results[100][0] < 0.6 * results[600][0], results
    # an exception in a background coroutine is logged; the request still ends
    r = exchange(server.url, "POST", "/v2/models/dec_async/generate_stream",
                 json.dumps({"DELAY_MS": -1}))  # fmt: skip
    assert (r.status, r.body) == (200, b"")
    deadline = time.monotonic() + 5
    while "background boom" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "KeyError: 'background boom'" in server.log()


def test_send_after_final_is_refused_inside_the_model(ours: Start) -> None:
    server = ours(REPO)
    r = exchange(server.url, "POST", "/v2/models/dec_modes/generate_stream",
                 json.dumps({"MODE": 8, "N": 1}))  # fmt: skip
    assert len(r.events()) == 1
    deadline = time.monotonic() + 5
    text = "after final: Unable to send response. Response sender has been closed."
    while text not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert text in server.log()


def test_client_going_away_cancels_the_request(ours: Start) -> None:
    """The model sees is_cancelled() once the client closed the stream, and the server keeps
    answering."""
    import socket

    server = ours(REPO)
    host, port = server.url.split(":")
    body = json.dumps({"MODE": 12, "N": 1}).encode()
    with socket.create_connection((host, int(port))) as s:
        s.sendall(
            b"POST /v2/models/dec_modes/generate_stream HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
    deadline = time.monotonic() + 10
    while "cancelled after" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "cancelled after" in server.log()
    r = exchange(server.url, "POST", "/v2/models/dec_modes/generate_stream",
                 json.dumps({"MODE": 1, "N": 2}))  # fmt: skip
    assert [e["OUT"] for e in r.events()] == [0, 1]
