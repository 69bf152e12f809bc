"""OpenTelemetry mode end to end: each server exports over OTLP/HTTP to a real receiver
started in the test (:mod:`_otlp`), the same traffic goes to real Triton 2.51 and to
ours, and the spans are compared by structure: names, kinds, parents, attributes,
event names, scope, the caller's trace joined through ``traceparent``, and the context
the model sees (``request.trace().get_context()``)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _real import skip_without_real_triton

from tritonhttp.server import _launch
from tritonhttp.testing import _real_triton as rt

from ._otlp import Collector, collector

pytestmark = pytest.mark.real_triton

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{CALLER_TRACE}-b7ad6b7169203331-01"


def _post(url: str, model: str, doc: dict[str, Any], headers: dict[str, str]) -> Any:
    req = urllib.request.Request(
        f"http://{url}/v2/models/{model}/infer",
        json.dumps(doc).encode(),
        {"Content-Type": "application/json", **headers},
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def _traffic(url: str) -> list[str]:
    """A plain request with an id, a BLS caller joining the client's trace, one with two
    traced children; the contexts the BLS model saw."""
    values = [1.0, 2.0, 3.0, 4.0]
    doc = {"id": "r1", "inputs": [{"name": n, "datatype": "FP32", "shape": [4], "data": values}
                                  for n in ("INPUT0", "INPUT1")]}  # fmt: skip
    _post(url, "add_sub", doc, {})
    contexts = []
    for mode, headers in ((0, {"traceparent": TRACEPARENT}), (2, {})):
        doc = {"inputs": [{"name": "MODE", "datatype": "INT32", "shape": [1], "data": [mode]}]}
        contexts.append(_post(url, "bls_traced", doc, headers)["outputs"][0]["data"][0])
    return contexts


def _serve(start: Any, repo: Path, sink: Collector) -> list[Any]:
    server = start(
        repo,
        "--trace-config=mode=opentelemetry",
        f"--trace-config=opentelemetry,url={sink.url}",
        "--trace-config=opentelemetry,resource=test.key=v1",
        "--trace-config=opentelemetry,bsp_schedule_delay=50",
        "--trace-config=level=TIMESTAMPS",
        "--trace-config=rate=1",
    )
    try:
        contexts = _traffic(server.url)
        views = [_setting(server.url, "", None), _setting(server.url, "/models/add_sub", {
            "trace_level": ["TIMESTAMPS"], "trace_rate": "2"})]  # fmt: skip
    finally:
        server.stop()
    for view in views:
        view.pop("url", None)  # (each server exports to a receiver of its own)
    return [*contexts, *views]


def _setting(url: str, where: str, body: dict[str, Any] | None) -> Any:
    """GET (body None) or POST the trace settings at /v2{where}/trace/setting."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{url}/v2{where}/trace/setting", data)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def _shape(spans: list[dict[str, Any]]) -> list[Any]:
    """The spans as comparable records, in a stable order: (name, parent's name or
    "remote" or None, kind, attributes, event names, scope, whether in the caller's
    trace)."""
    by_id = {s["span_id"]: s for s in spans}
    out = []
    for s in spans:
        parent = s["parent"]
        parent_name = by_id[parent]["name"] if parent in by_id else ("remote" if parent else None)
        attrs = dict(s["attributes"])
        out.append((
            s["name"], parent_name, s["kind"], sorted(attrs.items()),
            [name for name, _ in s["events"]], s["scope"], s["trace_id"] == CALLER_TRACE,
            s["resource"].get("service.name"), s["resource"].get("test.key"),
        ))  # fmt: skip
    return sorted(out, key=repr)


def test_spans_match_real_triton(model_repo: Any) -> None:
    skip_without_real_triton(rt.platform_problem())
    rt.ensure_installed()
    repo = model_repo("trace_models")
    # 3 client requests, 3 traced BLS children: 6 request spans, 6 compute, 3 roots
    with collector() as real_sink:
        real_contexts = _serve(rt.start, repo, real_sink)
        real = real_sink.wait_for(15)
    with collector() as our_sink:
        our_contexts = _serve(_launch.start, repo, our_sink)
        ours = our_sink.wait_for(15)
    assert len(real) == 15
    assert our_contexts[2:] == real_contexts[2:]  # the trace settings, read and updated
    assert real_contexts[3]["trace_rate"] == "2"
    assert _shape(ours) == _shape(real)
    for spans, contexts in ((real, real_contexts), (ours, our_contexts)):
        # the model sees its request span, in the trace the client's traceparent named
        joined = json.loads(contexts[0])["traceparent"].split("-")
        assert joined[1] == CALLER_TRACE
        caller = [s for s in spans if s["span_id"] == joined[2]]
        assert [s["name"] for s in caller] == ["bls_traced"]
        for s in spans:  # events within their span
            assert all(s["start"] <= ns <= s["end"] for name, ns in s["events"]
                       if not name.startswith("HTTP_RECV")), s  # fmt: skip
