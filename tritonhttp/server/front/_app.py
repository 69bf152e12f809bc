"""The ASGI application: Triton's routes, in Triton's order, with Triton's answers."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..core._bridge import instances_ready
from ..core._core import EXTENSIONS, VERSION, ServerCore
from ..core._errors import BackendError, Code, CoreError
from ..core._model import ModelVersion
from ..core._repo_files import parse_version
from ..core._trace import Trace, trace_queued
from ..core._types import InferRequest, InferResponse
from ..http._extensions import DIRECT, ON_DISCONNECT, RESPOND, Answer, DirectLink
from ..support import _json
from ._generate import handle_generate
from ._http import (
    JSON,
    OCTET_STREAM,
    TEXT,
    Receive,
    Scope,
    Send,
    error_body,
    parse_body,
    read_body,
    response_headers,
    send_error,
    send_response,
)
from ._infer import (
    ParsedInfer,
    answer_spec,
    answerable_elsewhere,
    compress,
    encode_response,
    inflate,
    parse_infer_request,
    pick_encoding,
)
from ._reply import reply_for

__all__ = ["HttpFrontend"]

log = logging.getLogger("tritonhttp.server")


async def _infer_cancelled_on_leaving(
    scope: Scope, model: ModelVersion, request: InferRequest
) -> InferResponse:
    """``model.infer(request)``, cancelled when the client goes away meanwhile (the
    bundled HTTP server's disconnect callback)."""
    scope[ON_DISCONNECT] = functools.partial(model.cancel, request)
    try:
        return await model.infer(request)
    finally:
        scope[ON_DISCONNECT] = None


async def _finish(link: DirectLink, rest: bytes) -> None:
    """Another process wrote the answer on ``link`` but ``rest``: the server sends it."""
    waiting = link.finish(rest)
    if waiting is not None:
        await waiting


def _server_only(body: bytearray | memoryview, header_len: int) -> bool:
    """Whether an infer body's JSON header may ask what only the server does (shared
    memory, classification): such a body is never handed over unparsed."""
    head = body if type(body) is bytearray else bytes(body[:header_len])
    return head.find(b"shared_memory", 0, header_len) >= 0 or (
        head.find(b"classification", 0, header_len) >= 0
    )


def _header_length(header: bytes) -> tuple[bytes, bytes]:
    """The ``Inference-Header-Content-Length`` header of a binary answer whose JSON part is
    ``header``."""
    return (b"inference-header-content-length", b"%d" % len(header))


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
#: the answers of /v2/health/live and /v2/health/ready (as _health sends them)
_HEALTHY: Answer = (200, tuple(response_headers(0, TEXT, length_first=True)), b"")
_UNHEALTHY: Answer = (400, tuple(response_headers(0, TEXT, length_first=True)), b"")
_NOT_ALLOWED = b'{"error":"Method Not Allowed"}'
_MAX_INFLATE = 1 << 32


async def _infer_watching(
    model: ModelVersion, request: InferRequest, receive: Receive
) -> InferResponse:
    """Infer while listening for the client going away (any ASGI server)."""
    infer = asyncio.ensure_future(model.infer(request))
    if infer.done():
        return infer.result()
    watcher = asyncio.ensure_future(receive())
    try:
        done, _ = await asyncio.wait((infer, watcher), return_when=asyncio.FIRST_COMPLETED)
        if (
            watcher in done
            and not watcher.cancelled()
            and watcher.exception() is None
            and watcher.result().get("type") == "http.disconnect"
        ):
            model.cancel(request)
        return await infer
    finally:
        watcher.cancel()
        if not infer.done():
            infer.cancel()


def _traceparent(scope: Scope) -> str:
    """The request's W3C ``traceparent`` header, or ""."""
    for k, v in scope["headers"]:
        if k == b"traceparent":
            return str(v.decode("latin-1"))
    return ""


def _atoi(raw: bytes) -> int:
    """glibc's ``atoi``: leading spaces, optional sign, digits, junk after them ignored;
    the value of ``strtol`` (saturated to 64 bits) cast to a 32-bit int (``2**32`` reads
    as 0, ``2**31`` as ``-2**31``)."""
    m = re.match(rb"\s*([+-]?\d+)", raw)
    if not m:
        return 0
    value = max(min(int(m.group(1)), 2**63 - 1), -(2**63))
    return (value + 2**31) % 2**32 - 2**31


def _unload_dependents(body: bytearray | memoryview) -> bool:
    """An unload request's ``parameters.unload_dependents`` (False where the body is empty,
    malformed, or says nothing boolean: Triton ignores such a body)."""
    if not body:
        return False
    try:
        doc = parse_body(body)
    except CoreError:
        return False
    params = doc.get("parameters") if isinstance(doc, dict) else None
    if isinstance(params, dict) and isinstance(params.get("unload_dependents"), bool):
        return bool(params["unload_dependents"])
    return False


def _load_parameters(body: bytearray | memoryview) -> tuple[str | None, dict[str, str]]:
    """A load request's parameters: the ``config`` override (or None) and the
    ``file:<path>`` contents by path."""
    config: str | None = None
    files: dict[str, str] = {}
    if not body:
        return config, files
    doc = parse_body(body)
    if not isinstance(doc, dict) or "parameters" not in doc:
        return config, files
    params = doc["parameters"]
    if not isinstance(params, dict):
        raise CoreError("attempt to get members for non-object", Code.INTERNAL)
    for key, value in params.items():
        if not isinstance(value, str):
            raise CoreError("attempt to access JSON non-string as string", Code.INTERNAL)
        if key == "config":
            config = value
        elif key.startswith("file:"):
            files[key[5:]] = value
        else:
            raise CoreError("unexpected error on creating Triton parameter", Code.INTERNAL)
    return config, files


def _unsigned(value: object) -> int:
    """``value`` of an unsigned 64-bit JSON field, or Triton's error for anything else."""
    if type(value) is not int or not 0 <= value < 2**64:
        raise CoreError(
            "attempt to access JSON non-unsigned-integer as unsigned-integer", Code.INTERNAL
        )
    return value


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
            return self._server_health("live")
        if path == b"/v2/health/ready":
            return self._server_health("ready")
        return None

    def _server_health(self, which: str) -> Answer:
        repo = self.core.repository
        ok = repo.live if which == "live" else repo.server_ready()
        return _HEALTHY if ok else _UNHEALTHY

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

    # ------------------------------------------------------------------ health & metadata

    async def _health(self, scope: Scope, receive: Receive, send: Send, which: str) -> None:
        """``/v2/health/live`` or ``/v2/health/ready`` (``which``)."""
        status, headers, body = self._server_health(which)
        await send({"type": "http.response.start", "status": status, "headers": list(headers)})
        await send({"type": "http.response.body", "body": body})

    async def _model_ready(
        self, scope: Scope, receive: Receive, send: Send, name: str, version: str
    ) -> None:
        """Whether model ``name`` (its ``version``, else its latest) is ready: 200 or 400."""
        try:
            if version:  # (a version that does not parse: its own message)
                parse_version(version)
        except CoreError as e:
            await send_response(send, 400, error_body(e.message), TEXT, length_first=True)
            return
        try:
            ready = self.core.repository.is_ready(name, version)
            if ready:  # the model's own is_ready(), where it has one
                ready = await instances_ready(self.core.repository.get(name, version))
        except CoreError:
            ready = False
        if ready:
            await send_response(send, 200, b"", TEXT, length_first=True)
        else:
            await send_response(
                send, 400, error_body("Model version not ready"), TEXT, length_first=True
            )

    async def _server_metadata(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The server's name, version and extensions."""
        body = _json.dumps(
            {"name": self.core.server_id, "version": VERSION, "extensions": EXTENSIONS}
        )
        await send_response(send, 200, body)

    async def _model_metadata(
        self, scope: Scope, receive: Receive, send: Send, name: str, version: str
    ) -> None:
        """Model ``name``'s metadata (of its ``version``, where given)."""
        if version:  # (parsed before the model is looked up)
            parse_version(version)
        await send_response(send, 200, self.core.repository.metadata_json(name, version))

    async def _model_config(
        self, scope: Scope, receive: Receive, send: Send, name: str, version: str
    ) -> None:
        """Model ``name``'s configuration (of its ``version``, where given)."""
        if version:
            parse_version(version)
        mv = self.core.repository.get(name, version)
        await send_response(send, 200, mv.config_json)

    # ------------------------------------------------------------------ statistics

    async def _stats(
        self, scope: Scope, receive: Receive, send: Send, name: str | None = None, version: str = ""
    ) -> None:
        """The statistics of model ``name`` (of its ``version``), or of every model."""
        repo = self.core.repository
        if name is None:
            versions = repo.loaded_versions()
        else:
            v = parse_version(version) if version else None
            entry = repo.models.get(name)
            ready = entry.ready_versions() if entry is not None else []
            if not ready:
                raise CoreError(f"requested model '{name}' is not available")
            if v is not None:
                ready = [mv for mv in ready if mv.version == v]
                if not ready:
                    raise CoreError(f"requested model version is not available for model '{name}'")
        else_versions = versions if name is None else ready
        body = _json.dumps(
            {"model_stats": [mv.stats.as_json(mv.name, mv.version) for mv in else_versions]}
        )
        await send_response(send, 200, body)

    # ------------------------------------------------------------------ trace & logging

    async def _trace(
        self, scope: Scope, receive: Receive, send: Send, name: str | None = None
    ) -> None:
        """The trace settings of model ``name``, or the server's: read (GET), updated (POST)."""
        trace = self.core.trace
        if name is not None and not self.core.repository.is_ready(name):
            raise CoreError(f"Request for unknown model : {name}")
        if scope["method"] == "POST":
            body = await read_body(receive)
            trace.update(parse_body(body), name)
        await send_response(send, 200, _json.dumps(trace.view(name)))

    async def _logging(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The log settings: read (GET), updated (POST)."""
        settings = self.core.log
        if scope["method"] == "POST":
            body = await read_body(receive)
            settings.update(parse_body(body))
        await send_response(send, 200, _json.dumps(settings.view()))

    # ------------------------------------------------------------------ repository

    async def _repository_index(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The repository index: every model, or only the ready ones (``{"ready": true}``)."""
        body = await read_body(receive)
        ready = False
        if body:
            doc = parse_body(body)
            if isinstance(doc, dict) and "ready" in doc:
                if not isinstance(doc["ready"], bool):
                    raise CoreError("attempt to access JSON non-boolean as boolean", Code.INTERNAL)
                ready = doc["ready"]
        await send_response(send, 200, _json.dumps(self.core.repository.index(ready)))

    async def _repository_model(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        repo_name: str | None,
        name: str,
        action: str,
    ) -> None:
        """Load or unload (``action``) model ``name`` (explicit model control only)."""
        repo = self.core.repository
        body = await read_body(receive)
        if repo_name is not None:
            raise CoreError("'repository_name' specification is not supported", Code.UNSUPPORTED)
        if repo.mode != "explicit":
            raise CoreError(
                "explicit model load / unload is not allowed if polling is enabled",
                Code.UNAVAILABLE,
            )
        if action == "unload":
            await repo.unload(name, _unload_dependents(body))
        else:
            config, files = _load_parameters(body)
            await repo.load(name, config, files or None)
        await send_response(send, 200, b"")

    # ------------------------------------------------------------------ shared memory

    async def _system_shm(
        self, scope: Scope, receive: Receive, send: Send, region: str | None, action: str
    ) -> None:
        """System shared memory: the ``status`` of ``region`` (None: of every region), or
        its ``register`` or ``unregister`` (None: every region's)."""
        if await self._shm_query(receive, send, region, action, "system"):
            return
        if region is None:
            raise CoreError("'region name' is necessary to register system shared memory region")
        doc = parse_body(await read_body(receive))
        if not isinstance(doc, dict) or "key" not in doc:
            raise CoreError("Shared memory register request has no 'key' field")
        key = doc["key"]
        if not isinstance(key, str):
            raise CoreError("attempt to access JSON non-string as string", Code.INTERNAL)
        key = key.partition("\0")[0]  # Triton reads the key as a C string
        offset = _unsigned(doc.get("offset", 0))
        if "byte_size" not in doc:
            raise CoreError("Shared memory register request has no 'byte_size' field")
        self.core.shm.register(region, key, offset, _unsigned(doc["byte_size"]))
        await send_response(send, 200, b"")

    async def _cuda_shm(
        self, scope: Scope, receive: Receive, send: Send, region: str | None, action: str
    ) -> None:
        """CUDA shared memory: the ``status`` of ``region`` (None: of every region), or its
        ``register`` or ``unregister`` (None: every region's)."""
        if await self._shm_query(receive, send, region, action, "cuda"):
            return
        if region is None:
            raise CoreError("'region name' is necessary to register cuda shared memory region")
        doc = parse_body(await read_body(receive))
        if not isinstance(doc, dict) or "raw_handle" not in doc:
            raise CoreError("Shared memory register request has no 'raw_handle' field")
        handle = doc["raw_handle"]
        if not isinstance(handle, dict) or "b64" not in handle:
            raise CoreError("attempt to access non-existing object member 'b64'", Code.INTERNAL)
        if not isinstance(handle["b64"], str):
            raise CoreError("attempt to access JSON non-string as string", Code.INTERNAL)
        values = {}
        for key in ("byte_size", "device_id"):  # (in Triton's order)
            if key not in doc:
                raise CoreError(
                    f"attempt to access non-existing object member '{key}'", Code.INTERNAL
                )
            values[key] = _unsigned(doc[key])
        try:
            raw = base64.b64decode(handle["b64"], validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        # Without cuda-python or a GPU the handle cannot be opened: Triton's CPU-only answer.
        self.core.shm.register_cuda(region, raw, values["device_id"], values["byte_size"])
        await send_response(send, 200, b"")

    async def _shm_query(
        self, receive: Receive, send: Send, region: str | None, action: str, kind: str
    ) -> bool:
        """Answer a ``status`` or ``unregister`` of ``kind`` shared memory: True; False for
        a ``register`` (the caller's)."""
        shm = self.core.shm
        if action == "status":
            await send_response(send, 200, _json.dumps(shm.status(region, kind)))
            return True
        if action == "unregister":
            await read_body(receive)
            shm.unregister(region, kind)
            await send_response(send, 200, b"")
            return True
        return False

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
        read = await self._infer_body(scope, receive, send)
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
                response = await _infer_cancelled_on_leaving(scope, model, request)
                if response.answered:
                    assert link is not None
                    await _finish(link, response.rest)
                    return
            else:
                response = await _infer_watching(model, request, receive)
            await self._answer(scope, send, model, parsed, response, accept)
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
            read = await self._infer_body(scope, receive, send)
            if read is None:
                return
            trace.stamp("HTTP_RECV_END")
            body, header_len, accept = read
            parsed = parse_infer_request(body, header_len, model, self.core.shm)
            request = parsed.request
            request.trace = trace
            trace.request_id = request.id
            trace.context = _traceparent(scope)
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
                    response = await _infer_cancelled_on_leaving(scope, model, request)
                else:
                    response = await _infer_watching(model, request, receive)
                trace.stamp("INFER_RESPONSE_COMPLETE")
                trace.stamp("REQUEST_END")
                trace.stamp("HTTP_SEND_START")
                await self._answer(scope, send, model, parsed, response, accept)
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
        response = await _infer_cancelled_on_leaving(scope, model, request)
        if response.declined:
            return False
        if response.answered:
            await _finish(link, response.rest)
        elif response.error is not None:  # the model's error
            await send_error(send, response.error, TEXT)
        else:  # outputs the backend could not write itself (the body parses: so it does here)
            parsed = parse_infer_request(body, header_len, model, self.core.shm)
            await self._answer(scope, send, model, parsed, response, accept)
        return True

    async def _infer_body(
        self, scope: Scope, receive: Receive, send: Send
    ) -> tuple[bytearray | memoryview, int, bytes | None] | None:
        """An ``/infer`` request's (decompressed) body, the length of its JSON header and
        its Accept-Encoding; None when an error was sent instead."""
        encoding = ihcl_raw = accept = None
        expected = 0
        for k, v in scope["headers"]:
            if k == b"inference-header-content-length":
                ihcl_raw = v
            elif k == b"content-encoding":
                encoding = v
            elif k == b"accept-encoding":
                accept = v
            elif k == b"content-length" and v.isdigit():
                expected = min(int(v), 1 << 34)
        message = await receive()
        if message.get("more_body", False):
            body = await read_body(receive, expected, scope, message)
        else:  # (the whole body at once: no extra frame)
            body = bytearray(message.get("body", b""))
        if encoding is not None and encoding not in (b"", b"identity"):
            if encoding not in (b"gzip", b"deflate"):
                await send_response(
                    send, 501, error_body("Unsupported compression type"), TEXT,
                    headers=[(b"accept-encoding", b"gzip, deflate")], length_first=False,
                )  # fmt: skip
                return None
            if not body:
                await send_error(send, CoreError("nothing to be decompressed"), TEXT)
                return None
            try:
                body = inflate(body, _MAX_INFLATE)
            except CoreError as e:
                await send_error(send, e, TEXT)
                return None
        total = len(body)
        if ihcl_raw is None:
            return body, total, accept
        header_len = _atoi(ihcl_raw)
        if header_len < 0 or header_len > total:
            got = ihcl_raw.decode("latin-1")
            msg = f"inference header size should be in range (0, {total}), got: {got}"
            await send_error(send, CoreError(msg), TEXT)
            return None
        return body, header_len, accept

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

    async def _answer(
        self,
        scope: Scope,
        send: Send,
        model: ModelVersion,
        parsed: ParsedInfer,
        response: InferResponse,
        accept: bytes | None,
    ) -> None:
        """Send ``response`` to the request ``parsed``: its error, or its outputs."""
        if response.error is not None:
            await send_error(send, response.error, TEXT)
            return
        try:
            header, blobs = encode_response(parsed, response, model)
        except CoreError as e:
            await send_error(send, e, TEXT)
            return
        respond = scope.get(RESPOND) if not accept else None
        if respond is not None:  # (uncompressed: the whole answer in one write)
            if blobs:
                waiting = respond(200, OCTET_STREAM, [header, *blobs], (_header_length(header),))
            else:
                waiting = respond(200, JSON, header)
            if waiting is not None:
                await waiting
            return
        if not blobs and not accept:
            await send_response(send, 200, header)
            return
        # shared memory: the blobs may be views of a region; it stays registered (in
        # use) until they are sent
        await self._send_infer_response(send, header, blobs, accept)

    async def _send_infer_response(
        self, send: Send, header: bytes, blobs: list[bytes | memoryview], accept: bytes | None
    ) -> None:
        out_headers: list[tuple[bytes, bytes]] = [(b"content-type", JSON)]
        if blobs:
            out_headers[0] = (b"content-type", OCTET_STREAM)
            out_headers.append(_header_length(header))
        coding = pick_encoding(accept)
        if coding is not None:
            payload = compress(header + b"".join(blobs), coding)
            out_headers.append((b"content-encoding", coding.encode()))
            header, blobs = payload, []
        total = len(header) + sum(len(b) if isinstance(b, bytes) else b.nbytes for b in blobs)
        out_headers.append((b"content-length", str(total).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": out_headers})
        if not blobs:
            await send({"type": "http.response.body", "body": header})
            return
        await send({"type": "http.response.body", "body": header, "more_body": True})
        last = len(blobs) - 1
        for i, blob in enumerate(blobs):
            await send({"type": "http.response.body", "body": blob, "more_body": i != last})

    async def _generate(
        self, scope: Scope, receive: Receive, send: Send, name: str, version: str, action: str
    ) -> None:
        """``/generate`` or ``/generate_stream`` (``action``) of model ``name``."""
        await handle_generate(
            self.core, scope, receive, send, name, version, action == "generate_stream"
        )


# ---------------------------------------------------------------------- the routes


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint of Triton's HTTP API: which requests reach which handler.

    A request reaches the endpoint when its path equals ``path`` (``pattern`` None) or
    fully matches ``pattern`` (whose matches all start with ``path``). It is then answered
    403 if the API group ``api`` is restricted (``--http-restricted-api``) and the request
    lacks the group's header, else 405 if its method is not one of ``methods``, else by
    ``handler(frontend, scope, receive, send, *captures)``: the pattern's groups, with
    ``absent`` for an optional group that took no part in the match.
    """

    path: str
    pattern: re.Pattern[str] | None
    api: str
    methods: tuple[str, ...]
    handler: Callable[..., Awaitable[None]]
    absent: str | None = None
    #: Triton answers this endpoint's 405 as text/plain, Content-Length first (else JSON)
    text_405: bool = False


#: the start of a regular expression before its first special character
_LITERAL_START = re.compile(r"[^\\.^$*+?{}\[\]|()]*")


def _endpoint(
    path: str,
    api: str,
    methods: tuple[str, ...],
    handler: Callable[..., Awaitable[None]],
    *,
    absent: str | None = None,
    text_405: bool = False,
) -> Route:
    """The :class:`Route` of ``path``: a regular expression (alternatives grouped, never
    ``a|b`` at its top level), or (without any of its special characters) a literal path.
    ``Route.path`` is the literal start that every match of the expression has."""
    literal = _LITERAL_START.match(path)
    assert literal is not None
    start = literal.group()
    if path[len(start) : len(start) + 1] in ("?", "*", "{"):  # (its last character optional)
        start = start[:-1]
    pattern = None if start == path else re.compile(path)
    return Route(start, pattern, api, methods, handler, absent, text_405)


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
    _endpoint(_MODEL + "/infer", "inference", _POST, _F._infer, absent="", text_405=True),
    _endpoint(_MODEL + "/ready", "health", _GET, _F._model_ready, absent="", text_405=True),
    _endpoint("/v2/models/stats", "statistics", _GET, _F._stats),
    _endpoint(_MODEL, "metadata", _GET, _F._model_metadata, absent=""),
    _endpoint(_MODEL + "/config", "model-config", _GET, _F._model_config, absent=""),
    _endpoint(_MODEL + "/stats", "statistics", _GET, _F._stats, absent=""),
    _endpoint(r"/v2/models/([^/]+)/trace/setting", "trace", _GET_POST, _F._trace),
    _endpoint(_MODEL + "/(generate|generate_stream)", "inference", _POST, _F._generate, absent=""),
    _endpoint("/v2/logging", "logging", _GET_POST, _F._logging),
    _endpoint("/v2", "metadata", _GET, _F._server_metadata),
    _endpoint("/v2/health/(live|ready)", "health", _GET, _F._health, text_405=True),
    _endpoint("/v2/systemsharedmemory" + _REGION + "/(status)", "shared-memory", _GET,
              _F._system_shm),
    _endpoint("/v2/systemsharedmemory" + _REGION + "/(register|unregister)", "shared-memory",
              _POST, _F._system_shm),
    _endpoint("/v2/cudasharedmemory" + _REGION + "/(status)", "shared-memory", _GET,
              _F._cuda_shm),
    _endpoint("/v2/cudasharedmemory" + _REGION + "/(register|unregister)", "shared-memory",
              _POST, _F._cuda_shm),
    _endpoint(r"/v2/repository(?:/[^/]+)?/index", "model-repository", _POST,
              _F._repository_index),
    _endpoint(r"/v2/repository(?:/([^/]+))?/models/([^/]+)/(load|unload)", "model-repository",
              _POST, _F._repository_model),
    _endpoint("/v2/trace/setting", "trace", _GET_POST, _F._trace),
)  # fmt: skip
