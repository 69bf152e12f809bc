"""``tritonhttp.errors``: the typed exceptions under a public name, the very classes the
clients raise."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import tritonhttp
import tritonhttp.aio
from tritonhttp import _errors, errors


def test_every_exception_is_public_and_the_same_class() -> None:
    classes = {n for n in _errors.__all__ if isinstance(getattr(_errors, n), type)}
    assert set(errors.__all__) == classes
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert cls is getattr(_errors, name)
        assert issubclass(cls, tritonhttp.InferenceServerException)


def test_the_clients_raise_them(bundled_server: Any) -> None:
    client = tritonhttp.InferenceServerClient(bundled_server.url)
    with pytest.raises(errors.NotFoundError):
        client.get_model_metadata("no_such_model")
    client.close()
    with pytest.raises(errors.ClientClosedError):
        client.get_server_metadata()


def test_the_asyncio_client_raises_them(bundled_server: Any) -> None:
    async def probe() -> None:
        client = tritonhttp.aio.InferenceServerClient(bundled_server.url)
        try:
            with pytest.raises(errors.NotFoundError):
                await client.get_model_metadata("no_such_model")
        finally:
            await client.close()

    asyncio.run(probe())
