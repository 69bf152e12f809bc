"""One trace from the application to the model's BLS calls: a span current in the
application, tritonhttp's client sending its W3C context, the bundled server in
OpenTelemetry mode exporting to a real OTLP/HTTP receiver (:mod:`_otlp`), a model that
calls another with its request's trace."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from opentelemetry.sdk.trace import TracerProvider

import tritonhttp
from tritonhttp.server import _launch

from ._otlp import collector


def test_one_trace_spans_client_server_model_and_bls(model_repo: Any) -> None:
    tracer = TracerProvider().get_tracer("application")  # (no global provider needed)
    with collector() as sink:
        server = _launch.start(
            model_repo("trace_models"),
            "--trace-config=mode=opentelemetry",
            f"--trace-config=opentelemetry,url={sink.url}",
            "--trace-config=opentelemetry,bsp_schedule_delay=50",
            "--trace-config=level=TIMESTAMPS",
            "--trace-config=rate=1",
        )
        try:
            with (
                tritonhttp.InferenceServerClient(server.url) as client,
                tracer.start_as_current_span("application") as span,
            ):
                mode = tritonhttp.InferInput("MODE", [1], "INT32")
                mode.set_data_from_numpy(np.array([0], dtype=np.int32))  # one traced BLS call
                result = client.infer("bls_traced", [mode])
            caller = span.get_span_context()
        finally:
            server.stop()
        # the caller's request (its root span, its request span, its compute) and the BLS
        # child's request span and compute
        spans = sink.wait_for(5)
    assert len(spans) == 5, spans
    trace_id = f"{caller.trace_id:032x}"
    assert {s["trace_id"] for s in spans} == {trace_id}
    by_id = {s["span_id"]: s for s in spans}
    (root,) = [s for s in spans if s["parent"] not in by_id]
    assert root["parent"] == f"{caller.span_id:016x}"  # under the application's span
    names = {s["name"] for s in spans}
    assert {"bls_traced", "add_sub", "compute"} <= names
    (child,) = [s for s in spans if s["name"] == "add_sub"]
    ancestors = []
    while child["parent"] in by_id:
        child = by_id[child["parent"]]
        ancestors.append(child["name"])
    assert "bls_traced" in ancestors  # the BLS call hangs under its caller's request
    seen = json.loads(result.as_numpy("CONTEXT")[0])  # what the model's get_context() gave
    assert seen["traceparent"].split("-")[1] == trace_id
