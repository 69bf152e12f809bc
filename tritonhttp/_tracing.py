"""OpenTelemetry for both clients, used only when the application uses it.

Nothing here imports ``opentelemetry``: the clients call :func:`begin` only when
``opentelemetry.trace`` is already imported (an application with no OpenTelemetry, or
without ``opentelemetry-api`` installed, pays one dictionary lookup per call).

* Trace context: when a span is current (or a client span is recorded), its W3C
  ``traceparent`` (and ``tracestate``) go with the request, through the globally
  configured propagator; a header of that name the caller passed wins.
* Client spans: when a tracer provider is configured, each call is a span of kind
  CLIENT named after the HTTP method, with the HTTP client semantic conventions
  (``http.request.method``, ``server.address``, ``server.port``, ``url.full``,
  ``http.response.status_code``, ``error.type``) and the model as
  ``triton.model.name`` / ``triton.model.version``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from ._protocol import Call, ServerAddress

__all__ = ["MODEL_NAME", "MODEL_VERSION", "answered", "begin", "fail"]

MODEL_NAME = "triton.model.name"
MODEL_VERSION = "triton.model.version"
_INSTRUMENTATION = "tritonhttp"

_tracers: dict[int, tuple[Any, Any]] = {}


def _tracer(trace: Any, provider: Any) -> Any:
    key = id(provider)
    cached = _tracers.get(key)
    if cached is not None and cached[0] is provider:
        return cached[1]
    from ._client_common import USER_AGENT

    tracer = provider.get_tracer(_INSTRUMENTATION, USER_AGENT.partition("/")[2])
    _tracers.clear()  # a new provider replaced the previous one
    _tracers[key] = (provider, tracer)
    return tracer


def _model(path: str) -> tuple[str, str] | None:
    """(name, version) of a model path ``v2/models/<name>[/versions/<v>][/...]``."""
    if not path.startswith("v2/models/") or path == "v2/models/stats":
        return None
    rest = path[len("v2/models/") :]
    for suffix in ("/generate_stream", "/generate", "/infer", "/ready", "/config", "/stats"):
        if rest.endswith(suffix):
            rest = rest[: -len(suffix)]
            break
    name, _, version = rest.partition("/versions/")
    return unquote(name), version


def _address_attributes(address: ServerAddress, path: str) -> dict[str, Any]:
    return {
        "server.address": address.host,
        "server.port": address.port,
        "url.full": f"{address.url}/{path}",
    }


def begin(
    call: Call,
    headers: Mapping[str, Any] | None,
    address: ServerAddress,
    propagate: bool,
) -> tuple[Any, Mapping[str, Any] | None]:
    """Start the call's client span (when a tracer provider is configured) and add
    the trace context to ``headers`` (when ``propagate`` and a span is current).

    Returns the span (None when none is recorded) and the headers to send (a new
    dict when anything was added; the caller's is never modified).
    """
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None, headers
    provider = trace.get_tracer_provider()
    span = None
    context = None
    if not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        attributes = {"http.request.method": call.method, **_address_attributes(address, call.path)}
        model = _model(call.path)
        if model is not None:
            attributes[MODEL_NAME] = model[0]
            if model[1]:
                attributes[MODEL_VERSION] = model[1]
        span = _tracer(trace, provider).start_span(
            call.method, kind=trace.SpanKind.CLIENT, attributes=attributes
        )
        context = trace.set_span_in_context(span)
    elif not propagate or not trace.get_current_span().get_span_context().is_valid:
        return None, headers
    if propagate:
        carrier: dict[str, str] = {}
        importlib.import_module("opentelemetry.propagate").inject(carrier, context=context)
        if carrier:
            merged: dict[str, Any] = dict(headers) if headers else {}
            present = {k.lower() for k in merged if isinstance(k, str)}
            for name, value in carrier.items():
                if name.lower() not in present:
                    merged[name] = value
            headers = merged
    return span, headers


def answered(span: Any, status: int, address: ServerAddress) -> None:
    """The server answered with ``status`` (``address``: the server that did)."""
    if span is None:
        return
    span.set_attribute("http.response.status_code", status)
    span.set_attribute("server.address", address.host)
    span.set_attribute("server.port", address.port)
    if status >= 400:
        trace = sys.modules["opentelemetry.trace"]
        span.set_attribute("error.type", str(status))
        span.set_status(trace.Status(trace.StatusCode.ERROR))
    span.end()


def fail(span: Any, error: BaseException) -> None:
    """The call ended without an answer (or its request could not be built)."""
    if span is None:
        return
    trace = sys.modules["opentelemetry.trace"]
    span.set_attribute("error.type", type(error).__qualname__)
    if isinstance(error, Exception):
        span.record_exception(error)
    span.set_status(trace.Status(trace.StatusCode.ERROR, str(error)))
    span.end()
