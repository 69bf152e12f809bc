"""generate / generate_stream through both clients, against every server.

tritonclient has neither method, so each scenario asserts the expected answer and that
the sync client and the asyncio client agree (same events, same exceptions). Targets:
real Triton, our server over a socket, and our server in-process (ASGI). The decoupled
model ``text_stream`` (tests/repos/cli_generate) sends one event per word and, with
``fail_at``, an error event in the middle of the stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tritonhttp
import tritonhttp.aio as aio
from tritonhttp import _errors

from .conftest import GENERATE_REPO, MODELS, LoopThread, Target

TEXT = {"text_input": "one two three"}


@pytest.fixture(params=[pytest.param("real", marks=pytest.mark.real_triton), "bundled", "asgi"])
def gtarget(request: pytest.FixtureRequest) -> Target:
    """A server with tests/models and the generate models of tests/repos/cli_generate."""
    name = request.param
    if name == "real":
        return Target(name, request.getfixturevalue("generate_triton").url)
    bundled = request.getfixturevalue("bundled_server_factory")(
        MODELS, f"--model-repository={GENERATE_REPO}"
    )
    if name == "bundled":
        return Target(name, bundled.url)
    in_process = request.getfixturevalue("in_process_factory")(
        f"--model-repository={MODELS}", f"--model-repository={GENERATE_REPO}"
    )
    return Target(name, bundled.url, in_process.http)


def outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except tritonhttp.InferenceServerException as e:
        return ("err", type(e).__name__, str(e), e.status())


async def aoutcome(coro: Any) -> Any:
    try:
        return ("ok", await coro)
    except tritonhttp.InferenceServerException as e:
        return ("err", type(e).__name__, str(e), e.status())


def sync_client(target: Target) -> tritonhttp.InferenceServerClient:
    """The sync client on the target's socket (for asgi: the bundled server's, same code)."""
    return tritonhttp.InferenceServerClient(target.url)


def both(loop: LoopThread, target: Target, method: str, *args: Any, **kw: Any) -> Any:
    """``method`` through the sync and the asyncio client; asserts they agree."""
    with sync_client(target) as sync:
        if method == "generate_stream":

            def collect() -> Any:
                return list(sync.generate_stream(*args, **kw))

            ours_sync = outcome(collect)
        else:
            ours_sync = outcome(lambda: getattr(sync, method)(*args, **kw))

    async def run_aio() -> Any:
        async with target.client() as client:
            if method == "generate_stream":

                async def collect() -> Any:
                    return [e async for e in client.generate_stream(*args, **kw)]

                return await aoutcome(collect())
            return await aoutcome(getattr(client, method)(*args, **kw))

    ours_aio = loop.run(run_aio())
    assert ours_sync == ours_aio
    return ours_aio


def events_of(result: Any) -> list[Any]:
    assert result[0] == "ok", result
    return result[1]


# -- /generate --------------------------------------------------------------------------


def test_generate_returns_the_json_answer(loop: LoopThread, gtarget: Target) -> None:
    result = both(loop, gtarget, "generate", "text_echo", {"text_input": "hi"})
    assert result == (
        "ok",
        {"model_name": "text_echo", "model_version": "1", "text_output": "hi"},
    )
    upper = both(
        loop, gtarget, "generate", "text_echo", {"text_input": "hi", "id": "g1"},
        parameters={"upper": True},
    )  # fmt: skip
    assert upper[1]["text_output"] == "HI" and upper[1]["id"] == "g1"
    versioned = both(loop, gtarget, "generate", "text_echo", {"text_input": "v"}, "1")
    assert versioned[1]["text_output"] == "v"


def test_generate_tensors_from_lists_and_numpy(loop: LoopThread, gtarget: Target) -> None:
    result = both(
        loop,
        gtarget,
        "generate",
        "add_sub",
        {"INPUT0": [1, 2, 3, 4], "INPUT1": np.ones(4, np.float32)},
    )
    assert result[1]["OUTPUT0"] == [2.0, 3.0, 4.0, 5.0]
    assert result[1]["OUTPUT1"] == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("args", "error", "text"),
    [
        (("nope", TEXT), "NotFoundError", "[404] Request for unknown model: 'nope' is not found"),
        (("text_echo", TEXT, "7"), "NotFoundError", None),
    ],
)
def test_generate_server_errors(
    loop: LoopThread, gtarget: Target, args: tuple[Any, ...], error: str, text: str | None
) -> None:
    result = both(loop, gtarget, "generate", *args)
    assert result[:2] == ("err", error)
    if text is not None:
        assert result[2] == text


def test_generate_on_a_decoupled_model_says_use_the_stream(
    loop: LoopThread, gtarget: Target
) -> None:
    result = both(loop, gtarget, "generate", "text_stream", TEXT)
    assert result[:2] == ("err", "BadRequestError")
    assert "exactly 1 response" in result[2] and result[3] == "400"


@pytest.mark.parametrize(
    ("inputs", "parameters", "match"),
    [
        (["text_input"], None, "mapping"),
        ({1: "x"}, None, "strings"),
        ({"text_input": "x", "parameters": {}}, {"a": 1}, "one of them"),
        ({"text_input": "x"}, ["a"], "parameters must be a mapping"),
        ({"text_input": object()}, None, "JSON"),
    ],
)
def test_generate_bad_input_fails_before_sending(
    loop: LoopThread, inputs: Any, parameters: Any, match: str
) -> None:
    with tritonhttp.InferenceServerClient("127.0.0.1:1") as sync:
        for call in (sync.generate, sync.generate_stream):
            with pytest.raises(tritonhttp.InferenceServerException, match=match):
                call("m", inputs, parameters=parameters)
        with pytest.raises(tritonhttp.InferenceServerException, match="version must be a string"):
            sync.generate("m", {"a": 1}, 1)  # type: ignore[arg-type]

    async def go() -> None:
        async with aio.InferenceServerClient("127.0.0.1:1") as client:
            with pytest.raises(tritonhttp.InferenceServerException, match=match):
                await client.generate("m", inputs, parameters=parameters)
            with pytest.raises(tritonhttp.InferenceServerException, match=match):
                client.generate_stream("m", inputs, parameters=parameters)

    loop.run(go())


# -- /generate_stream ----------------------------------------------------------------------


def test_stream_yields_every_response_in_order(loop: LoopThread, gtarget: Target) -> None:
    events = events_of(both(loop, gtarget, "generate_stream", "text_stream", TEXT))
    assert [e["text_output"] for e in events] == ["one ", "two ", "three"]
    assert all(e["model_name"] == "text_stream" for e in events)


def test_stream_of_a_plain_model_has_one_event(loop: LoopThread, gtarget: Target) -> None:
    events = events_of(
        both(loop, gtarget, "generate_stream", "text_echo", {"text_input": "x", "id": "s1"})
    )
    assert events == [
        {"id": "s1", "model_name": "text_echo", "model_version": "1", "text_output": "x"}
    ]


def test_an_error_in_the_middle_of_the_stream(loop: LoopThread, gtarget: Target) -> None:
    parameters = {"fail_at": 2}

    def sync_run() -> tuple[list[str], Any]:
        seen: list[str] = []
        with tritonhttp.InferenceServerClient(gtarget.url) as client:
            try:
                for event in client.generate_stream("text_stream", TEXT, parameters=parameters):
                    seen.append(event["text_output"])
            except tritonhttp.InferenceServerException as e:
                return seen, (type(e), str(e), e.status())
        return seen, None

    async def aio_run() -> tuple[list[str], Any]:
        seen: list[str] = []
        async with gtarget.client() as client:
            try:
                async for event in client.generate_stream(
                    "text_stream", TEXT, parameters=parameters
                ):
                    seen.append(event["text_output"])
            except tritonhttp.InferenceServerException as e:
                assert client._transport.open_connections == 0  # not back in the pool
                return seen, (type(e), str(e), e.status())
        return seen, None

    expected = (["one ", "two "], (_errors.BadRequestError, "[400] failed at word 2", "400"))
    assert sync_run() == expected
    assert loop.run(aio_run()) == expected


def test_a_failing_first_response_is_an_error_status(loop: LoopThread, gtarget: Target) -> None:
    result = both(loop, gtarget, "generate_stream", "text_stream", {"text_input": ""})
    assert result == ("err", "BadRequestError", "[400] empty text_input", "400")
    unknown = both(loop, gtarget, "generate_stream", "nope", TEXT)
    assert unknown[:2] == ("err", "NotFoundError")


def test_stream_errors_surface_on_enter(loop: LoopThread, gtarget: Target) -> None:
    with tritonhttp.InferenceServerClient(gtarget.url) as sync:
        with pytest.raises(_errors.NotFoundError), sync.generate_stream("nope", TEXT):
            pytest.fail("not reached")
        with sync.generate_stream("text_echo", {"text_input": "e"}) as events:
            assert [e["text_output"] for e in events] == ["e"]

    async def go() -> None:
        async with gtarget.client() as client:
            with pytest.raises(_errors.NotFoundError):
                async with client.generate_stream("nope", TEXT):
                    pytest.fail("not reached")
            async with client.generate_stream("text_echo", {"text_input": "e"}) as events:
                assert [e["text_output"] async for e in events] == ["e"]

    loop.run(go())


@pytest.mark.real_triton
def test_events_arrive_as_they_are_produced(loop: LoopThread, generate_triton: Any) -> None:
    parameters = {"delay_ms": 300}

    async def go() -> tuple[float, float]:
        async with aio.InferenceServerClient(generate_triton.url) as client:
            start = time.monotonic()
            stamps = [
                time.monotonic() - start
                async for _ in client.generate_stream("text_stream", TEXT, parameters=parameters)
            ]
        return stamps[0], stamps[-1]

    first, last = loop.run(go())
    assert first < 0.75 and last > 0.8  # the first word came long before the last

    with tritonhttp.InferenceServerClient(generate_triton.url) as sync:
        start = time.monotonic()
        stamps = [
            time.monotonic() - start
            for _ in sync.generate_stream("text_stream", TEXT, parameters=parameters)
        ]
    assert stamps[0] < 0.75 and stamps[-1] > 0.8


# -- closing, cancelling, timeouts (real Triton's decoupled model) -------------------------


SLOW = {"delay_ms": 150, "repeat": 2}  # six words, 0.15 s apart
SILENT = {"delay_ms": 400}  # longer than the read timeouts below


@pytest.mark.real_triton
def test_closing_a_stream_early_closes_its_connection(
    loop: LoopThread, generate_triton: Any
) -> None:
    async def go() -> None:
        async with aio.InferenceServerClient(generate_triton.url) as client:
            pool = client._transport
            stream = client.generate_stream("text_stream", TEXT, parameters=SLOW)
            first = await stream.__anext__()
            assert first["text_output"] == "one "
            assert pool.open_connections == 1
            await stream.aclose()
            assert pool.open_connections == 0
            with pytest.raises(StopAsyncIteration):
                await stream.__anext__()
            # break out of ``async for``: the dropped iterator closes the stream
            async for _event in client.generate_stream("text_stream", TEXT, parameters=SLOW):
                break
            assert pool.open_connections == 0
            # the client goes on working
            assert (await client.generate("text_echo", {"text_input": "x"}))["text_output"] == "x"
            # a stream read to its end gives its connection back for reuse
            done = [e async for e in client.generate_stream("text_stream", TEXT)]
            assert len(done) == 3 and pool.open_connections == 1

    loop.run(go())

    with tritonhttp.InferenceServerClient(generate_triton.url) as sync:
        stream = sync.generate_stream("text_stream", TEXT, parameters=SLOW)
        assert next(stream)["text_output"] == "one "
        start = time.monotonic()
        rest = list(stream)  # the baseline: the rest of a stream, read
        rest_time = time.monotonic() - start
        assert len(rest) == 5 and rest_time >= 5 * 0.15 * 0.9
        stream = sync.generate_stream("text_stream", TEXT, parameters=SLOW)
        assert next(stream)["text_output"] == "one "
        start = time.monotonic()
        stream.close()
        closed_in = time.monotonic() - start
        assert closed_in < 0.3 * rest_time, (closed_in, rest_time)  # not waiting for the rest
        assert sync._pool._idle == []
        for _event in sync.generate_stream("text_stream", TEXT, parameters=SLOW):
            break
        assert sync.generate("text_echo", {"text_input": "y"})["text_output"] == "y"
        assert len(list(sync.generate_stream("text_stream", TEXT))) == 3
        assert len(sync._pool._idle) == 1


@pytest.mark.real_triton
def test_cancelling_the_reader_task_closes_the_stream(
    loop: LoopThread, generate_triton: Any
) -> None:
    async def go() -> None:
        async with aio.InferenceServerClient(generate_triton.url) as client:
            seen: list[Any] = []

            async def read() -> None:
                async for event in client.generate_stream("text_stream", TEXT, parameters=SLOW):
                    seen.append(event)

            task = asyncio.ensure_future(read())
            while not seen:
                await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert client._transport.open_connections == 0

    loop.run(go())


@pytest.mark.real_triton
def test_read_timeout_between_events(loop: LoopThread, generate_triton: Any) -> None:
    async def go() -> None:
        async with aio.InferenceServerClient(generate_triton.url, read_timeout=0.15) as client:
            seen = []
            with pytest.raises(_errors.ReadTimeout):
                async for event in client.generate_stream("text_stream", TEXT, parameters=SILENT):
                    seen.append(event)
            assert seen == []  # the first word is already 0.4 s away
            assert client._transport.open_connections == 0
            # per call: no read limit for this stream
            events = [
                e
                async for e in client.generate_stream(
                    "text_stream",
                    TEXT,
                    parameters={"delay_ms": 100},
                    client_timeout=aio.Timeouts(read=None),
                )
            ]
            assert len(events) == 3

    loop.run(go())

    with tritonhttp.InferenceServerClient(generate_triton.url, network_timeout=0.15) as sync:
        with pytest.raises(_errors.ReadTimeout):
            list(sync.generate_stream("text_stream", TEXT, parameters=SILENT))
        assert sync._pool._idle == []
        assert sync.generate("text_echo", {"text_input": "z"})["text_output"] == "z"
