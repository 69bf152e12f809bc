"""OpenTelemetry export of request traces (``--trace-config mode=opentelemetry``).

Needs the OpenTelemetry SDK and its OTLP/HTTP exporter (the ``otel`` extra:
``pip install tritonhttp[otel]``); :mod:`._trace` imports this module only in that mode.

A finished trace group becomes the spans Triton emits, all of kind SERVER, from the
instrumentation scope ``triton-server``:

* ``InferRequest`` (the root): from sampling to the trace's end, with the HTTP events
  (``HTTP_RECV_START``, ``HTTP_RECV_END``, ``INFER_RESPONSE_COMPLETE``,
  ``HTTP_SEND_START``, ``HTTP_SEND_END``); its parent is the W3C ``traceparent`` the
  request arrived with, if any (the trace then joins the caller's trace);
* one span per traced request, named after its model, from ``REQUEST_START`` to
  ``REQUEST_END`` with those events and ``QUEUE_START``, and the attributes
  ``triton.model_name``, ``triton.model_version``, ``triton.trace_id``,
  ``triton.trace_parent_id`` and ``triton.request_id`` (when the request has an id);
  a child trace's span (BLS, ensemble step) has its parent's request span as parent;
* ``compute`` under each request span, from ``COMPUTE_START`` to ``COMPUTE_END`` with the
  four compute events.

The model's ``request.trace().get_context()`` is ``{"traceparent": ...}`` naming the
request span. Spans go through the SDK's batch span processor with Triton's ``bsp_*``
settings to the OTLP/HTTP exporter at ``url`` (default
``http://localhost:4318/v1/traces``); the resource has ``service.name`` =
``triton-inference-server`` and each ``resource=KEY=VALUE`` given.
"""

from __future__ import annotations

import json
import random
import time
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

if TYPE_CHECKING:
    from ._settings import TraceSettings
    from ._trace import Trace

__all__ = ["OtelExporter", "parse_traceparent"]

DEFAULT_URL = "http://localhost:4318/v1/traces"
SCOPE = InstrumentationScope("triton-server")
_ROOT_EVENTS = frozenset(
    ("HTTP_RECV_START", "HTTP_RECV_END", "INFER_RESPONSE_COMPLETE", "HTTP_SEND_START",
     "HTTP_SEND_END")
)  # fmt: skip
_REQUEST_EVENTS = frozenset(("REQUEST_START", "QUEUE_START", "REQUEST_END"))
_COMPUTE_EVENTS = frozenset(
    ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END")
)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def parse_traceparent(text: str) -> tuple[int, int] | None:
    """(trace id, span id) of a W3C ``traceparent`` value, or None when it is not one."""
    parts = text.strip().split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff":
        return None
    if len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id = int(parts[1], 16), int(parts[2], 16)
        int(parts[0], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return trace_id, span_id


def _resource(settings: TraceSettings) -> Resource:
    attributes: dict[str, Any] = {"service.name": "triton-inference-server"}
    for item in settings.resources:
        key, _, value = item.partition("=")
        attributes[key] = value
    created = Resource.create(attributes)  # (with the SDK's telemetry.sdk.* attributes)
    return Resource({k: v for k, v in created.attributes.items() if k != "service.instance.id"})


def _int_setting(settings: TraceSettings, key: str) -> int:
    """A ``bsp_*`` setting (``TraceSettings.from_config`` has read it: a number)."""
    return int(settings.extra[key])


class OtelExporter:
    """Turns finished trace groups into spans and hands them to a batch span processor.

    ``exporter``: the SDK exporter to use (default: OTLP/HTTP to the ``url`` setting); the
    unit tests pass the SDK's in-memory exporter.
    """

    def __init__(self, settings: TraceSettings, exporter: SpanExporter | None = None) -> None:
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=settings.extra.get("url") or DEFAULT_URL)
        self.resource = _resource(settings)
        queue_size = _int_setting(settings, "bsp_max_queue_size")
        self.processor = BatchSpanProcessor(
            exporter,
            max_queue_size=queue_size,
            schedule_delay_millis=_int_setting(settings, "bsp_schedule_delay"),
            # (the SDK refuses a batch larger than the queue; tritonserver takes the pair)
            max_export_batch_size=min(
                _int_setting(settings, "bsp_max_export_batch_size"), queue_size
            ),
        )
        #: monotonic ns + offset = ns since the epoch
        self.offset = time.time_ns() - time.monotonic_ns()
        self._random = random.Random()

    def _ids(self, trace: Trace) -> None:
        """Give ``trace`` (and its root) OpenTelemetry ids, once."""
        if trace.span_id:
            return
        root = trace.root
        if not root.trace_id:
            remote = parse_traceparent(root.context) if root.context else None
            root.trace_id = remote[0] if remote else self._random.getrandbits(128) or 1
        trace.trace_id = root.trace_id
        trace.span_id = self._random.getrandbits(64) or 1

    def context(self, trace: Trace) -> str:
        """What the model's ``get_context()`` gives: the request span's ``traceparent``."""
        self._ids(trace)
        return json.dumps({"traceparent": f"00-{trace.trace_id:032x}-{trace.span_id:016x}-01"})

    def _context(self, trace_id: int, span_id: int, remote: bool = False) -> SpanContext:
        return SpanContext(trace_id, span_id, is_remote=remote, trace_flags=_SAMPLED)

    def _span(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        stamps: list[tuple[str, int]],
        bounds: tuple[int, int],
        attributes: dict[str, Any] | None = None,
    ) -> ReadableSpan:
        offset = self.offset
        return ReadableSpan(
            name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=attributes,
            events=[Event(n, timestamp=ns + offset) for n, ns in stamps],
            kind=SpanKind.SERVER,
            start_time=bounds[0] + offset,
            end_time=bounds[1] + offset,
            instrumentation_scope=SCOPE,
        )

    def export(self, root: Trace) -> None:
        """Hand the spans of a finished trace group to the processor."""
        self._ids(root)
        end = time.monotonic_ns()
        remote = parse_traceparent(root.context) if root.context else None
        root_id = self._random.getrandbits(64) or 1
        root_context = self._context(root.trace_id, root_id)
        http = [(n, ns) for n, ns in root.stamps if n in _ROOT_EVENTS]
        parent = self._context(remote[0], remote[1], True) if remote else None
        spans = [self._span("InferRequest", root_context, parent, http, (root.start_ns, end))]
        for trace in root.group():
            self._ids(trace)
            spans.extend(self._request_spans(trace, root_context))
        for span in spans:
            self.processor.on_end(span)

    def _request_spans(self, trace: Trace, root_context: SpanContext) -> list[ReadableSpan]:
        stamps = dict(trace.stamps)
        if "REQUEST_START" not in stamps:
            return []
        context = self._context(trace.trace_id, trace.span_id)
        parent = trace.parent
        parent_context = root_context
        if parent is not None:
            self._ids(parent)
            parent_context = self._context(parent.trace_id, parent.span_id)
        attributes: dict[str, Any] = {
            "triton.model_name": trace.model_name,
            "triton.model_version": trace.model_version,
            "triton.trace_id": trace.id,
            "triton.trace_parent_id": trace.parent_id,
        }
        if trace.request_id:
            attributes["triton.request_id"] = trace.request_id
        start = stamps["REQUEST_START"]
        end = stamps.get("REQUEST_END", max(stamps.values()))
        events = [(n, ns) for n, ns in trace.stamps if n in _REQUEST_EVENTS]
        spans = [
            self._span(trace.model_name, context, parent_context, events, (start, end), attributes)
        ]
        if "COMPUTE_START" in stamps:
            compute = self._context(trace.trace_id, self._random.getrandbits(64) or 1)
            events = [(n, ns) for n, ns in trace.stamps if n in _COMPUTE_EVENTS]
            bounds = (stamps["COMPUTE_START"], stamps.get("COMPUTE_END", end))
            spans.append(self._span("compute", compute, context, events, bounds))
        return spans

    def shutdown(self) -> None:
        """Export what is queued and stop the processor (the server stops)."""
        self.processor.shutdown()  # type: ignore[no-untyped-call]
