"""The ASGI application: Triton's routes, in Triton's order, with Triton's answers.

:class:`HttpFrontend` is the application: its dispatch walks :data:`_ROUTES` (at the end of
this module) and answers 403, 405 or 404 where Triton does, and it serves ``/infer`` itself
(reading and parsing the request, tracing, admission, the direct hand-over to a backend
that parses or answers in its own process). The other endpoint families are plain
functions in their own modules: health, metadata, configuration and statistics in
``_info_api.py``, trace and log settings in ``_settings_api.py``, the repository API in
``_repository_api.py``, shared memory in ``_shm_api.py``; ``/generate`` in
``_generate.py``. ``_routes.py`` defines what a route is; ``_infer_io.py`` the ASGI side of
an ``/infer`` (its body read, the model awaited, the answer sent).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Awaitable

from ..core._core import ServerCore
from ..core._errors import BackendError, Code, CoreError
from ..core._model import ModelVersion
from ..core._repo_files import parse_version
from ..core._trace import Trace, trace_queued
from ..core._types import InferRequest
from ..http._extensions import DIRECT, ON_DISCONNECT, Answer, DirectLink
from ._generate import handle_generate
from ._http import JSON, TEXT, Receive, Scope, Send, error_body, send_error, send_response
from ._infer import (
    ParsedInfer,
    answer_spec,
    answerable_elsewhere,
    parse_infer_request,
    pick_encoding,
)
from ._infer_io import (
    finish,
    infer_cancelled_on_leaving,
    infer_watching,
    read_infer_body,
    send_answer,
    traceparent,
)
from ._info_api import (
    health,
    model_config,
    model_metadata,
    model_ready,
    server_health,
    server_metadata,
    statistics,
)
from ._reply import reply_for
from ._repository_api import repository_index, repository_model
from ._routes import Route, endpoint
from ._settings_api import log_settings, trace_settings
from ._shm_api import cuda_shm, system_shm

__all__ = ["HttpFrontend"]

log = logging.getLogger("tritonhttp.server")


def _server_only(body: bytearray | memoryview, header_len: int) -> bool:
    """Whether an infer body's JSON header may ask what only the server does (shared
    memory, classification): such a body is never handed over unparsed."""
    head = body if type(body) is bytearray else bytes(body[:header_len])
    return head.find(b"shared_memory", 0, header_len) >= 0 or (
        head.find(b"classification", 0, header_len) >= 0
    )


def _batch_size_of(body: bytearray | memoryview, header_len: int) -> int:
    """What a dynamic batcher needs to queue an unparsed request: its batch size, the
    first dimension of the first ``"shape"`` in its JSON header (0 when that cannot be
    read so simply: the front then parses the request). The worker that parses the
    request declines it when its batch size is another."""
    head = body if type(body) is bytearray else bytes(body[:header_len])
    at = head.find(b'"shape"', 0, header_len)
    if at < 0:
        return 0
    start = head.find(b"[", at, header_len)
    close = head.find(b"]", start, header_len)
    if start < 0 or close < 0 or head[at + 7 : start].strip() != b":":
        return 0
    comma = head.find(b",", start, close)
    dim = bytes(head[start + 1 : close if comma < 0 else comma]).strip()
    return int(dim) if dim.isdigit() and len(dim) < 10 else 0


_NOT_FOUND = b'{"error":"Not Found"}'
_NOT_ALLOWED = b'{"error":"Method Not Allowed"}'


class HttpFrontend:
    """Triton's HTTP/REST API over a :class:`~tritonhttp.server.core._core.ServerCore`.

    ``restricted`` maps an API category (``health``, ``inference``...) to the
    (header, value) a request must carry; ``forward_pattern`` selects request headers
    forwarded to models as parameters.
    """

    def __init__(
        self,
        core: ServerCore,
        restricted: dict[str, tuple[str, str]] | None = None,
        forward_pattern: str | None = None,
    ) -> None:
        self.core = core
        #: request tracing (its ``active`` flag is the one check an untraced request pays)
        self.tracer = core.tracer
        self.restricted = {
            k: (h.lower().encode(), v.encode()) for k, (h, v) in (restricted or {}).items()
        }
        self.forward = re.compile(forward_pattern, re.IGNORECASE) if forward_pattern else None
        self.in_flight = 0
        self.accepting = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            return
        self.in_flight += 1
        try:
            try:
                await self._route(scope, receive, send)
            except CoreError as e:  # a handler's error, answered as JSON
                await send_error(send, e)
        except ConnectionError:
            pass  # the client went away
        except Exception as e:  # a bug of ours: answer clearly, keep serving
            log.exception("unexpected error handling %s %s", scope.get("method"), scope.get("path"))
            with contextlib.suppress(Exception):  # fails if the response had started
                await send_response(
                    send, 500, error_body(f"internal server error: {type(e).__name__}: {e}"), JSON
                )
        finally:
            self.in_flight -= 1

    def immediate_answer(self, scope: Scope) -> Answer | None:
        """The answer to server liveness or readiness, for the bundled HTTP server to send
        without running the application (see ``_extensions``); None for anything else."""
        if scope["method"] != "GET" or "health" in self.restricted:
            return None
        path = scope.get("raw_path")
        if path == b"/v2/health/live":
            return server_health(self.core, "live")
        if path == b"/v2/health/ready":
            return server_health(self.core, "ready")
        return None

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    # ------------------------------------------------------------------ dispatch

    def _route(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        """The handler call (not yet awaited) that answers this request: that of the first
        entry of :data:`_ROUTES` (at the end of this module) whose path the request's is,
        else the 404 answer."""
        raw_path = scope.get("raw_path")
        path: str = raw_path.decode("latin-1").partition("?")[0] if raw_path else scope["path"]
        for route in _ROUTES:
            pattern = route.pattern
            if pattern is None:
                if path != route.path:
                    continue
                captures: tuple[str | None, ...] = ()
            else:
                if not path.startswith(route.path):
                    continue
                m = pattern.fullmatch(path)
                if m is None:
                    continue
                captures = m.groups(route.absent)
            if scope["method"] in route.methods and route.api not in self.restricted:
                return route.handler(self, scope, receive, send, *captures)
            return self._guarded(route, scope, receive, send, captures)
        return send_response(send, 404, _NOT_FOUND, TEXT, length_first=True)

    def _guarded(
        self,
        route: Route,
        scope: Scope,
        receive: Receive,
        send: Send,
        captures: tuple[str | None, ...],
    ) -> Awaitable[None]:
        """The handler call of ``route`` once the request has passed its checks, in
        Triton's order: the restricted API's header (else 403), then the method (else
        405)."""
        rule = self.restricted.get(route.api)
        if rule is not None:
            header, value = rule
            if not any(k == header and v == value for k, v in scope["headers"]):
                msg = f"This API is restricted, expecting header '{header.decode()}'"
                return send_response(send, 403, error_body(msg), TEXT, length_first=True)
        if scope["method"] not in route.methods:
            if route.text_405:
                return send_response(send, 405, _NOT_ALLOWED, TEXT, length_first=True)
            return send_response(send, 405, _NOT_ALLOWED, JSON)
        return route.handler(self, scope, receive, send, *captures)

    # ------------------------------------------------------------------ inference

    async def _infer(
        self, scope: Scope, receive: Receive, send: Send, name: str, version: str
    ) -> None:
        repo = self.core.repository
        try:
            if version:
                parse_version(version)
            model = repo.get(name, version)
        except CoreError as e:
            await send_error(send, e, TEXT)
            return
        if model.decoupled:
            await send_error(
                send,
                CoreError(
                    "HTTP end point doesn't support models with decoupled transaction policy",
                    Code.UNSUPPORTED,
                ),
                TEXT,
            )
            return
        tracer = self.tracer
        if tracer.active:
            trace = tracer.sample(name, model.version)
            if trace is not None:
                await self._infer_traced(scope, receive, send, model, trace)
                return
        read = await read_infer_body(scope, receive, send)
        if read is None:
            return
        body, header_len, accept = read
        # the answer goes uncompressed (what another process can write itself)
        identity = not accept or pick_encoding(accept) is None
        if (
            model.parses_in_backend
            and self.forward is None
            and identity
            and ON_DISCONNECT in scope
            and not _server_only(body, header_len)
            and await self._infer_unparsed(scope, send, model, body, header_len, accept)
        ):
            return
        parsed = parse_infer_request(body, header_len, model, self.core.shm)
        request = parsed.request
        regions = request.regions
        for region in regions:
            region.users += 1
        try:
            refused = self._admit(scope, model, request)
            if refused is not None:
                await send_error(send, refused, TEXT)
                return
            if ON_DISCONNECT in scope:  # the bundled HTTP server reports a lost client
                link = self._reply_link(scope, model, parsed, identity)
                response = await infer_cancelled_on_leaving(scope, model, request)
                if response.answered:
                    assert link is not None
                    await finish(link, response.rest)
                    return
            else:
                response = await infer_watching(model, request, receive)
            await send_answer(scope, send, model, parsed, response, accept)
        finally:
            for region in regions:
                region.users -= 1

    def _admit(
        self, scope: Scope, model: ModelVersion, request: InferRequest
    ) -> BackendError | None:
        """The forwarded headers put on ``request``, then the model's admission checks:
        None when admitted, else the refusal to answer."""
        if self.forward is not None:
            self._forward_headers(scope, request)
        try:
            model.admit(request)
        except BackendError as e:
            return e
        return None

    async def _infer_traced(
        self, scope: Scope, receive: Receive, send: Send, model: ModelVersion, trace: Trace
    ) -> None:
        """``/infer`` of a traced request, stamped from arrival to the answer's last byte:
        the server parses and answers it itself (no hand-over to the backend)."""
        trace.stamp("HTTP_RECV_START", trace.start_ns)
        try:
            read = await read_infer_body(scope, receive, send)
            if read is None:
                return
            trace.stamp("HTTP_RECV_END")
            body, header_len, accept = read
            parsed = parse_infer_request(body, header_len, model, self.core.shm)
            request = parsed.request
            request.trace = trace
            trace.request_id = request.id
            trace.context = traceparent(scope)
            regions = request.regions
            for region in regions:
                region.users += 1
            try:
                refused = self._admit(scope, model, request)
                if refused is not None:
                    await send_error(send, refused, TEXT)
                    return
                trace_queued(request)
                if ON_DISCONNECT in scope:
                    response = await infer_cancelled_on_leaving(scope, model, request)
                else:
                    response = await infer_watching(model, request, receive)
                trace.stamp("INFER_RESPONSE_COMPLETE")
                trace.stamp("REQUEST_END")
                trace.stamp("HTTP_SEND_START")
                await send_answer(scope, send, model, parsed, response, accept)
                trace.stamp("HTTP_SEND_END")
            finally:
                for region in regions:
                    region.users -= 1
        finally:
            trace.end()

    async def _infer_unparsed(
        self,
        scope: Scope,
        send: Send,
        model: ModelVersion,
        body: bytearray | memoryview,
        header_len: int,
        accept: bytes | None,
    ) -> bool:
        """Hand ``body`` unparsed to the model's backend, whose process parses and checks it
        as the front would and writes the answer itself (``ModelVersion.parses_in_backend``).
        False: it declined the request (not plain, not valid, or no connection to share):
        the front parses it the usual way, with the usual errors and statistics."""
        share = scope.get(DIRECT)
        link: DirectLink | None = share() if share is not None else None
        if link is None:
            return False
        request = InferRequest(id="", inputs={})
        if model.batches_unparsed:
            request.batch_size = _batch_size_of(body, header_len)
            if not request.batch_size:
                return False
        request.start_ns = time.monotonic_ns()
        request.reply = reply_for(link, None, (body, header_len))
        response = await infer_cancelled_on_leaving(scope, model, request)
        if response.declined:
            return False
        if response.answered:
            await finish(link, response.rest)
        elif response.error is not None:  # the model's error
            await send_error(send, response.error, TEXT)
        else:  # outputs the backend could not write itself (the body parses: so it does here)
            parsed = parse_infer_request(body, header_len, model, self.core.shm)
            await send_answer(scope, send, model, parsed, response, accept)
        return True

    def _forward_headers(self, scope: Scope, request: InferRequest) -> None:
        """Copy the headers ``--http-header-forward-pattern`` matches into the request's
        parameters (under their names as the client wrote them)."""
        assert self.forward is not None
        headers = scope["headers"]
        raw_names = scope.get("tritonhttp.raw_header_names")
        if raw_names is None or len(raw_names) != len(headers):
            raw_names = [k for k, _ in headers]
        for raw_name, (_, v) in zip(raw_names, headers, strict=True):
            key = raw_name.decode("latin-1")
            if self.forward.search(key):
                request.parameters[key] = v.decode("latin-1")

    @staticmethod
    def _reply_link(
        scope: Scope, model: ModelVersion, parsed: ParsedInfer, identity: bool
    ) -> DirectLink | None:
        """Hand the request a reply capability (``InferRequest.reply``) when its model's
        backend may write the answer to the client itself: the HTTP server shares the
        connection, the answer goes uncompressed and only the server's own features
        (shared memory, classification) are not asked for. The connection's link, or None."""
        share = scope.get(DIRECT)
        if share is None or not model.answers_directly or not identity:
            return None
        if not answerable_elsewhere(parsed):
            return None
        link: DirectLink | None = share()
        if link is not None:
            parsed.request.reply = reply_for(link, answer_spec(parsed, model))
        return link

    async def _generate(
        self, scope: Scope, receive: Receive, send: Send, name: str, version: str, action: str
    ) -> None:
        """``/generate`` or ``/generate_stream`` (``action``) of model ``name``."""
        await handle_generate(
            self.core, scope, receive, send, name, version, action == "generate_stream"
        )


# ---------------------------------------------------------------------- the routes


_F = HttpFrontend
_GET, _POST, _GET_POST = ("GET",), ("POST",), ("GET", "POST")
#: a model name, then an optional version (the first two groups of a model route)
_MODEL = r"/v2/models/([^/]+)(?:/versions/([0-9]+))?"
#: an optional shared-memory region name (the first group)
_REGION = r"(?:/region/([^/]+))?"

#: Triton's endpoints, walked in order by ``HttpFrontend._route``: the first whose path
#: the request's is answers it; none: 404. Model inference comes first (the hot path), then
#: model readiness; ``/v2/models/stats`` comes before model metadata (which would read it
#: as a model named ``stats``); no other two entries share a path. A model's trace
#: settings have no version (with one: 404, not 403 or 405).
_ROUTES: tuple[Route, ...] = (
    endpoint(_MODEL + "/infer", "inference", _POST, _F._infer, absent="", text_405=True),
    endpoint(_MODEL + "/ready", "health", _GET, model_ready, absent="", text_405=True),
    endpoint("/v2/models/stats", "statistics", _GET, statistics),
    endpoint(_MODEL, "metadata", _GET, model_metadata, absent=""),
    endpoint(_MODEL + "/config", "model-config", _GET, model_config, absent=""),
    endpoint(_MODEL + "/stats", "statistics", _GET, statistics, absent=""),
    endpoint(r"/v2/models/([^/]+)/trace/setting", "trace", _GET_POST, trace_settings),
    endpoint(_MODEL + "/(generate|generate_stream)", "inference", _POST, _F._generate, absent=""),
    endpoint("/v2/logging", "logging", _GET_POST, log_settings),
    endpoint("/v2", "metadata", _GET, server_metadata),
    endpoint("/v2/health/(live|ready)", "health", _GET, health, text_405=True),
    endpoint("/v2/systemsharedmemory" + _REGION + "/(status)", "shared-memory", _GET,
             system_shm),
    endpoint("/v2/systemsharedmemory" + _REGION + "/(register|unregister)", "shared-memory",
             _POST, system_shm),
    endpoint("/v2/cudasharedmemory" + _REGION + "/(status)", "shared-memory", _GET, cuda_shm),
    endpoint("/v2/cudasharedmemory" + _REGION + "/(register|unregister)", "shared-memory",
             _POST, cuda_shm),
    endpoint(r"/v2/repository(?:/[^/]+)?/index", "model-repository", _POST, repository_index),
    endpoint(r"/v2/repository(?:/([^/]+))?/models/([^/]+)/(load|unload)", "model-repository",
             _POST, repository_model),
    endpoint("/v2/trace/setting", "trace", _GET_POST, trace_settings),
)  # fmt: skip
