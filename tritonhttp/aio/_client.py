"""The asyncio client: tritonclient.http.aio's ``InferenceServerClient`` on the shared core.

Every coroutine builds its request with the sans-IO core (``tritonhttp._protocol``), the
same code the sync client uses, and sends it through the default asyncio transport
(``._pool``) or a caller-supplied ``httpx.AsyncClient`` (``._httpx``).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import http
import re
import ssl as _ssl
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

from .. import _tracing
from .._client_common import USER_AGENT, ClientCommon, print_sent, result_of
from .._errors import ClientClosedError, InferenceServerException, TransportError
from .._protocol import (
    Call,
    Endpoints,
    Prepared,
    RequestContext,
    Response,
    ServerAddress,
    parse_server_url,
)
from .._routing import ROUND_ROBIN, Retry, ServerSet, check_policy, resolve_retry, server_urls
from .._routing import retry_after as _retry_after
from .._routing import unsent as _unsent
from .._tensors import InferInput, InferRequestedOutput, InferResult
from ._httpx import HttpxTransport
from ._pool import ConnectionPool
from ._stream import AsyncGenerateStream, BodyStream
from ._timeouts import DEFAULT, Limits, Timeouts, _Default, _seconds

__all__ = ["InferenceServerClient"]

_T = TypeVar("_T")

ClientTimeout = float | Timeouts | None | _Default

#: printable ASCII: kept as written in a base path (``%XX`` escapes included)
_PRINTABLE = "".join(map(chr, range(0x21, 0x7F)))


def _ascii_path(address: ServerAddress) -> ServerAddress:
    """``address`` with the non-ASCII characters of its base path percent-encoded as
    UTF-8, as aiohttp (yarl) sent them."""
    base = address.base_path
    if base.isascii():
        return address
    return dataclasses.replace(address, base_path=quote(base, safe=_PRINTABLE))


def _wake(sleeper: asyncio.Future[None]) -> None:
    if not sleeper.done():
        sleeper.set_result(None)


def _authority(url: str) -> str:
    """``[user@]host[:port]`` of ``url`` as written."""
    return re.split("[/?#]", url, maxsplit=1)[0]


def _url_authorization(url: str) -> str | None:
    """The ``Authorization`` value for credentials in ``url`` (``user:password@host``):
    Basic, as aiohttp sent it (percent-decoded, latin-1); None without credentials."""
    if "@" not in url:
        return None
    parts = urlsplit(f"http://{url}")
    if parts.username is None:
        return None
    credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    try:
        return "Basic " + base64.b64encode(credentials.encode("latin-1")).decode("ascii")
    except UnicodeEncodeError as e:
        raise InferenceServerException(msg=f"invalid url credentials: {e}") from None


class _VerboseResponse:
    """Prints a response the way tritonclient's asyncio client (aiohttp) did."""

    def __init__(self, url: str, response: Response) -> None:
        self._url = url
        self._response = response

    def __str__(self) -> str:
        response = self._response
        try:
            reason = http.HTTPStatus(response.status).phrase
        except ValueError:
            reason = "None"
        headers = ", ".join(f"{name!r}: {value!r}" for name, value in response.headers)
        return (
            f"<ClientResponse({self._url}) [{response.status} {reason}]>\n"
            f"<CIMultiDictProxy({headers})>\n"
        )


class InferenceServerClient(ClientCommon):
    """An asyncio client for Triton's HTTP/REST API; a drop-in for
    ``tritonclient.http.aio``'s.

    It may be created outside a running event loop: connections are opened on first use,
    by the loop that uses the client. Use one client per event loop; close it with
    ``await client.close()`` or ``async with``.

    Args:
        url: ``host:port`` with an optional base path; no scheme. A list of such URLs
            spreads the calls over several servers (see ``load_balancing``).
        verbose: print every request and response to stdout.
        conn_limit: the maximum number of simultaneous connections (0: no limit), per
            server.
        conn_timeout: seconds for a whole call (None or 0: no limit), as in
            tritonclient; for ``generate_stream``, until the answer starts. A call that
            runs out of time has its connection closed at once.
        ssl: use HTTPS.
        ssl_context: the ``ssl.SSLContext`` for HTTPS (default: certificate and host
            name verified against the system's trust store).
        connect_timeout: seconds to open a connection (None: no limit).
        read_timeout: the longest silence, in seconds, while an answer is awaited or
            read, e.g. between the events of a stream (None: no limit).
        pool_timeout: seconds to wait for a free connection (None: no limit).
        http_client: an ``httpx.AsyncClient`` to send the requests with (proxies, custom
            auth, mocks, ``httpx.ASGITransport``); it stays yours to close.
        load_balancing: with several servers, ``"round_robin"`` or ``"failover"``; a
            server that refuses a connection or times out connecting is set aside and
            probed again after ``server_backoff``, and the call goes to the next server.
        server_backoff: ``(initial, maximum)`` seconds a server that failed to connect
            is set aside (doubled at each further failure).
        retries: how failed calls are sent again: an int (``Retry(total=n)``) or a
            :class:`tritonhttp.Retry`; 0: never. Each try has the call's time limits.
        propagate_trace_context: send the current OpenTelemetry span's W3C trace
            context with every call (when ``opentelemetry-api`` is in use); a client
            span per call is recorded when a tracer provider is configured.

    Every coroutine also takes a keyword-only ``client_timeout``: seconds for that
    call (replacing ``conn_timeout``), None for no limit, or a :class:`Timeouts`.
    Cancelling the task awaiting a call closes its connection at once.

    Raises:
        InferenceServerException: the URL includes a scheme or an argument is invalid.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        verbose: bool = False,
        conn_limit: int | None = 100,
        conn_timeout: float | None = 60.0,
        ssl: bool = False,
        ssl_context: _ssl.SSLContext | None = None,
        *,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        pool_timeout: float | None = None,
        http_client: Any = None,
        load_balancing: str = ROUND_ROBIN,
        server_backoff: tuple[float, float] = (1.0, 30.0),
        retries: int | Retry = 0,
        propagate_trace_context: bool = True,
    ) -> None:
        super().__init__()
        urls = server_urls(url)
        addresses = [_ascii_path(parse_server_url(u, ssl)) for u in urls]
        address = addresses[0]
        self._address = address
        self._addresses = addresses
        self._verbose = verbose
        if conn_limit is not None and (
            isinstance(conn_limit, bool) or not isinstance(conn_limit, int) or conn_limit < 0
        ):
            raise InferenceServerException(
                msg=f"conn_limit must be a non-negative integer (0: no limit), got {conn_limit!r}"
            )
        total = None if conn_timeout == 0 else _seconds("conn_timeout", conn_timeout)
        self._limits = Limits(
            total,
            _seconds("connect_timeout", connect_timeout),
            _seconds("read_timeout", read_timeout),
            _seconds("pool_timeout", pool_timeout),
        )
        backoff = check_policy(load_balancing, server_backoff)
        self._retry = resolve_retry(retries)
        self._propagate = bool(propagate_trace_context)
        self._transports: list[ConnectionPool | HttpxTransport] = []
        if http_client is not None:
            try:
                self._transports = [HttpxTransport(http_client, a) for a in addresses]
            except TypeError as e:
                raise InferenceServerException(msg=str(e)) from None
        else:
            context = None
            if ssl:
                context = ssl_context if ssl_context is not None else _ssl.create_default_context()
            self._transports = [ConnectionPool(a, conn_limit or None, context) for a in addresses]
        self._transport = self._transports[0]
        self._origins = [f"{a.scheme}://{a.host_header}" for a in addresses]
        self._origin = self._origins[0]
        self._contexts = [
            RequestContext(
                a.base_path,
                a.host_header,
                USER_AGENT,
                verbose,
                fields=http_client is not None,
                # the request line is printed with the host as written, as tritonclient
                printed_origin=f"{a.scheme}://{_authority(u)}",
                head_encoding="utf-8",  # as aiohttp wrote header values
                authorization=_url_authorization(u),
            )
            for u, a in zip(urls, addresses, strict=True)
        ]
        self._context = self._contexts[0]
        self._servers = ServerSet(len(addresses), load_balancing, *backoff)
        # one server, no retries: each call goes straight to the one transport
        self._direct = len(addresses) == 1 and not self._retry.total
        self._closed = False
        self._sleepers: set[asyncio.Future[None]] = set()  # calls waiting out a back-off

    # -- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> InferenceServerClient:
        return self

    async def __aexit__(self, type: Any, value: Any, traceback: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection (idempotent); later calls raise ``ClientClosedError``.

        Calls still running fail with ``ClientClosedError`` at once, those waiting out a
        retry back-off included. A caller-supplied ``httpx.AsyncClient`` is not closed.
        """
        if self._closed:
            return
        self._closed = True
        for sleeper in self._sleepers:
            _wake(sleeper)
        for transport in self._transports:
            await transport.aclose()

    def _abandon(self) -> None:
        for transport in self._transports:
            transport.abort_all()

    def __repr__(self) -> str:
        if len(self._addresses) == 1:
            return f"<tritonhttp.aio.InferenceServerClient {self._address.url}>"
        return f"<tritonhttp.aio.InferenceServerClient {[a.url for a in self._addresses]}>"

    # -- request pipeline ----------------------------------------------------------------

    def _limits_for(self, client_timeout: ClientTimeout) -> Limits:
        if client_timeout is DEFAULT:
            return self._limits
        return self._limits.override(client_timeout)

    def _prepare(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
    ) -> Prepared:
        if self._closed:
            raise ClientClosedError("the client has been closed")
        return self._context.prepare(call, headers, query_params, self._plugin)

    async def _send(self, call: Call, prepared: Prepared, limits: Limits) -> Any:
        if self._closed:
            raise ClientClosedError("the client has been closed")
        response = await self._transport.request(prepared, limits)
        if self._verbose:
            print(_VerboseResponse(self._origin + prepared.target, response))
        return result_of(call, response, self._verbose)

    def _begin(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        limits: Limits,
    ) -> Coroutine[Any, Any, Any]:
        """Check and prepare ``call`` now; the coroutine that sends it and gives its
        result (over the servers, with the retry policy and a client span as set)."""
        span, headers, prepared = self._prepare_traced(call, headers, query_params)
        if self._direct and span is None:
            return self._send(call, prepared, limits)
        return self._send_routed(call, headers, query_params, limits, prepared, span)

    def _prepare_traced(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
    ) -> tuple[Any, Mapping[str, Any] | None, Prepared]:
        """The call's client span (None: no OpenTelemetry in use), its headers with the
        trace context, and the call prepared for the first server (a failure to prepare
        ends the span with the error)."""
        span = None
        if "opentelemetry.trace" in sys.modules:
            span, headers = _tracing.begin(call, headers, self._address, self._propagate)
        try:
            prepared = self._prepare(call, headers, query_params)
        except BaseException as e:
            _tracing.fail(span, e)
            raise
        return span, headers, prepared

    async def _call(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        client_timeout: ClientTimeout,
    ) -> Any:
        limits = self._limits_for(client_timeout)
        return await self._begin(call, headers, query_params, limits)

    async def _send_routed(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        limits: Limits,
        first: Prepared,
        span: Any,
    ) -> Any:
        try:
            response, index, prepared = await self._routed(
                call, headers, query_params, limits, first
            )
        except BaseException as e:
            _tracing.fail(span, e)
            raise
        _tracing.answered(span, response.status, self._addresses[index])
        if self._verbose:
            print(_VerboseResponse(self._origins[index] + prepared.target, response))
        return result_of(call, response, self._verbose)

    async def _routed(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        limits: Limits,
        first: Prepared,
    ) -> tuple[Response, int, Prepared]:
        """Send ``call`` over the servers with the retry policy: the answer, the index
        of the server that gave it and the request it answered."""
        retry = self._retry
        attempt = 0
        while True:
            try:
                outcome = await self._one_round(call, headers, query_params, limits, first)
            except TransportError as e:
                if attempt >= retry.total or not retry.on_error(call, e):
                    raise
                wait = retry.backoff(attempt + 1)
            else:
                status = outcome[0].status
                if attempt >= retry.total or not retry.on_status(call, status):
                    return outcome
                wait = retry.backoff(attempt + 1, _retry_after(outcome[0].get("Retry-After")))
            attempt += 1
            if wait:
                await self._back_off(wait)
            if self._closed:
                raise ClientClosedError("the client has been closed")

    async def _back_off(self, wait: float) -> None:
        """Wait ``wait`` seconds before a retry, or until the client is closed."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        sleeper: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(wait, _wake, sleeper)
        self._sleepers.add(sleeper)
        try:
            await sleeper
        finally:
            timer.cancel()
            self._sleepers.discard(sleeper)

    async def _one_round(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        limits: Limits,
        first: Prepared,
    ) -> tuple[Response, int, Prepared]:
        """One try over the servers: the next server whenever a connection could not
        be opened (nothing was sent)."""
        return await self._on_first_server(
            call, headers, query_params, first, lambda t, p: t.request(p, limits)
        )

    async def _on_first_server(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        first: Prepared,
        send: Callable[[Any, Prepared], Awaitable[_T]],
    ) -> tuple[_T, int, Prepared]:
        """``send(transport, prepared)`` to the servers in the set's order until one takes
        the connection: (its result, the server's index, the request as prepared for
        it). A server that could not be connected to (nothing was sent) is set aside."""
        servers = self._servers
        last: TransportError | None = None
        for index in servers.order():
            try:  # preparing may fail too (a plugin): a probe is then released
                prepared = (
                    first
                    if index == 0
                    else self._contexts[index].prepare(call, headers, query_params, self._plugin)
                )
                result = await send(self._transports[index], prepared)
            except TransportError as e:
                if not _unsent(e):
                    servers.released(index)
                    raise
                servers.failed(index)
                last = e
                continue
            except BaseException:
                servers.released(index)
                raise
            servers.succeeded(index)
            return result, index, prepared
        assert last is not None
        raise last

    async def _probe(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        client_timeout: ClientTimeout,
    ) -> bool:
        try:
            return bool(await self._call(call, headers, query_params, client_timeout))
        except TransportError:
            return False

    # -- health --------------------------------------------------------------------------

    async def is_server_live(
        self,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> bool:
        """Whether the server is live (False also when it cannot be reached)."""
        return await self._probe(Endpoints.server_live(), headers, query_params, client_timeout)

    async def is_server_ready(
        self,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> bool:
        """Whether the server is ready (False also when it cannot be reached)."""
        return await self._probe(Endpoints.server_ready(), headers, query_params, client_timeout)

    async def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> bool:
        """Whether the model (version) is ready (False also when the server is unreachable)."""
        return await self._probe(
            Endpoints.model_ready(model_name, model_version), headers, query_params, client_timeout
        )

    # -- metadata and configuration ------------------------------------------------------

    async def get_server_metadata(
        self,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """The server's metadata (name, version, extensions) as a dict."""
        return await self._call(Endpoints.server_metadata(), headers, query_params, client_timeout)

    async def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """A model's metadata (versions, platform, inputs, outputs) as a dict."""
        return await self._call(
            Endpoints.model_metadata(model_name, model_version),
            headers,
            query_params,
            client_timeout,
        )

    async def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """A model's configuration as a dict."""
        return await self._call(
            Endpoints.model_config(model_name, model_version),
            headers,
            query_params,
            client_timeout,
        )

    async def get_model_repository_index(
        self,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """The models in the repository with their state (a list of dicts)."""
        return await self._call(Endpoints.repository_index(), headers, query_params, client_timeout)

    async def load_model(
        self,
        model_name: str,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> None:
        """Load (or reload) a model; ``config`` is a JSON string, ``files`` path -> bytes."""
        await self._call(
            Endpoints.load_model(model_name, config, files), headers, query_params, client_timeout
        )

    async def unload_model(
        self,
        model_name: str,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        unload_dependents: bool = False,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> None:
        """Unload a model (and, optionally, the models depending on it)."""
        await self._call(
            Endpoints.unload_model(model_name, unload_dependents),
            headers,
            query_params,
            client_timeout,
        )

    async def get_inference_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """Inference statistics of one model (version) or of all models."""
        return await self._call(
            Endpoints.inference_statistics(model_name, model_version),
            headers,
            query_params,
            client_timeout,
        )

    async def update_trace_settings(
        self,
        model_name: str | None = None,
        settings: Mapping[str, Any] = {},
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """Update the global or a model's trace settings; returns the new settings."""
        return await self._call(
            Endpoints.update_trace_settings(model_name, settings),
            headers,
            query_params,
            client_timeout,
        )

    async def get_trace_settings(
        self,
        model_name: str | None = None,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """The global or a model's trace settings."""
        return await self._call(
            Endpoints.trace_settings(model_name), headers, query_params, client_timeout
        )

    async def update_log_settings(
        self,
        settings: Mapping[str, Any],
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """Update the log settings; returns the new settings."""
        return await self._call(
            Endpoints.update_log_settings(settings), headers, query_params, client_timeout
        )

    async def get_log_settings(
        self,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """The log settings."""
        return await self._call(Endpoints.log_settings(), headers, query_params, client_timeout)

    # -- shared memory -------------------------------------------------------------------

    async def get_system_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """Status of one or all registered system shared-memory regions."""
        return await self._call(
            Endpoints.shm_status("system", region_name), headers, query_params, client_timeout
        )

    async def register_system_shared_memory(
        self,
        name: str,
        key: str,
        byte_size: int,
        offset: int = 0,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> None:
        """Register a system shared-memory region (``key`` as used to create it)."""
        await self._call(
            Endpoints.register_system_shm(name, key, byte_size, offset),
            headers,
            query_params,
            client_timeout,
        )

    async def unregister_system_shared_memory(
        self,
        name: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> None:
        """Unregister one (or, with no name, every) system shared-memory region."""
        await self._call(
            Endpoints.unregister_shm("system", name), headers, query_params, client_timeout
        )

    async def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """Status of one or all registered CUDA shared-memory regions."""
        return await self._call(
            Endpoints.shm_status("cuda", region_name), headers, query_params, client_timeout
        )

    async def register_cuda_shared_memory(
        self,
        name: str,
        raw_handle: bytes,
        device_id: int,
        byte_size: int,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> None:
        """Register a CUDA shared-memory region (``raw_handle``: base64 IPC handle)."""
        await self._call(
            Endpoints.register_cuda_shm(name, raw_handle, device_id, byte_size),
            headers,
            query_params,
            client_timeout,
        )

    async def unregister_cuda_shared_memory(
        self,
        name: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> None:
        """Unregister one (or, with no name, every) CUDA shared-memory region."""
        await self._call(
            Endpoints.unregister_shm("cuda", name), headers, query_params, client_timeout
        )

    # -- inference -----------------------------------------------------------------------

    async def infer(
        self,
        model_name: str,
        inputs: Sequence[InferInput],
        model_version: str = "",
        outputs: Sequence[InferRequestedOutput] | None = None,
        request_id: str = "",
        sequence_id: int | str = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int = 0,
        timeout: int | None = None,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        request_compression_algorithm: str | None = None,
        response_compression_algorithm: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> InferResult:
        """Run an inference and return its :class:`InferResult`.

        Arguments as for the sync client's ``infer``: ``timeout`` is Triton's
        server-side timeout in microseconds; the client-side limit is
        ``client_timeout``.

        Raises:
            InferenceServerException: invalid arguments (before anything is sent), or the
                server's error (``str(e)`` is ``"[<status>] <message>"``).
        """
        call = Endpoints.inference(
            model_name,
            inputs,
            model_version,
            outputs,
            request_id,
            sequence_id,
            sequence_start,
            sequence_end,
            priority,
            timeout,
            request_compression_algorithm,
            response_compression_algorithm,
            parameters,
        )
        result: InferResult = await self._call(call, headers, query_params, client_timeout)
        return result

    def async_infer(
        self,
        model_name: str,
        inputs: Sequence[InferInput],
        model_version: str = "",
        outputs: Sequence[InferRequestedOutput] | None = None,
        request_id: str = "",
        sequence_id: int | str = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int = 0,
        timeout: int | None = None,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        request_compression_algorithm: str | None = None,
        response_compression_algorithm: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> asyncio.Task[InferResult]:
        """Start an inference and return at once: an ``asyncio.Task`` of the result.

        The request is built and checked in the caller (errors raise here); ``await``
        the task for the :class:`InferResult`, or cancel it. Needs a running event
        loop. Arguments as for :meth:`infer`.
        """
        call = Endpoints.inference(
            model_name,
            inputs,
            model_version,
            outputs,
            request_id,
            sequence_id,
            sequence_start,
            sequence_end,
            priority,
            timeout,
            request_compression_algorithm,
            response_compression_algorithm,
            parameters,
        )
        limits = self._limits_for(client_timeout)
        loop = asyncio.get_running_loop()
        task: asyncio.Task[InferResult] = loop.create_task(
            self._begin(call, headers, query_params, limits)
        )
        if self._verbose:
            print_sent(request_id)
        return task

    # -- generate extension --------------------------------------------------------------

    async def generate(
        self,
        model_name: str,
        inputs: Mapping[str, Any],
        model_version: str = "",
        parameters: Mapping[str, Any] | None = None,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> Any:
        """Call the model through Triton's generate extension; the parsed JSON answer.

        ``inputs`` maps input names to values (numbers, strings, booleans, lists, numpy
        arrays); other keys become request parameters, as do ``parameters``.

        Raises:
            InferenceServerException: the server's error (also when the model does not
                produce exactly one response: use :meth:`generate_stream` for those).
        """
        return await self._call(
            Endpoints.generate(model_name, model_version, inputs, parameters),
            headers,
            query_params,
            client_timeout,
        )

    def generate_stream(
        self,
        model_name: str,
        inputs: Mapping[str, Any],
        model_version: str = "",
        parameters: Mapping[str, Any] | None = None,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        *,
        client_timeout: ClientTimeout = DEFAULT,
    ) -> AsyncGenerateStream:
        """Stream a model's responses (``/generate_stream``): an async iterator of events.

        Arguments as for :meth:`generate` (checked here). The request is sent when the
        iterator is entered or first advanced; each model response is yielded as soon
        as it arrives; an error (status or event) raises ``InferenceServerException``.
        ``client_timeout`` limits the wait for the answer to start; the read timeout
        applies between events::

            async with client.generate_stream("llm", {"text_input": "hi"}) as events:
                async for event in events:
                    print(event["text_output"], end="")
        """
        call = Endpoints.generate(model_name, model_version, inputs, parameters, stream=True)
        span, headers, first = self._prepare_traced(call, headers, query_params)
        limits = self._limits_for(client_timeout)
        shown = [self._origin + first.target]

        async def start() -> BodyStream:
            if self._closed:
                raise ClientClosedError("the client has been closed")
            try:
                stream, index, prepared = await self._open_stream(
                    call, headers, query_params, limits, first
                )
            except BaseException as e:
                _tracing.fail(span, e)
                raise
            _tracing.answered(span, stream.head.status, self._addresses[index])
            shown[0] = self._origins[index] + prepared.target
            return stream

        return AsyncGenerateStream(
            start, self._verbose, lambda head: _VerboseResponse(shown[0], head)
        )

    async def _open_stream(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        limits: Limits,
        first: Prepared,
    ) -> tuple[BodyStream, int, Prepared]:
        """Open a streamed answer on the first server that takes a connection."""
        return await self._on_first_server(
            call, headers, query_params, first, lambda t, p: t.open_stream(p, limits)
        )
