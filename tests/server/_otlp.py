"""A real OTLP/HTTP trace receiver on a loopback port, for the OpenTelemetry tests.

:class:`Collector` answers ``POST /v1/traces`` (protobuf, optionally gzip) as an
OpenTelemetry collector does, decodes each export with ``opentelemetry-proto`` and keeps
the spans as plain dicts (:attr:`Collector.spans`): name, kind, trace/span/parent ids
(hex), start/end (ns since the epoch), attributes, event names with times, resource
attributes and instrumentation scope.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2


def _value(v: common_pb2.AnyValue) -> Any:
    which = v.WhichOneof("value")
    return getattr(v, which) if which else None


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


class Collector:
    """An OTLP/HTTP endpoint at :attr:`url` collecting the spans it receives."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.exports = 0
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if "json" in self.headers.get("Content-Type", ""):
                    collector._receive_json(body)
                else:
                    collector._receive(body)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _receive_json(self, body: bytes) -> None:
        """OTLP/JSON: ids are hex there, bytes in the protobuf message."""
        doc = json.loads(body)
        for rs in doc.get("resourceSpans", doc.get("resource_spans", [])):
            for ss in rs.get("scopeSpans", rs.get("scope_spans", [])):
                for span in ss.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id",
                                "parent_span_id"):  # fmt: skip
                        if key in span:
                            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
        request = trace_service_pb2.ExportTraceServiceRequest()
        json_format.ParseDict(doc, request, ignore_unknown_fields=True)
        self._keep(request)

    def _receive(self, body: bytes) -> None:
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        self._keep(request)

    def _keep(self, request: Any) -> None:
        spans = []
        for rs in request.resource_spans:
            resource = _attrs(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append({
                        "name": s.name,
                        "kind": s.kind,
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent": s.parent_span_id.hex(),
                        "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano,
                        "attributes": _attrs(s.attributes),
                        "events": [(e.name, e.time_unix_nano) for e in s.events],
                        "resource": resource,
                        "scope": ss.scope.name,
                    })  # fmt: skip
        with self._lock:
            self.spans.extend(spans)
            self.exports += 1

    def wait_for(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The spans received once there are at least ``count`` (or after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.05)
        with self._lock:
            return list(self.spans)


@contextmanager
def collector() -> Iterator[Collector]:
    """A running :class:`Collector`, shut down afterwards."""
    c = Collector()
    c._thread.start()
    try:
        yield c
    finally:
        c._server.shutdown()
        c._server.server_close()
