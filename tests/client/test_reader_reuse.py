"""A connection reads its responses with one reader: responses of every shape, one after
another on the same connection, with bodies that go around the parser (received
straight into their buffer) and bodies that go through it."""

from __future__ import annotations

import asyncio
import gc

import pytest

import tritonhttp
import tritonhttp.aio as aioclient
from tritonhttp._protocol import ResponseReader

from ._httpd import json_answer, recorder


def _response(body: bytes, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def test_a_reusable_reader_reads_responses_one_after_another() -> None:
    reader = ResponseReader(reusable=True)
    bodies = [b'{"a":1}', b"x" * 100_000, b"", b'{"b":' + b"2" * 5000 + b"}", b"[]"]
    for i, body in enumerate(bodies):
        reader.reset()
        wire = _response(body, f"X-N: {i}\r\n")
        head_end = wire.index(b"\r\n\r\n") + 4
        reader.feed(wire[: head_end + 3])  # the head and a little of the body
        window = reader.body_window()
        if window is not None:  # the rest straight into the body buffer (no parser)
            rest = wire[head_end + 3 :]
            window[: len(rest)] = rest
            reader.body_received(len(rest))
        assert reader.complete
        response = reader.response()
        assert bytes(response.body) == body
        assert response.get("x-n") == str(i)
        assert response.headers[-2:] == [("X-N", str(i)), ("Content-Length", str(len(body)))]


def test_a_one_shot_reader_leaves_no_cycle() -> None:
    gc.collect()
    gc.disable()
    try:
        for _ in range(50):
            reader = ResponseReader()
            reader.feed(_response(b'{"a":1}'))
            assert reader.complete
            reader.response()
        assert gc.collect() == 0
    finally:
        gc.enable()


@pytest.mark.parametrize("size", [10, 70_000, 300_000])
def test_large_and_small_answers_alternate_on_one_connection(size: int) -> None:
    docs = [{"n": i, "pad": "p" * (size if i % 2 else 3)} for i in range(6)]
    answers = [json_answer(d) for d in docs]

    async def aio_run(url: str) -> list[object]:
        async with aioclient.InferenceServerClient(url, conn_limit=1) as client:
            return [await client.get_server_metadata() for _ in docs]

    with recorder(list(answers)) as server:
        with tritonhttp.InferenceServerClient(server.url) as client:
            got = [client.get_server_metadata() for _ in docs]
        assert got == docs
        assert len({s.headers.get("Host") for s in server.seen}) == 1
    with recorder(list(answers)) as server:
        assert asyncio.run(aio_run(server.url)) == docs
    # one connection each time: the same client port for every request
    assert len(server.connections) == 1
