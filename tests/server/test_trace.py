"""Tracing without a server: --trace-config reading, sampling (rate, count), the trace
file's schedule, tensor formatting, and the OpenTelemetry spans (the SDK's in-memory
exporter)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tritonhttp.server.core._otel import OtelExporter, parse_traceparent
from tritonhttp.server.core._settings import TraceSettings
from tritonhttp.server.core._trace import Trace, Tracer, format_tensor


def _settings(tmp_path: Path, **glob: str) -> TraceSettings:
    config = {"": {"level": "TIMESTAMPS", "rate": "1", **glob}}
    config["triton"] = {"file": str(tmp_path / "t.json")}
    return TraceSettings.from_config(config)


def _request(tracer: Tracer, model: str = "m", rid: str = "") -> Trace | None:
    """One request through the tracer: the stamps the server makes, then its end."""
    trace = tracer.sample(model, 1)
    if trace is not None:
        trace.request_id = rid
        for name in ("HTTP_RECV_START", "REQUEST_START", "QUEUE_START", "REQUEST_END"):
            trace.stamp(name)
        trace.end()
    return trace


def _ids(path: Path) -> list[int]:
    return sorted({o["id"] for o in json.loads(path.read_text())})


# ----------------------------------------------------------------------------- settings


def test_config_as_triton_reads_it() -> None:
    s = TraceSettings.from_config({
        "": {"level": "TIMESTAMPS\nTENSORS", "rate": "3", "file": "/ignored"},
        "triton": {"file": "/t.json", "log-frequency": "5", "extra": "1"},
        "opentelemetry": {"url": "http://x"},
    })  # fmt: skip
    assert s.view() == {
        "trace_level": ["TIMESTAMPS", "TENSORS"], "trace_rate": "3", "trace_count": "-1",
        "log_frequency": "5", "trace_file": "/t.json", "trace_mode": "triton", "extra": "1",
    }  # fmt: skip


def test_opentelemetry_view_lists_given_keys_then_defaults() -> None:
    s = TraceSettings.from_config({
        "": {"mode": "opentelemetry", "level": "TIMESTAMPS"},
        "opentelemetry": {"url": "http://c/v1/traces", "resource": "a=b\nc=d",
                          "bsp_max_queue_size": "7"},
    })  # fmt: skip
    assert list(s.view().items())[3:] == [
        ("trace_mode", "opentelemetry"), ("url", "http://c/v1/traces"), ("resource", "c=d"),
        ("bsp_max_queue_size", "7"), ("bsp_max_export_batch_size", "512"),
        ("bsp_schedule_delay", "5000"),
    ]  # fmt: skip
    assert s.resources == ["a=b", "c=d"]


@pytest.mark.parametrize(
    "config", [{"": {"mode": "zipkin"}}, {"": {"rate": "x"}}, {"": {"level": "LOUD"}}]
)
def test_bad_config_is_refused(config: dict[str, dict[str, str]]) -> None:
    with pytest.raises(ValueError):
        TraceSettings.from_config(config)


# ----------------------------------------------------------------------------- sampling


def test_off_samples_nothing_until_the_api_turns_it_on(tmp_path: Path) -> None:
    s = _settings(tmp_path, level="OFF")
    tracer = Tracer(s)
    assert not tracer.active
    assert tracer.sample("m", 1) is None
    s.update({"trace_level": ["TIMESTAMPS"]}, "m")
    assert tracer.active
    assert tracer.sample("other", 1) is None
    assert tracer.sample("m", 1) is not None


def test_rate_and_count(tmp_path: Path) -> None:
    tracer = Tracer(_settings(tmp_path, rate="2", count="2"))
    traced = [_request(tracer) is not None for _ in range(8)]
    assert traced == [False, True, False, True, False, False, False, False]
    assert not tracer.global_setting.valid()


# ----------------------------------------------------------------------------- the file


def test_file_written_when_the_server_stops(tmp_path: Path) -> None:
    tracer = Tracer(_settings(tmp_path))
    first = _request(tracer, rid="r")
    assert first is not None
    assert not (tmp_path / "t.json").exists()
    tracer.close()
    objects = json.loads((tmp_path / "t.json").read_text())
    names = [o["timestamps"][0]["name"] for o in objects if "timestamps" in o]
    assert names == ["HTTP_RECV_START", "REQUEST_START", "QUEUE_START", "REQUEST_END"]
    info = [o for o in objects if "model_name" in o]
    assert info == [{"id": first.id, "model_name": "m", "model_version": 1, "request_id": "r"}]
    assert objects[1] == info[0]  # (before REQUEST_START)


def test_log_frequency_files_and_the_rest_at_exit(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    s.log_frequency = 2
    tracer = Tracer(s)
    traces = [_request(tracer) for _ in range(5)]
    ids = [t.id for t in traces if t is not None]
    assert _ids(tmp_path / "t.json.0") == ids[:2]
    assert _ids(tmp_path / "t.json.1") == ids[2:4]
    assert not (tmp_path / "t.json.2").exists()
    tracer.close()
    assert _ids(tmp_path / "t.json.2") == ids[4:]
    assert not (tmp_path / "t.json").exists()


def test_count_reached_writes_an_indexed_file(tmp_path: Path) -> None:
    tracer = Tracer(_settings(tmp_path, count="2"))
    ids = [t.id for t in (_request(tracer) for _ in range(3)) if t is not None]
    assert len(ids) == 2
    assert _ids(tmp_path / "t.json.0") == ids


def test_a_replaced_setting_writes_its_rest(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    tracer = Tracer(s)
    before = _request(tracer)
    assert before is not None
    s.update({"trace_rate": "1"})  # (a new setting: the old one's traces are written)
    after = _request(tracer)
    assert after is not None
    tracer.close()
    assert _ids(tmp_path / "t.json") == [before.id, after.id]


def test_children_are_written_with_their_root(tmp_path: Path) -> None:
    tracer = Tracer(_settings(tmp_path))
    root = tracer.sample("caller", 1)
    assert root is not None
    root.stamp("REQUEST_START")
    child = root.spawn("callee", 3)
    child.stamp("REQUEST_START")
    root.end()
    tracer.close()
    assert not (tmp_path / "t.json").exists()  # (the child is still running)
    child.end()
    tracer.close()
    info = [o for o in json.loads((tmp_path / "t.json").read_text()) if "model_name" in o]
    assert info == [
        {"id": child.id, "model_name": "callee", "model_version": 3, "parent_id": root.id},
        {"id": root.id, "model_name": "caller", "model_version": 1},
    ]


# ----------------------------------------------------------------------------- tensors


@pytest.mark.parametrize(
    ("datatype", "data", "text"),
    [
        (
            "FP32",
            np.array([0.5, 1e-7, 3.25e10, -1 / 3], np.float32),
            "0.5,1e-07,3.25e+10,-0.333333",
        ),
        ("INT64", np.array([[1, -2], [3, 4]], np.int64), "1,-2,3,4"),
        ("BOOL", np.array([True, False]), "1,0"),
        ("BYTES", np.array([b"ab", b"c"], dtype=object), '"ab","c"'),
        ("BYTES", memoryview(b"\x02\x00\x00\x00ab\x01\x00\x00\x00c"), '"ab","c"'),
        ("UINT8", np.array([65, 66], np.uint8), "A,B"),
        ("FP16", np.array([1.0], np.float16), ""),
        ("INT32", memoryview(np.array([7, 8], np.int32).tobytes()), "7,8"),
    ],
)
def test_tensor_text(datatype: str, data: Any, text: str) -> None:
    out = json.loads(format_tensor("T", datatype, [2, 2], data))
    assert out == {"name": "T", "data": text, "shape": "2,2", "dtype": datatype}


# ----------------------------------------------------------------------------- OpenTelemetry


def _otel(extra: dict[str, str] | None = None) -> tuple[Tracer, InMemorySpanExporter]:
    settings = TraceSettings.from_config({
        "": {"mode": "opentelemetry", "level": "TIMESTAMPS", "rate": "1"},
        "opentelemetry": {"resource": "team=ml", **(extra or {})},
    })  # fmt: skip
    memory = InMemorySpanExporter()
    return Tracer(settings, lambda: OtelExporter(settings, memory)), memory


def _stamp_all(trace: Trace) -> None:
    for name in ("REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
                 "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END"):  # fmt: skip
        trace.stamp(name)


def test_spans_of_a_request_with_a_bls_child() -> None:
    tracer, memory = _otel()
    root = tracer.sample("caller", 1)
    assert root is not None
    root.context = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    root.request_id = "r1"
    root.stamp("HTTP_RECV_START")
    context = json.loads(str(root.handle()[1]))
    child = root.spawn("callee", 2)
    _stamp_all(child)
    child.end()
    _stamp_all(root)
    root.stamp("HTTP_SEND_END")
    root.end()
    tracer.close()
    by_id = {s.context.span_id: s for s in memory.get_finished_spans()}
    assert sorted(s.name for s in by_id.values()) == [
        "InferRequest", "callee", "caller", "compute", "compute"
    ]  # fmt: skip
    assert {s.context.trace_id for s in by_id.values()} == {0x0AF7651916CD43DD8448EB211C80319C}
    top = next(s for s in by_id.values() if s.name == "InferRequest")
    assert top.parent is not None and top.parent.span_id == 0xB7AD6B7169203331
    assert [e.name for e in top.events] == ["HTTP_RECV_START", "HTTP_SEND_END"]
    caller = next(s for s in by_id.values() if s.name == "caller")
    callee = next(s for s in by_id.values() if s.name == "callee")
    assert caller.parent is not None and caller.parent.span_id == top.context.span_id
    assert callee.parent is not None and callee.parent.span_id == caller.context.span_id
    assert dict(caller.attributes or {}) == {
        "triton.model_name": "caller", "triton.model_version": 1, "triton.trace_id": root.id,
        "triton.trace_parent_id": 0, "triton.request_id": "r1",
    }  # fmt: skip
    assert dict(callee.attributes or {})["triton.trace_parent_id"] == root.id
    assert [e.name for e in caller.events] == ["REQUEST_START", "QUEUE_START", "REQUEST_END"]
    computes = [s for s in by_id.values() if s.name == "compute"]
    assert {s.parent.span_id for s in computes if s.parent} == {
        caller.context.span_id,
        callee.context.span_id,
    }
    assert context == {"traceparent": f"00-{0x0AF7651916CD43DD8448EB211C80319C:032x}-"
                                      f"{caller.context.span_id:016x}-01"}  # fmt: skip
    assert caller.resource.attributes["service.name"] == "triton-inference-server"
    assert caller.resource.attributes["team"] == "ml"


def test_a_request_without_traceparent_starts_a_trace() -> None:
    tracer, memory = _otel()
    trace = tracer.sample("m", 1)
    assert trace is not None
    _stamp_all(trace)
    trace.end()
    tracer.close()
    spans = memory.get_finished_spans()
    assert len(spans) == 3
    top = next(s for s in spans if s.name == "InferRequest")
    assert top.parent is None
    assert len({s.context.trace_id for s in spans}) == 1


@pytest.mark.parametrize(
    "text",
    ["", "00-abc-def-01", "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
     "00-00000000000000000000000000000000-b7ad6b7169203331-01",
     "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01"],
)  # fmt: skip
def test_bad_traceparent_is_ignored(text: str) -> None:
    assert parse_traceparent(text) is None


def test_bsp_settings_reach_the_processor() -> None:
    tracer, _ = _otel({"bsp_max_queue_size": "9", "bsp_max_export_batch_size": "3"})
    processor = tracer.exporter.processor
    batch = processor._batch_processor
    assert (batch._max_queue_size, batch._max_export_batch_size) == (9, 3)
    tracer.close()


def test_without_the_sdk_opentelemetry_mode_traces_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "tritonhttp.server.core._otel", None)
    settings = TraceSettings.from_config(
        {"": {"mode": "opentelemetry", "level": "TIMESTAMPS", "rate": "1"}}
    )
    tracer = Tracer(settings)
    assert not tracer.active
    assert tracer.sample("m", 1) is None
    assert "tritonhttp[otel]" in caplog.text
