"""The synchronous client: tritonclient.http's ``InferenceServerClient``, thread-safe.

Every method builds its request with the sans-IO core (``tritonhttp._protocol``) and
sends it through a pool of keep-alive connections (``tritonhttp._transport``). One
client may be shared by any number of threads; ``async_infer`` runs requests on a small
thread pool and returns at once.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import ssl as _ssl
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from . import _tracing
from ._client_common import USER_AGENT, ClientCommon, print_sent, result_of
from ._errors import (
    ClientClosedError,
    InferenceServerException,
    RequestCancelled,
    TransportError,
    raise_error,
)
from ._generate import GenerateStream
from ._protocol import Call, Endpoints, Prepared, RequestContext, Response, parse_server_url
from ._routing import ROUND_ROBIN, Retry, ServerSet, check_policy, resolve_retry, server_urls
from ._routing import retry_after as _retry_after
from ._routing import unsent as _unsent
from ._tensors import InferInput, InferRequestedOutput, InferResult
from ._transport import Cancel, ConnectionPool, InFlight, ResponseStream, make_ssl_context

__all__ = ["InferAsyncRequest", "InferenceServerClient"]

_T = TypeVar("_T")

#: ``get_result(timeout=...)`` longer than this (23 days) waits without a limit: poll()
#: takes at most 2**31 - 1 milliseconds, a lock at most ``threading.TIMEOUT_MAX``.
_LONGEST_WAIT = 2_000_000.0


class InferAsyncRequest:
    """Handle of a request started by :meth:`InferenceServerClient.async_infer`.

    Args:
        greenlet: the ``concurrent.futures.Future`` of the request (the name is
            tritonclient's, whose handle wrapped a greenlet).
        verbose: print the result header when it is read.
    """

    _cancel: Cancel | None = None
    _on_dropped: Callable[[], None] | None = None
    _flight: InFlight | None = None  # sent from the caller's thread (see _sent_now)
    _call: Call
    _span: Any
    _outcome_lock: threading.Lock
    _outcome: InferResult | BaseException | None

    def __init__(
        self,
        greenlet: concurrent.futures.Future[InferResult | BaseException],
        verbose: bool = False,
    ) -> None:
        self._future = greenlet
        self._verbose = verbose

    @classmethod
    def _sent_now(
        cls, flight: InFlight, call: Call, cancel: Cancel, span: Any
    ) -> InferAsyncRequest:
        """A handle whose response waits in its socket until it is asked for (``span``:
        the call's client span, ended when the response is read)."""
        request = cls.__new__(cls)
        request._span = span
        request._verbose = False
        request._flight = flight
        request._call = call
        request._cancel = cancel
        request._outcome_lock = threading.Lock()
        request._outcome = None
        return request

    def _landed(self, flight: InFlight, block: bool, timeout: float | None) -> InferResult:
        if not flight.done:
            wait = timeout if block else 0.0
            if wait is not None and not flight.arrived(wait):
                raise_error("failed to obtain inference response")
        with self._outcome_lock:
            outcome = self._outcome
            if outcome is None:
                outcome = self._interpret(flight)
                self._outcome = outcome
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _interpret(self, flight: InFlight) -> InferResult | BaseException:
        try:
            response = flight.settle()
        except Exception as e:
            _tracing.fail(self._span, e)
            return e
        _tracing.answered(self._span, response.status, flight.address)
        try:
            result: InferResult = result_of(self._call, response, False)
            return result
        except Exception as e:
            return e

    def cancel(self) -> bool:
        """Stop the request: False when it had already finished, else True.

        A request still waiting for a thread is never sent; one on the wire has its
        connection closed at once (the bundled server then cancels it: a queued request
        never runs, a running one sees ``request.is_cancelled()``). ``get_result`` then
        raises ``RequestCancelled`` (an ``InferenceServerException``).
        """
        flight = self._flight
        if flight is not None:
            if flight.done or self._cancel is None:
                return False
            self._cancel.cancel()
            return True
        if self._future.cancel():
            if self._on_dropped is not None:
                self._on_dropped()
            return True
        if self._future.done() or self._cancel is None:
            return False
        self._cancel.cancel()
        return True

    def get_result(self, block: bool = True, timeout: float | None = None) -> InferResult:
        """Wait for and return the :class:`InferResult` (from any thread, any number of times).

        ``block=False`` does not wait; ``timeout`` limits the wait in seconds (the request
        itself goes on).

        Raises:
            InferenceServerException: the result is not ready in time ("failed to obtain
                inference response"), or the server answered with an error.
        """
        if timeout is not None and timeout > _LONGEST_WAIT:
            timeout = None  # inf (or 1e10) raised OverflowError from poll() or a lock
        flight = self._flight
        if flight is not None:
            return self._landed(flight, block, timeout)
        try:
            outcome = self._future.result(timeout=timeout if block else 0)
        except concurrent.futures.TimeoutError:
            raise_error("failed to obtain inference response")
        except concurrent.futures.CancelledError:
            raise RequestCancelled("the request was cancelled") from None
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def __repr__(self) -> str:
        done = self._flight.done if self._flight is not None else self._future.done()
        state = "done" if done else "pending"
        return f"<InferAsyncRequest {state}>"


class InferenceServerClient(ClientCommon):
    """A client for Triton's HTTP/REST API; a drop-in for ``tritonclient.http``'s.

    Unlike tritonclient's, one client can be used from any number of threads: it keeps
    up to ``concurrency`` keep-alive connections and a request waits for a free one.

    Args:
        url: ``host:port`` with an optional base path (``gw:443/triton``); no scheme.
            A list of such URLs spreads the calls over several servers (see
            ``load_balancing``).
        verbose: print every request and response to stdout.
        concurrency: the maximum number of simultaneous connections (and of requests on
            the wire), per server.
        connection_timeout: seconds to establish a connection (None: no limit).
        network_timeout: seconds for each send or receive on a socket (None: no limit);
            a call that runs out of it has its connection closed.
        max_greenlets: the maximum number of outstanding ``async_infer`` requests
            (``async_infer`` blocks while that many are pending); None: unbounded.
        ssl: use HTTPS.
        ssl_options: ``ca_certs``, ``certfile``/``keyfile``, ``ciphers``, ``options``,
            ``verify_flags``, ``server_hostname`` (and ``cert_reqs``).
        ssl_context_factory: a callable returning an ``ssl.SSLContext``.
        insecure: do not check the server's host name against its certificate.
        load_balancing: with several servers, ``"round_robin"`` (each call goes to the
            next healthy server) or ``"failover"`` (to the first healthy one in the
            list). A server that refuses a connection or times out connecting is set
            aside and probed again after ``server_backoff``; a call that could not
            connect goes to the next server. Health and metadata calls answer for the
            server they reached.
        server_backoff: ``(initial, maximum)`` seconds a server that failed to connect
            is set aside (doubled at each further failure).
        retries: how failed calls are sent again: an int (``Retry(total=n)``) or a
            :class:`tritonhttp.Retry`; 0: never (beyond one resend on a fresh
            connection when a kept-alive one turned out closed).
        propagate_trace_context: send the current OpenTelemetry span's W3C
            ``traceparent``/``tracestate`` with every call (when ``opentelemetry-api``
            is in use); a client span per call is recorded when a tracer provider is
            configured.

    Raises:
        InferenceServerException: the URL includes a scheme or is invalid, or another
            argument is invalid.
    """

    _executor: concurrent.futures.ThreadPoolExecutor | None = None

    def __init__(
        self,
        url: str | Sequence[str],
        verbose: bool = False,
        concurrency: int = 1,
        connection_timeout: float | None = 60.0,
        network_timeout: float | None = 60.0,
        max_greenlets: int | None = None,
        ssl: bool = False,
        ssl_options: Mapping[str, Any] | None = None,
        ssl_context_factory: Callable[..., _ssl.SSLContext] | None = None,
        insecure: bool = False,
        *,
        load_balancing: str = ROUND_ROBIN,
        server_backoff: tuple[float, float] = (1.0, 30.0),
        retries: int | Retry = 0,
        propagate_trace_context: bool = True,
    ) -> None:
        super().__init__()
        addresses = [parse_server_url(u, ssl) for u in server_urls(url)]
        address = addresses[0]
        self._address = address
        self._base_uri = address.base_path
        self._host = address.host_header
        self._verbose = verbose
        backoff = check_policy(load_balancing, server_backoff)
        self._retry = resolve_retry(retries)
        self._propagate = bool(propagate_trace_context)
        ssl_context = None
        server_hostname = None
        if ssl:
            try:
                ssl_context = make_ssl_context(ssl_options, ssl_context_factory, insecure)
            except (OSError, ValueError) as e:
                raise InferenceServerException(msg=f"invalid SSL configuration: {e}") from None
            server_hostname = (ssl_options or {}).get("server_hostname")
        try:
            pools = [
                ConnectionPool(
                    a,
                    concurrency,
                    connection_timeout,
                    network_timeout,
                    ssl_context,
                    server_hostname,
                )
                for a in addresses
            ]
        except ValueError as e:
            raise InferenceServerException(msg=str(e)) from None
        self._addresses = addresses
        self._pools = pools
        self._pool = pools[0]
        self._concurrency = concurrency
        if max_greenlets is not None and max_greenlets < 1:
            raise InferenceServerException(msg="max_greenlets must be a positive integer or None")
        self._pending = threading.BoundedSemaphore(max_greenlets) if max_greenlets else None
        self._executor_lock = threading.Lock()
        self._contexts = [
            RequestContext(a.base_path, a.host_header, USER_AGENT, verbose) for a in addresses
        ]
        self._context = self._contexts[0]
        self._servers = ServerSet(len(addresses), load_balancing, *backoff)
        # one server, no retries: each call goes straight to the one pool
        self._direct = len(addresses) == 1 and not self._retry.total
        # async_infer may send from the caller's thread (not when it must print, or when
        # max_greenlets counts requests until they are read by a thread of their own)
        self._inline = self._direct and not verbose and self._pending is None
        self._closed = False
        self._closing = threading.Event()  # set by close(): ends retry back-offs at once
        # async_infer requests waiting out a back-off (close() wakes them)
        self._sleepers: set[Cancel] = set()
        self._sleepers_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> InferenceServerClient:
        return self

    def __exit__(self, type: Any, value: Any, traceback: Any) -> None:
        self.close()

    def _abandon(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False)
        for pool in self._pools:
            pool.drop_inflight()
            pool.close()

    def __repr__(self) -> str:
        if len(self._addresses) == 1:
            return f"<InferenceServerClient {self._address.url}>"
        return f"<InferenceServerClient {[a.url for a in self._addresses]}>"

    def close(self) -> None:
        """Wait for outstanding ``async_infer`` requests (as tritonclient does), then close
        all connections; every other call still in progress ends at once.

        ``async_infer`` requests keep their answers (each wait bounded by
        ``network_timeout``); one waiting out a retry back-off ends at once. A call another
        thread is making (waiting for its answer or for a free connection) and a
        ``generate_stream`` being read raise ``ClientClosedError`` (a ``RuntimeError``).
        Idempotent; afterwards every call raises ``ClientClosedError``.
        """
        if self._closed:
            return
        self._closed = True
        self._closing.set()  # blocking calls waiting out a back-off
        with self._sleepers_lock:
            sleepers = list(self._sleepers)
        for cancel in sleepers:
            cancel.wake()
        for pool in self._pools:
            pool.settle_all()  # async_infer responses still in their sockets
        with self._executor_lock:
            executor = self._executor
        if executor is not None:
            executor.shutdown(wait=True)
        for pool in self._pools:
            pool.close()  # shuts down the sockets of the exchanges still in progress

    # -- request pipeline ----------------------------------------------------------------

    def _call(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        queued: bool = False,
        cancel: Cancel | None = None,
    ) -> Any:
        """Send ``call`` and return its result (see ``_protocol.interpret``).

        ``queued``: an async_infer request accepted before close(), which waits for it;
        ``cancel``: lets another thread stop the request.
        """
        if self._closed and not queued:
            raise ClientClosedError("the client has been closed")
        span = None
        if "opentelemetry.trace" in sys.modules:  # the application uses OpenTelemetry
            span, headers = _tracing.begin(call, headers, self._address, self._propagate)
        if self._direct and span is None:
            prepared = self._context.prepare(call, headers, query_params, self._plugin)
            response = self._pool.request(
                prepared.head,
                prepared.body,
                prepared.size,
                idempotent=prepared.idempotent,
                cancel=cancel,
            )
        else:
            try:
                response, index = self._routed(call, headers, query_params, cancel)
            except BaseException as e:
                _tracing.fail(span, e)
                raise
            _tracing.answered(span, response.status, self._addresses[index])
        if self._verbose:
            print(response)
        return result_of(call, response, self._verbose)

    def _send_to(
        self,
        index: int,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        cancel: Cancel | None,
    ) -> Response:
        prepared = self._contexts[index].prepare(call, headers, query_params, self._plugin)
        return self._pools[index].request(
            prepared.head,
            prepared.body,
            prepared.size,
            idempotent=prepared.idempotent,
            cancel=cancel,
        )

    def _routed(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        cancel: Cancel | None,
    ) -> tuple[Response, int]:
        """Send ``call`` over the servers with the retry policy: the answer, and the
        index of the server that gave it."""
        retry = self._retry
        attempt = 0
        while True:
            wait = None
            try:
                response, index = self._one_round(call, headers, query_params, cancel)
            except TransportError as e:
                if attempt >= retry.total or not retry.on_error(call, e):
                    raise
                wait = retry.backoff(attempt + 1)
            else:
                if attempt >= retry.total or not retry.on_status(call, response.status):
                    return response, index
                wait = retry.backoff(attempt + 1, _retry_after(response.get("Retry-After")))
            attempt += 1
            if cancel is None:  # a blocking call: close() from another thread ends it
                if self._closing.wait(wait) if wait else self._closed:
                    raise ClientClosedError("the client has been closed")
                continue
            if wait:  # cancel() or close() during the back-off ends the wait at once
                self._back_off(cancel, wait)
            if cancel.cancelled:
                raise RequestCancelled("the request was cancelled")
            if self._closed:
                raise ClientClosedError("the client has been closed")

    def _back_off(self, cancel: Cancel, wait: float) -> None:
        """Wait ``wait`` seconds before an ``async_infer`` request's retry, unless it is
        cancelled or the client closed meanwhile."""
        with self._sleepers_lock:
            self._sleepers.add(cancel)
        try:
            if not self._closed:  # else close() may have looked before the add
                cancel.sleep(wait)
        finally:
            with self._sleepers_lock:
                self._sleepers.discard(cancel)

    def _one_round(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        cancel: Cancel | None,
    ) -> tuple[Response, int]:
        """One try over the servers: the next server whenever a connection could not
        be opened (nothing was sent); the answer and its server's index."""
        return self._on_first_server(
            lambda index: self._send_to(index, call, headers, query_params, cancel)
        )

    def _on_first_server(self, send: Callable[[int], _T]) -> tuple[_T, int]:
        """``send(index)`` to the servers in the set's order until one takes the
        connection: its result and the server's index. A server that could not be
        connected to (nothing was sent) is set aside."""
        servers = self._servers
        last: TransportError | None = None
        for index in servers.order():
            try:
                result = send(index)
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
            return result, index
        assert last is not None
        raise last

    def _json(
        self, call: Call, headers: Mapping[str, Any] | None, query_params: Mapping[str, Any] | None
    ) -> Any:
        return self._call(call, headers, query_params)

    def _probe(
        self, call: Call, headers: Mapping[str, Any] | None, query_params: Mapping[str, Any] | None
    ) -> bool:
        try:
            return bool(self._call(call, headers, query_params))
        except TransportError:
            return False

    # -- health --------------------------------------------------------------------------

    def is_server_live(
        self,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> bool:
        """Whether the server is live (False also when it cannot be reached)."""
        return self._probe(Endpoints.server_live(), headers, query_params)

    def is_server_ready(
        self,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> bool:
        """Whether the server is ready (False also when it cannot be reached)."""
        return self._probe(Endpoints.server_ready(), headers, query_params)

    def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> bool:
        """Whether the model (version) is ready (False also when the server is unreachable)."""
        return self._probe(Endpoints.model_ready(model_name, model_version), headers, query_params)

    # -- metadata and configuration ------------------------------------------------------

    def get_server_metadata(
        self,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """The server's metadata (name, version, extensions) as a dict."""
        return self._json(Endpoints.server_metadata(), headers, query_params)

    def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """A model's metadata (versions, platform, inputs, outputs) as a dict."""
        return self._json(
            Endpoints.model_metadata(model_name, model_version), headers, query_params
        )

    def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """A model's configuration as a dict."""
        return self._json(Endpoints.model_config(model_name, model_version), headers, query_params)

    def get_model_repository_index(
        self,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """The models in the repository with their state (a list of dicts)."""
        return self._json(Endpoints.repository_index(), headers, query_params)

    def load_model(
        self,
        model_name: str,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        """Load (or reload) a model; ``config`` is a JSON string, ``files`` path -> bytes."""
        self._json(Endpoints.load_model(model_name, config, files), headers, query_params)

    def unload_model(
        self,
        model_name: str,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
        unload_dependents: bool = False,
    ) -> None:
        """Unload a model (and, optionally, the models depending on it)."""
        self._json(Endpoints.unload_model(model_name, unload_dependents), headers, query_params)

    def get_inference_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """Inference statistics of one model (version) or of all models."""
        return self._json(
            Endpoints.inference_statistics(model_name, model_version), headers, query_params
        )

    def update_trace_settings(
        self,
        model_name: str | None = None,
        settings: Mapping[str, Any] = {},
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """Update the global or a model's trace settings; returns the new settings."""
        return self._json(
            Endpoints.update_trace_settings(model_name, settings), headers, query_params
        )

    def get_trace_settings(
        self,
        model_name: str | None = None,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """The global or a model's trace settings."""
        return self._json(Endpoints.trace_settings(model_name), headers, query_params)

    def update_log_settings(
        self,
        settings: Mapping[str, Any],
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """Update the log settings; returns the new settings."""
        return self._json(Endpoints.update_log_settings(settings), headers, query_params)

    def get_log_settings(
        self,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """The log settings."""
        return self._json(Endpoints.log_settings(), headers, query_params)

    # -- shared memory -------------------------------------------------------------------

    def get_system_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """Status of one or all registered system shared-memory regions."""
        return self._json(Endpoints.shm_status("system", region_name), headers, query_params)

    def register_system_shared_memory(
        self,
        name: str,
        key: str,
        byte_size: int,
        offset: int = 0,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> None:
        """Register a system shared-memory region (``key`` as used to create it)."""
        self._json(
            Endpoints.register_system_shm(name, key, byte_size, offset), headers, query_params
        )

    def unregister_system_shared_memory(
        self,
        name: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> None:
        """Unregister one (or, with no name, every) system shared-memory region."""
        self._json(Endpoints.unregister_shm("system", name), headers, query_params)

    def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """Status of one or all registered CUDA shared-memory regions."""
        return self._json(Endpoints.shm_status("cuda", region_name), headers, query_params)

    def register_cuda_shared_memory(
        self,
        name: str,
        raw_handle: bytes,
        device_id: int,
        byte_size: int,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> None:
        """Register a CUDA shared-memory region (``raw_handle``: base64 IPC handle)."""
        self._json(
            Endpoints.register_cuda_shm(name, raw_handle, device_id, byte_size),
            headers,
            query_params,
        )

    def unregister_cuda_shared_memory(
        self,
        name: str = "",
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> None:
        """Unregister one (or, with no name, every) CUDA shared-memory region."""
        self._json(Endpoints.unregister_shm("cuda", name), headers, query_params)

    # -- inference -----------------------------------------------------------------------

    def infer(
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
    ) -> InferResult:
        """Run an inference and return its :class:`InferResult`.

        ``timeout`` is Triton's server-side request timeout in microseconds (not a client
        timeout). ``request_compression_algorithm`` / ``response_compression_algorithm``:
        ``"gzip"`` or ``"deflate"``. ``parameters``: custom request parameters (reserved
        names are refused). The caller's ``headers`` dict is not modified.

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
        result: InferResult = self._call(call, headers, query_params)
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
    ) -> InferAsyncRequest:
        """Start an inference and return at once; :meth:`InferAsyncRequest.get_result`
        gives the result.

        The request is built (and checked) in the caller; it is sent from a pool of
        ``concurrency`` threads. With ``max_greenlets`` set, this blocks while that many
        requests are outstanding.
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
        if self._closed:
            raise ClientClosedError("the client has been closed")
        cancel = Cancel()
        if self._inline:
            sent = self._send_now(call, headers, query_params, cancel)
            if sent is not None:
                return sent
        headers = dict(headers) if headers else None  # the caller may reuse their dict
        executor = self._executor or self._make_executor()
        pending = self._pending
        if pending is not None:
            pending.acquire()
        try:
            if "opentelemetry.context" in sys.modules:  # the caller's span goes along
                future = executor.submit(
                    contextvars.copy_context().run,
                    self._run_async,
                    call,
                    headers,
                    query_params,
                    cancel,
                )
            else:
                future = executor.submit(self._run_async, call, headers, query_params, cancel)
        except RuntimeError:  # shut down meanwhile
            if pending is not None:
                pending.release()
            raise ClientClosedError("the client has been closed") from None
        if self._verbose:
            print_sent(request_id)
        request = InferAsyncRequest(future, self._verbose)
        request._cancel = cancel
        if pending is not None:  # a request dropped before it ran gives its place back
            request._on_dropped = pending.release
        return request

    def _send_now(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        cancel: Cancel,
    ) -> InferAsyncRequest | None:
        """``async_infer`` without a thread: a small request goes out from this thread on
        an idle connection, and its response is read when first asked for (see
        ``ConnectionPool.send_now``). None when that is not possible at once."""
        spans: list[Any] = []

        def prepare() -> tuple[bytes, list[Any]]:
            sent = headers
            if "opentelemetry.trace" in sys.modules:  # the caller's span is current here
                span, sent = _tracing.begin(call, headers, self._address, self._propagate)
                spans.append(span)
            prepared = self._context.prepare(call, sent, query_params, self._plugin)
            return prepared.head, prepared.body

        try:
            flight = self._pool.send_now(call.size, prepare, cancel)
        except Exception as e:  # a bad header: raised by get_result, as when sent later
            if spans:
                _tracing.fail(spans[0], e)
            done: concurrent.futures.Future[InferResult | BaseException] = (
                concurrent.futures.Future()
            )
            done.set_result(e)
            return InferAsyncRequest(done)
        if flight is None:
            if spans:  # sent nowhere: the thread that sends it records its own span
                _tracing.fail(spans[0], ConnectionAbortedError("not sent on this connection"))
            return None
        return InferAsyncRequest._sent_now(flight, call, cancel, spans[0] if spans else None)

    def _run_async(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        cancel: Cancel,
    ) -> InferResult | BaseException:
        # The outcome is returned, never raised: a TimeoutError raised by the request
        # must not look like get_result's own wait timing out.
        try:
            result: InferResult = self._call(call, headers, query_params, True, cancel)
            return result
        except Exception as e:
            return e
        finally:
            if self._pending is not None:
                self._pending.release()

    # -- generate extension --------------------------------------------------------------

    def generate(
        self,
        model_name: str,
        inputs: Mapping[str, Any],
        model_version: str = "",
        parameters: Mapping[str, Any] | None = None,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> Any:
        """Call the model through Triton's generate extension; the parsed JSON answer.

        ``inputs`` maps input names to values (numbers, strings, booleans, lists,
        numpy arrays); other keys become request parameters, as do ``parameters``.
        The answer holds every output by name plus ``model_name`` and
        ``model_version``.

        Raises:
            InferenceServerException: the server's error (also when the model does not
                produce exactly one response: use :meth:`generate_stream` for those).
        """
        return self._call(
            Endpoints.generate(model_name, model_version, inputs, parameters),
            headers,
            query_params,
        )

    def generate_stream(
        self,
        model_name: str,
        inputs: Mapping[str, Any],
        model_version: str = "",
        parameters: Mapping[str, Any] | None = None,
        headers: Mapping[str, Any] | None = None,
        query_params: Mapping[str, Any] | None = None,
    ) -> GenerateStream:
        """Stream a model's responses (``/generate_stream``): an iterator of parsed events.

        Arguments as for :meth:`generate`. The request is sent when the iterator is
        entered or first advanced; each model response is yielded as soon as it
        arrives. An error (status or event) raises ``InferenceServerException``.
        Close the iterator (or use ``with``) to stop early::

            with client.generate_stream("llm", {"text_input": "hi"}) as events:
                for event in events:
                    print(event["text_output"], end="")
        """
        if self._closed:
            raise ClientClosedError("the client has been closed")
        call = Endpoints.generate(model_name, model_version, inputs, parameters, stream=True)
        span = None
        if "opentelemetry.trace" in sys.modules:
            span, headers = _tracing.begin(call, headers, self._address, self._propagate)
        try:
            first = self._context.prepare(call, headers, query_params, self._plugin)
        except BaseException as e:
            _tracing.fail(span, e)
            raise

        def start() -> ResponseStream:
            if self._closed:
                raise ClientClosedError("the client has been closed")
            try:
                stream, index = self._open_stream(call, headers, query_params, first)
            except BaseException as e:
                _tracing.fail(span, e)
                raise
            _tracing.answered(span, stream.head.status, self._addresses[index])
            return stream

        return GenerateStream(start, self._verbose)

    def _open_stream(
        self,
        call: Call,
        headers: Mapping[str, Any] | None,
        query_params: Mapping[str, Any] | None,
        first: Prepared,
    ) -> tuple[ResponseStream, int]:
        """Open a streamed answer on the first server that takes a connection
        (``first``: the request prepared for the first server)."""

        def send(index: int) -> ResponseStream:
            prepared = first
            if index:
                prepared = self._contexts[index].prepare(call, headers, query_params, self._plugin)
            return self._pools[index].open_stream(
                prepared.head, prepared.body, prepared.size, idempotent=False
            )

        return self._on_first_server(send)

    def _make_executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                if self._closed:
                    raise ClientClosedError("the client has been closed")
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self._concurrency, thread_name_prefix="tritonhttp-async"
                )
            return self._executor
