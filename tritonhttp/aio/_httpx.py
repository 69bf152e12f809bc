"""Transport over a caller-supplied ``httpx.AsyncClient`` (proxies, auth, mocks, ASGI).

The request is the one the sans-IO core prepared (method, target, header lines, body);
httpx only moves it. Its default ``Accept-Encoding`` is removed (the core decodes only
what it asked for) and the body is read raw, as sent. The httpx client stays the
caller's: closing the tritonhttp client does not close it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from .._errors import (
    ConnectError,
    ConnectTimeout,
    PoolTimeout,
    ProtocolError,
    ReadTimeout,
    TimeoutError_,
    TransportError,
    _Reset,
    transport_error,
)
from .._protocol import Prepared, Response, ServerAddress
from ._timeouts import Limits

__all__ = ["HttpxStream", "HttpxTransport"]

_T = TypeVar("_T")
_DEADLINE_TEXT = "failed to talk to {}: timed out (request deadline)"


def _os_cause(exc: BaseException) -> OSError | None:
    """The most telling ``OSError`` behind an httpx error (one with an errno, if any)."""
    found: OSError | None = None
    cause: BaseException | None = exc
    for _ in range(10):
        if cause is None:
            break
        if isinstance(cause, OSError):
            if cause.errno is not None or isinstance(cause, TimeoutError):
                return cause
            found = found or cause
        cause = cause.__cause__ or cause.__context__
    return found


class HttpxTransport:
    """Sends prepared requests through an ``httpx.AsyncClient``."""

    def __init__(self, client: Any, address: ServerAddress) -> None:
        import httpx

        if not isinstance(client, httpx.AsyncClient):
            raise TypeError(f"http_client must be an httpx.AsyncClient, got {type(client)!r}")
        self._httpx = httpx
        self._client = client
        self._origin = f"{address.scheme}://{address.host_header}"
        self._url = address.url

    def _error(self, exc: Exception) -> TransportError:
        httpx = self._httpx
        text = f"failed to talk to {self._url}: {exc or type(exc).__name__}"
        if isinstance(exc, httpx.ConnectTimeout):
            return ConnectTimeout(f"failed to connect to {self._url}: timed out")
        if isinstance(exc, httpx.PoolTimeout):
            return PoolTimeout(f"no free connection to {self._url} (pool timeout)")
        if isinstance(exc, httpx.ReadTimeout):
            return ReadTimeout(f"{text} (read timeout)")
        if isinstance(exc, httpx.TimeoutException):
            return TimeoutError_(text)
        cause = _os_cause(exc)
        if isinstance(exc, httpx.ConnectError):
            if cause is not None:
                return transport_error(cause, self._url, connecting=True)
            return ConnectError(f"failed to connect to {self._url}: {exc}")
        if isinstance(exc, httpx.RemoteProtocolError):
            return _Reset(text) if "closed" in str(exc).lower() else ProtocolError(text)
        if cause is not None:
            return transport_error(cause, self._url, connecting=False)
        return TransportError(text)

    def _build(self, prepared: Prepared, limits: Limits) -> Any:
        httpx = self._httpx
        fields = prepared.fields
        assert fields is not None  # the context is built with fields=True
        body = prepared.body
        content: bytes | None = None
        if prepared.method != "GET":
            content = bytes(body[0]) if len(body) == 1 else b"".join(body)
        own = self._client.timeout
        timeout = httpx.Timeout(
            connect=own.connect if limits.connect is None else limits.connect,
            read=own.read if limits.read is None else limits.read,
            write=own.write if limits.read is None else limits.read,
            pool=own.pool if limits.pool is None else limits.pool,
        )
        request = self._client.build_request(
            prepared.method,
            self._origin + prepared.target,
            content=content,
            headers=[(n.encode(), v.encode()) for n, v in fields],  # values: UTF-8
            timeout=timeout,
        )
        if not any(name.lower() == "accept-encoding" for name, _ in fields):
            request.headers.pop("accept-encoding", None)
        return request

    async def _send(self, prepared: Prepared, limits: Limits) -> Any:
        request = self._build(prepared, limits)
        try:
            return await self._client.send(request, stream=True)
        except self._httpx.TransportError as e:
            raise self._error(e) from e

    @staticmethod
    def _head(response: Any, body: bytes | bytearray = b"") -> Response:
        headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in response.headers.raw]
        return Response(response.status_code, headers, memoryview(body), True)

    async def request(self, prepared: Prepared, limits: Limits) -> Response:
        """Send a prepared request; the complete response (body as received)."""
        return await _within(self._request(prepared, limits), limits.total, self._url)

    async def _request(self, prepared: Prepared, limits: Limits) -> Response:
        response = await self._send(prepared, limits)
        body = bytearray()
        try:
            async for chunk in _raw_chunks(response):
                body += chunk
        except self._httpx.TransportError as e:
            raise self._error(e) from e
        finally:
            await response.aclose()
        return self._head(response, body)

    async def open_stream(self, prepared: Prepared, limits: Limits) -> HttpxStream:
        """Send a prepared request; a stream of the answer once its head is in."""
        response = await _within(self._send(prepared, limits), limits.total, self._url)
        return HttpxStream(self, response)

    async def aclose(self) -> None:
        """Nothing to do: the httpx client belongs to the caller."""

    def abort_all(self) -> None:
        """Nothing to do: the httpx client belongs to the caller."""

    @property
    def open_connections(self) -> int:
        return 0


class HttpxStream:
    """An httpx response read piece by piece."""

    def __init__(self, transport: HttpxTransport, response: Any) -> None:
        self._transport = transport
        self._response = response
        self._chunks: AsyncIterator[bytes] = _raw_chunks(response)
        self._done = False
        self.head = HttpxTransport._head(response)

    async def read(self) -> bytes:
        """The next piece of the body; ``b""`` at its end."""
        if self._done:
            return b""
        try:
            while True:
                chunk = await self._chunks.__anext__()
                if chunk:
                    return chunk
        except StopAsyncIteration:
            return b""
        except self._transport._httpx.TransportError as e:
            await self.aclose()
            raise self._transport._error(e) from e

    async def aclose(self) -> None:
        """Close the response (httpx closes or releases its connection)."""
        if self._done:
            return
        self._done = True
        await self._response.aclose()

    def abort(self) -> None:
        """Close without awaiting (schedules the close on the running loop)."""
        if self._done:
            return
        self._done = True
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().create_task(self._response.aclose())


async def _raw_chunks(response: Any) -> AsyncIterator[bytes]:
    """The body as received (a response built in memory, e.g. by a mock, is already read)."""
    if response.is_stream_consumed:
        yield response.content
        return
    async for chunk in response.aiter_raw():
        yield chunk


async def _within(work: Awaitable[_T], total: float | None, url: str) -> _T:
    """``await work`` within ``total`` seconds (a ReadTimeout after that)."""
    if total is None:
        return await work
    if sys.version_info >= (3, 11):
        deadline = asyncio.timeout(total)
        try:
            async with deadline:
                return await work
        except TimeoutError:
            if deadline.expired():
                raise ReadTimeout(
                    f"failed to talk to {url}: timed out (request deadline)"
                ) from None
            raise
    try:
        return await asyncio.wait_for(work, total)
    except TimeoutError_:
        raise
    except asyncio.TimeoutError:
        raise ReadTimeout(_DEADLINE_TEXT.format(url)) from None
