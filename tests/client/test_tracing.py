"""OpenTelemetry trace context and client spans, checked on the wire.

The headers are those a real HTTP server received (``_httpd.recorder``); the spans are
those the SDK's in-memory exporter collected. What depends on the process's global
state (no ``opentelemetry`` at all; the API without a tracer provider) runs in a child
interpreter of its own.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tritonhttp
import tritonhttp.aio as aioclient

from ._httpd import error_answer, recorder

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
SPAN_ID = 0xB7AD6B7169203331


def _inputs() -> list[tritonhttp.InferInput]:
    x = tritonhttp.InferInput("IN", [1], "INT32")
    x.set_data_from_numpy(np.array([1], dtype=np.int32))
    return [x]


def _child(code: str, url: str) -> list[dict[str, str]]:
    """Run ``code`` (with ``URL`` set) in a fresh interpreter; what it printed as JSON."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result: list[dict[str, str]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _lower(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def test_without_opentelemetry_installed_the_clients_work_and_send_no_context() -> None:
    code = """
        import asyncio, json, sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError("blocked for this test")

        sys.meta_path.insert(0, Block())
        import numpy as np
        import tritonhttp, tritonhttp.aio

        url = sys.argv[1]
        x = tritonhttp.InferInput("IN", [1], "INT32")
        x.set_data_from_numpy(np.array([1], dtype=np.int32))
        with tritonhttp.InferenceServerClient(url) as c:
            c.infer("m", [x])
            c.async_infer("m", [x]).get_result()

        async def main():
            async with tritonhttp.aio.InferenceServerClient(url) as c:
                await c.infer("m", [x])

        asyncio.run(main())
        try:
            import opentelemetry  # noqa
            print("null")
        except ImportError:
            print(json.dumps(["blocked"]))
    """
    with recorder() as server:
        assert _child(code, server.url) == ["blocked"]
        assert server.count("/infer") == 3
        for seen in server.seen:
            assert "traceparent" not in _lower(seen.headers)


def test_api_without_provider_propagates_the_current_span_only() -> None:
    code = f"""
        import asyncio, json, sys
        import numpy as np
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
        import tritonhttp, tritonhttp.aio

        url = sys.argv[1]
        x = tritonhttp.InferInput("IN", [1], "INT32")
        x.set_data_from_numpy(np.array([1], dtype=np.int32))
        ctx = SpanContext({TRACE_ID}, {SPAN_ID}, is_remote=True,
                          trace_flags=TraceFlags(1), trace_state=TraceState([("vendor", "v1")]))
        with tritonhttp.InferenceServerClient(url) as c:
            c.infer("m", [x], request_id="none")  # no span current
            with trace.use_span(NonRecordingSpan(ctx)):
                c.infer("m", [x], request_id="sync")
                c.async_infer("m", [x], request_id="thread").get_result()
                c.get_server_metadata(headers={{"traceparent": "caller-wins"}})
        with tritonhttp.InferenceServerClient(url, propagate_trace_context=False) as c:
            with trace.use_span(NonRecordingSpan(ctx)):
                c.infer("m", [x], request_id="opted-out")

        async def main():
            async with tritonhttp.aio.InferenceServerClient(url) as c:
                with trace.use_span(NonRecordingSpan(ctx)):
                    await c.infer("m", [x], request_id="aio")
                    await c.async_infer("m", [x], request_id="aio-task")

        asyncio.run(main())
        print(json.dumps([]))
    """
    with recorder() as server:
        _child(code, server.url)
        by_id: dict[str, dict[str, str]] = {}
        for seen in server.seen:
            headers = _lower(seen.headers)
            size = int(headers.get("inference-header-content-length", len(seen.body)))
            key = json.loads(seen.body[:size]).get("id", "meta") if seen.body else "meta"
            by_id[key] = headers
    expected = f"00-{TRACE_ID:032x}-{SPAN_ID:016x}-01"
    for key in ("sync", "thread", "aio", "aio-task"):
        assert by_id[key]["traceparent"] == expected, key
        assert by_id[key]["tracestate"] == "vendor=v1", key
    assert "traceparent" not in by_id["none"]
    assert "traceparent" not in by_id["opted-out"]
    assert by_id["meta"]["traceparent"] == "caller-wins"


# ----------------------------------------------------------------------------- client spans


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """The SDK's in-memory exporter on the global tracer provider.

    When no provider was set, one is set for these tests and the global is put back
    afterwards (through the API's private globals, as OpenTelemetry's own test helpers
    do), so that later tests in this process see no provider.
    """
    memory = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    ours = not isinstance(provider, TracerProvider)
    if ours:
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory
    memory.shutdown()
    if ours:
        from opentelemetry.util._once import Once

        trace._TRACER_PROVIDER = None
        trace._TRACER_PROVIDER_SET_ONCE = Once()


def _client_spans(memory: InMemorySpanExporter) -> list[Any]:
    return [
        s
        for s in memory.get_finished_spans()
        if s.instrumentation_scope.name == "tritonhttp"  # type: ignore[union-attr]
    ]


def test_each_call_is_a_client_span_under_the_current_one(
    exporter: InMemorySpanExporter,
) -> None:
    exporter.clear()
    tracer = trace.get_tracer("test")
    with recorder() as server:
        with (
            tracer.start_as_current_span("work") as parent,
            tritonhttp.InferenceServerClient(server.url) as client,
        ):
            client.infer("my model", _inputs(), model_version="3")
            client.async_infer("my model", _inputs()).get_result()
            client.is_server_live()
        headers = [_lower(s.headers) for s in server.seen]
    spans = _client_spans(exporter)
    assert len(spans) == 3
    parent_id = parent.get_span_context().span_id
    trace_id = parent.get_span_context().trace_id
    for span, sent in zip(spans, headers, strict=True):
        assert span.kind == trace.SpanKind.CLIENT
        assert span.parent is not None and span.parent.span_id == parent_id
        assert span.context.trace_id == trace_id
        # the server is told the client span as the parent of its own
        version, sent_trace, sent_parent, flags = sent["traceparent"].split("-")
        assert (version, sent_trace, sent_parent) == (
            "00",
            f"{trace_id:032x}",
            f"{span.context.span_id:016x}",
        )
        assert int(flags, 16) & 1  # sampled
        assert span.attributes["server.address"] == "127.0.0.1"
        assert span.attributes["server.port"] == server.port
        assert span.attributes["http.response.status_code"] == 200
    infer = spans[0]
    assert infer.name == "POST"
    assert infer.attributes["http.request.method"] == "POST"
    assert infer.attributes["triton.model.name"] == "my model"
    assert infer.attributes["triton.model.version"] == "3"
    assert infer.attributes["url.full"].endswith("/v2/models/my%20model/versions/3/infer")
    assert spans[1].attributes["triton.model.name"] == "my model"
    assert spans[2].name == "GET"
    assert "triton.model.name" not in spans[2].attributes


def test_failed_calls_are_error_spans(exporter: InMemorySpanExporter) -> None:
    exporter.clear()
    with (
        recorder([error_answer(404, "no such model")]) as server,
        tritonhttp.InferenceServerClient(server.url) as client,
        pytest.raises(tritonhttp.InferenceServerException),
    ):
        client.infer("gone", _inputs())
    with (
        tritonhttp.InferenceServerClient(f"127.0.0.1:{server.port}") as client,
        pytest.raises(ConnectionRefusedError),
    ):
        client.infer("gone", _inputs())
    answered, refused = _client_spans(exporter)
    assert answered.status.status_code == trace.StatusCode.ERROR
    assert answered.attributes["error.type"] == "404"
    assert answered.attributes["http.response.status_code"] == 404
    assert refused.status.status_code == trace.StatusCode.ERROR
    assert refused.attributes["error.type"] == "_Refused"
    assert "http.response.status_code" not in refused.attributes


def test_aio_calls_are_client_spans(exporter: InMemorySpanExporter) -> None:
    exporter.clear()
    tracer = trace.get_tracer("test")

    async def main() -> int:
        async with aioclient.InferenceServerClient(server.url) as client:
            with tracer.start_as_current_span("work") as parent:
                await client.infer("m", _inputs())
                await client.async_infer("m", _inputs())
                events = [e async for e in client.generate_stream("m", {"x": 1})]
                assert [e["OUT"] for e in events] == [7]
            return int(parent.get_span_context().span_id)

    with recorder() as server:
        parent_id = asyncio.run(main())
        headers = [_lower(s.headers) for s in server.seen]
    spans = _client_spans(exporter)
    assert len(spans) == 3
    for span, sent in zip(spans, headers, strict=True):
        assert span.parent is not None and span.parent.span_id == parent_id
        assert sent["traceparent"].split("-")[2] == f"{span.context.span_id:016x}"
    assert [s.attributes["triton.model.name"] for s in spans] == ["m", "m", "m"]
