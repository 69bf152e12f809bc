"""Cancellation from the asyncio client reaches the model, through our server, in both
isolation modes: cancelling the task awaiting a call, a ``client_timeout``, and leaving
a ``generate_stream`` iteration close the connection at once; the model sees
``is_cancelled()``, a queued request never runs, and the client keeps working.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from client._cancel_repo import has_mark, wait_mark
from client.test_cancellation import Served, _inputs, served  # noqa: F401  (fixture)

import tritonhttp.aio as aioclient
from tritonhttp._errors import ReadTimeout

_ids = itertools.count(1000)


async def _wait_mark(where: Served, what: str, ident: int, timeout: float = 30.0) -> bool:
    return await asyncio.to_thread(wait_mark, where.marks, what, ident, timeout)


def test_cancelling_the_task_cancels_the_request(served: Served) -> None:  # noqa: F811
    running, queued = next(_ids), next(_ids)

    async def main() -> None:
        async with aioclient.InferenceServerClient(served.url) as client:
            first = asyncio.ensure_future(client.infer("cancellable", _inputs(running, 20)))
            assert await _wait_mark(served, "started", running)
            second = client.async_infer("cancellable", _inputs(queued, 20))
            await asyncio.to_thread(served.wait_pending, "cancellable", 1)
            second.cancel()
            await asyncio.to_thread(served.wait_pending, "cancellable", 0)
            first.cancel()
            for task in (first, second):
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert await _wait_mark(served, "cancelled", running, timeout=10)
            result = await client.infer("cancellable", _inputs(next(_ids), 0))
            assert result.as_numpy("OUT") is not None

    asyncio.run(main())
    assert not has_mark(served.marks, "started", queued)
    assert not has_mark(served.marks, "finished", running)


def test_a_client_timeout_cancels_the_request(served: Served) -> None:  # noqa: F811
    ident = next(_ids)

    async def main() -> None:
        async with aioclient.InferenceServerClient(served.url) as client:
            with pytest.raises(ReadTimeout):
                await client.infer("cancellable", _inputs(ident, 20), client_timeout=1.0)
            assert await _wait_mark(served, "cancelled", ident, timeout=10)
            assert await client.is_server_live()

    asyncio.run(main())


def test_leaving_a_generate_stream_tells_the_response_sender(served: Served) -> None:  # noqa: F811
    ident = next(_ids)

    async def main() -> list[object]:
        events = []
        async with aioclient.InferenceServerClient(served.url) as client:
            stream = client.generate_stream("cancellable_stream", {"ID": ident, "SECONDS": 20})
            async with stream:
                async for event in stream:
                    events.append(event["OUT"])
                    if len(events) == 3:
                        break
            assert await _wait_mark(served, "cancelled", ident, timeout=10)
            assert await client.is_server_live()
        return events

    assert asyncio.run(main()) == [ident] * 3
    assert not has_mark(served.marks, "finished", ident)
