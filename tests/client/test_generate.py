"""The sync client's generate / generate_stream with scripted servers and the SSE decoder.

Against real Triton and our server both clients are exercised side by side in
``tests/aio/test_generate.py``; here: streams that break, stall or frame events oddly
(the same cases the asyncio client meets in ``tests/aio/test_transport.py``), and the
event-stream decoder under any split of its input.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest
from aio._servers import SSE_HEAD, STREAM_CASES, check_stream_case, event
from hypothesis import given, settings
from hypothesis import strategies as st

import tritonhttp
from tritonhttp import _errors
from tritonhttp._protocol import EventStreamDecoder, generate_body

from ._scripted import OK_JSON, serving


def stream_server(*pieces: bytes) -> Any:
    def handler(conn: socket.socket, index: int, request: bytes) -> bool:
        for piece in pieces:
            conn.sendall(piece)
            time.sleep(0.01)
        return False

    return handler


def collect(client: tritonhttp.InferenceServerClient) -> tuple[list[Any], BaseException | None]:
    seen: list[Any] = []
    try:
        for item in client.generate_stream("m", {"text_input": "x"}):
            seen.append(item)
    except tritonhttp.InferenceServerException as e:
        return seen, e
    return seen, None


@pytest.mark.parametrize(("pieces", "events", "error", "text"), STREAM_CASES)
def test_streams_that_go_wrong_raise_clearly(
    pieces: tuple[bytes, ...], events: list[Any], error: type[Exception] | None, text: str | None
) -> None:
    with (
        serving(stream_server(*pieces)) as server,
        tritonhttp.InferenceServerClient(server.url, network_timeout=5) as client,
    ):
        check_stream_case(*collect(client), events, error, text)


def test_a_stalled_stream_times_out_and_the_connection_is_dropped() -> None:
    stalled = 1.5

    def stall(conn: socket.socket, index: int, request: bytes) -> bool:
        if b"generate_stream" in request:
            conn.sendall(SSE_HEAD + event(b'{"n":1}'))
            time.sleep(stalled)
            return False
        conn.sendall(OK_JSON)
        return True

    with (
        serving(stall) as server,
        tritonhttp.InferenceServerClient(server.url, network_timeout=0.2) as client,
    ):
        start = time.monotonic()
        seen, raised = collect(client)
        assert seen == [{"n": 1}] and isinstance(raised, _errors.ReadTimeout)
        elapsed = time.monotonic() - start
        assert 0.2 * 0.9 <= elapsed < stalled  # its timeout, not the end of the stall
        assert client._pool._idle == []
        assert client.get_server_metadata() == {"name": "ok"}
        assert server.connections == 2


def test_the_request_is_the_generate_extensions() -> None:
    def answer(conn: socket.socket, index: int, request: bytes) -> bool:
        body = b'{"model_name":"m","model_version":"1","out":[1,2]}'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        return True

    with serving(answer) as server, tritonhttp.InferenceServerClient(server.url) as client:
        assert client.generate(
            "my model", {"text_input": "hé", "n": 3}, "2", parameters={"t": 0.5}
        ) == {"model_name": "m", "model_version": "1", "out": [1, 2]}
        request = server.requests[0]
        head, _, body = request.partition(b"\r\n\r\n")
        assert head.startswith(b"POST /v2/models/my%20model/versions/2/generate HTTP/1.1\r\n")
        assert b"\r\nContent-Type: application/json\r\n" in head
        assert json.loads(body) == {"text_input": "hé", "n": 3, "parameters": {"t": 0.5}}


def test_an_error_object_under_200_is_raised() -> None:
    def answer(conn: socket.socket, index: int, request: bytes) -> bool:
        body = b'{"error":"generate expects model to produce exactly 1 response"}'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        return True

    with serving(answer) as server, tritonhttp.InferenceServerClient(server.url) as client:
        with pytest.raises(_errors.BadRequestError, match="exactly 1 response") as info:
            client.generate("m", {"a": 1})
        assert info.value.status() == "400"


def test_generate_body_keeps_order_and_encodes_numpy() -> None:
    import numpy as np

    text = generate_body({"b": np.int64(2), "a": np.arange(3)}, {"z": np.float32(0.5)})
    assert text == '{"b":2,"a":[0,1,2],"parameters":{"z":0.5}}'


# -- the event-stream decoder ---------------------------------------------------------------

payloads = st.lists(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8), max_size=3),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(payloads, st.sampled_from([b"\n", b"\r\n", b"\r"]), st.data())
def test_decoder_handles_any_split_and_line_ending(
    events: list[dict[str, Any]], newline: bytes, data: st.DataObject
) -> None:
    stream = b"".join(
        b": note" + newline + b"data: " + json.dumps(e).encode() + newline + newline for e in events
    )
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = EventStreamDecoder()
    found: list[bytes] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        found += decoder.feed(stream[start:cut])
        start = cut
    decoder.end()
    assert [json.loads(f) for f in found] == events


def test_decoder_rules() -> None:
    decoder = EventStreamDecoder()
    assert decoder.feed(b"data\n\ndata: a\ndata:b\n\nevent: x\n\n:c\n\n") == [b"a\nb"]
    assert decoder.feed(b"data\ndata\n\n") == [b"\n"]
    assert decoder.feed(b"data: half") == []
    with pytest.raises(_errors.ProtocolError, match="middle of an event"):
        decoder.end()
