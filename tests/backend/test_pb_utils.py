"""``triton_python_backend_utils`` in a plain Python session: every name, Triton 2.51's
argument rules and messages, and what works (or fails clearly) without a server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

import triton_python_backend_utils as pb
from triton_python_backend_utils import _runtime
from triton_python_backend_utils._request import InferenceResponseSender, ResponseIterator
from tritonhttp.server.backends.python import _loader
from tritonhttp.utils._dtypes import BF16

#: dir(pb_utils) in Triton 2.51, dunders and module imports removed (python-backend spec §1)
TRITON_NAMES = [
    "InferenceRequest",
    "InferenceResponse",
    "Logger",
    "MetricFamily",
    "ModelConfig",
    "PreferredMemory",
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITON_STRING_TO_NUMPY",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_model_dir",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "load_model",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
    "using_decoupled_model_transaction_policy",
    "json",
    "np",
    "struct",
]


@pytest.fixture(autouse=True)
def no_server() -> Any:
    """These tests are about a plain session: a server other tests left running in this
    process (an in-process one installs itself as pb_utils' runtime) is set aside."""
    previous = _runtime.current()
    _runtime.install(_runtime.Runtime())
    yield
    _runtime.install(previous)


class Link:
    """A server-side request's link, recording what reaches 'the server'."""

    def __init__(self, decoupled: bool) -> None:
        self.decoupled = decoupled
        self.got: list[tuple[Any, bool]] = []
        self.failures: list[str] = []
        self.cancelled = False

    def deliver(self, response: Any, final: bool) -> None:
        self.got.append((response, final))

    def fail(self, message: str) -> None:
        self.failures.append(message)

    def is_cancelled(self) -> bool:
        return self.cancelled


def test_every_triton_name_is_there() -> None:
    public = {n for n in dir(pb) if not n.startswith("_")}
    assert set(TRITON_NAMES) <= public
    assert set(pb.__all__) <= public
    assert pb.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START == 1
    assert pb.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END == 2
    assert pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL == 1
    assert pb.TRITONSERVER_REQUEST_RELEASE_ALL == 1
    assert pb.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE == 2
    assert pb.TRITONSERVER_MEMORY_GPU.value == 0 and pb.TRITONSERVER_MEMORY_CPU.value == 1


def test_plain_import_needs_no_server_dependencies() -> None:
    code = (
        "import sys, triton_python_backend_utils as pb\n"
        "heavy = {'tritonhttp', 'uvicorn', 'prometheus_client', 'google', 'rapidjson'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
        "t = pb.Tensor('x', __import__('numpy').ones(2))\n"
        "print(t.shape())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "[2]"]


def test_server_registers_the_package_under_both_names() -> None:
    _loader.install_pb_utils()
    assert sys.modules["triton_python_backend_utils"] is pb
    assert sys.modules["c_python_backend_utils"] is pb


# ----------------------------------------------------------------------------- Tensor


def test_tensor_construction_rules() -> None:
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = pb.Tensor("x", arr)
    assert t.name() == "x" and t.shape() == [2, 3] and t.as_numpy() is arr
    assert pb.Tensor("s", np.array(3.0, dtype=np.float32)).shape() == []
    for bad in ([1, 2], np.float32(3.0), 3, None):
        with pytest.raises(TypeError):
            pb.Tensor("x", bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pb.Tensor(None, arr)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pb.Tensor(name="x", array=arr)  # type: ignore[call-arg]
    with pytest.raises(pb.TritonModelException, match="Tensor name cannot be an empty string"):
        pb.Tensor("", arr)
    for bad_dtype in (np.array(["text"]), np.array([1j]), np.array([1], dtype=np.longdouble)):
        with pytest.raises(pb.TritonModelException, match="NumPy dtype is not supported"):
            pb.Tensor("u", bad_dtype)
    transposed = pb.Tensor("t", arr.T)
    assert transposed.as_numpy().flags.c_contiguous
    assert transposed.as_numpy().tolist() == arr.T.tolist()
    assert pb.Tensor("b", np.array([True])).triton_dtype() == 1
    assert pb.Tensor("f", arr).triton_dtype() == 11 and t.is_cpu()
    with pytest.raises(pb.TritonModelException, match="NumPy dtype is not supported"):
        pb.Tensor("big", np.arange(3, dtype=">i4"))  # Triton 2.51 refuses a non-native order


def test_bytes_tensors_are_serialised_when_built() -> None:
    arr = np.array([1, 2.5, "str", b"bytes"], dtype=object)
    t = pb.Tensor("b", arr)
    arr[0] = "changed"
    assert t._items == [b"1", b"2.5", b"str", b"bytes"]
    assert t.triton_dtype() == 13
    assert pb.Tensor("s", np.array([b"a\x00", b"bc"])).as_numpy().dtype.kind == "S"
    assert pb.Tensor("e", np.array([], dtype=object)).shape() == [0]
    with pytest.raises(pb.TritonModelException, match="DLPack does not have support for string"):
        t.to_dlpack()


def test_dlpack_round_trips_bf16_and_errors() -> None:
    arr = np.arange(4, dtype=np.int16)
    t = pb.Tensor("x", arr)
    back = pb.Tensor.from_dlpack("y", t.to_dlpack())
    assert back.as_numpy().tolist() == [0, 1, 2, 3]
    assert np.from_dlpack(t).tolist() == [0, 1, 2, 3]
    assert t.__dlpack_device__() == (1, 0)
    bf = pb.Tensor._wrap("bf", "BF16", np.array([1.5, -2.0], dtype=BF16))
    with pytest.raises(pb.TritonModelException, match="Tensor dtype is BF16"):
        bf.as_numpy()
    again = pb.Tensor.from_dlpack("bf2", bf.to_dlpack())
    assert again._wire == "BF16" and again.triton_dtype() == 14
    assert again._array.view(np.uint16).tolist() == [0x3FC0, 0xC000]
    assert pb.Tensor.from_dlpack("n", np.arange(3)).as_numpy().tolist() == [0, 1, 2]
    with pytest.raises(pb.TritonModelException, match="not contiguous"):
        pb.Tensor.from_dlpack("nc", np.arange(6).reshape(2, 3).T)
    with pytest.raises(pb.TritonModelException, match="Provided tensor is not supported"):
        pb.Tensor.from_dlpack("bad", object())
    with pytest.raises(pb.TritonModelException, match="Tensor name cannot be an empty string"):
        pb.Tensor.from_dlpack("", arr)


# ----------------------------------------------------------------------------- errors


def test_triton_error_every_code() -> None:
    names = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED",
             "ALREADY_EXISTS", "CANCELLED"]  # fmt: skip
    for number, name in enumerate(names):
        code = getattr(pb.TritonError, name)
        assert code.value == number and repr(code) == f"<__ErrorCode.{name}: {number}>"
        assert pb.TritonError(message="m", code=code).code() is code
    err = pb.TritonError("msg")
    assert err.code() is pb.TritonError.INTERNAL and err.message() == "msg"
    assert not issubclass(pb.TritonError, BaseException)
    for bad in (("m", 3), (None,)):
        with pytest.raises(TypeError):
            pb.TritonError(*bad)  # type: ignore[arg-type]
    assert pb.TritonModelException.__mro__[1:] == (Exception, BaseException, object)
    assert str(pb.TritonModelException("x")) == "x"


def test_inference_response() -> None:
    err = pb.TritonError("msg")
    with pytest.raises(TypeError):
        pb.InferenceResponse(output_tensors=None)  # type: ignore[arg-type]
    with pytest.raises(pb.TritonModelException):
        pb.InferenceResponse([None])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        pb.InferenceResponse([], error="text")  # type: ignore[arg-type]
    r = pb.InferenceResponse(error=err)
    assert r.has_error() and r.error() is err and r.output_tensors() == []
    t = pb.Tensor("A", np.zeros(1))
    ok = pb.InferenceResponse((t,))
    assert ok.output_tensors() == [t] and not ok.has_error() and ok.error() is None
    assert pb.get_output_tensor_by_name(ok, "A") is t
    assert pb.get_output_tensor_by_name(ok, "B") is None
    assert json.loads(pb.InferenceResponse([], parameters={"a": 1, "b": "x"}).parameters()) == {
        "a": 1,
        "b": "x",
    }
    with pytest.raises(pb.TritonModelException, match="bool/int/str"):
        pb.InferenceResponse([], parameters={"f": 1.5})  # type: ignore[dict-item]


# ----------------------------------------------------------------------------- requests


def test_bls_request_constructor_validation() -> None:
    t = pb.Tensor("A", np.zeros(1, np.float32))
    r = pb.InferenceRequest("rid", 5, [t], ["A", "A"], "m")
    assert r.request_id() == "rid" and r.correlation_id() == 5 and r.inputs() == [t]
    assert r.requested_output_names() == {"A"} and r.parameters() == "{}"
    assert r.flags() == 0 and r.timeout() == 0 and not r.is_cancelled()
    r.set_flags(3)
    assert r.flags() == 3
    assert r.trace().get_context() is None
    assert pb.InferenceRequest(inputs=[], requested_output_names=[], model_name="m",
                               parameters={"a": 1, "b": True, "c": "s"}).parameters() == (
        '{"a": 1, "b": true, "c": "s"}'
    )  # fmt: skip
    assert pb.InferenceRequest(
        correlation_id="c", inputs=[], requested_output_names=[], model_name=b"m",
        preferred_memory=pb.PreferredMemory(pb.TRITONSERVER_MEMORY_CPU, 0),
    ).correlation_id() == "c"  # fmt: skip
    with pytest.raises(TypeError):
        pb.InferenceRequest(inputs=None, requested_output_names=[], model_name="m")
    with pytest.raises(TypeError):
        pb.InferenceRequest(inputs=[], requested_output_names=[None], model_name="m")  # type: ignore[list-item]
    with pytest.raises(TypeError):
        pb.InferenceRequest(
            inputs=[], requested_output_names=[], model_name="m", correlation_id=None
        )  # type: ignore[arg-type]
    with pytest.raises(pb.TritonModelException, match="should not be empty"):
        pb.InferenceRequest(inputs=[None], requested_output_names=[], model_name="m")  # type: ignore[list-item]
    with pytest.raises(pb.TritonModelException, match="Requested output name"):
        pb.InferenceRequest(inputs=[], requested_output_names=[""], model_name="m")
    with pytest.raises(pb.TritonModelException, match="Correlation ID must be integer or string"):
        pb.InferenceRequest(
            correlation_id=1.5, inputs=[], requested_output_names=[], model_name="m"
        )  # type: ignore[arg-type]
    with pytest.raises(pb.TritonModelException, match="keys to have type str"):
        pb.InferenceRequest(inputs=[], requested_output_names=[], model_name="m", parameters={1: 1})  # type: ignore[dict-item]
    with pytest.raises(pb.TritonModelException, match="found type <class 'float'>"):
        pb.InferenceRequest(
            inputs=[], requested_output_names=[], model_name="m", parameters={"f": 1.5}
        )  # type: ignore[dict-item]
    with pytest.raises(pb.TritonModelException, match="no reference to the decoupled state"):
        r.get_response_sender().send(pb.InferenceResponse([]))
    with pytest.raises(TypeError):
        pb.PreferredMemory(1)  # type: ignore[arg-type]


def _server_request(link: Link) -> pb.InferenceRequest:
    return pb.InferenceRequest._server_side(
        "id", 7, [pb.Tensor("IN", np.ones(2))], {"OUT"}, 1, 10, '{"k":1}', link
    )


def test_server_side_request_accessors() -> None:
    link = Link(False)
    r = _server_request(link)
    assert (r.request_id(), r.correlation_id(), r.flags(), r.timeout()) == ("id", 7, 1, 10)
    assert r.parameters() == '{"k":1}' and r.requested_output_names() == {"OUT"}
    assert r.get_response_sender() is r.get_response_sender()
    assert pb.get_input_tensor_by_name(r, "IN") is r.inputs()[0]
    assert pb.get_input_tensor_by_name(r, "NOPE") is None
    assert not r.is_cancelled() and not r.get_response_sender().is_cancelled()
    link.cancelled = True
    assert r.is_cancelled() and r.get_response_sender().is_cancelled()
    r.set_release_flags(pb.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
    assert r._release_flags == 2


def test_response_sender_rules_default_mode() -> None:
    link = Link(decoupled=False)
    sender = InferenceResponseSender(link)
    final = pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    with pytest.raises(pb.TritonModelException, match="Unsupported flag provided"):
        sender.send(None, flags=4)
    with pytest.raises(pb.TritonModelException, match="must be provided when the response flags"):
        sender.send()
    with pytest.raises(pb.TritonModelException, match="cannot send complete final before"):
        sender.send(flags=final)
    with pytest.raises(TypeError):
        sender.send("no")  # type: ignore[arg-type]
    resp = pb.InferenceResponse([])
    sender.send(resp)
    assert link.got == []  # held until FINAL
    with pytest.raises(pb.TritonModelException, match="more than one response"):
        sender.send(resp)
    sender.send(flags=final)
    assert link.got == [(resp, True)]
    with pytest.raises(pb.TritonModelException, match="has been closed"):
        sender.send(resp)


def test_response_sender_rules_decoupled_from_threads() -> None:
    link = Link(decoupled=True)
    sender = InferenceResponseSender(link)
    final = pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    sent = [pb.InferenceResponse([]) for _ in range(20)]
    threads = [threading.Thread(target=sender.send, args=(r,)) for r in sent]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sender.send(flags=final)
    assert len(link.got) == 21 and link.got[-1] == (None, True)
    assert {id(r) for r, _ in link.got[:-1]} == {id(r) for r in sent}
    with pytest.raises(pb.TritonModelException, match="has been closed"):
        sender.send(flags=final)


def test_response_iterator_over_a_stream() -> None:
    stream = _runtime.ResponseStream()
    a, b = pb.InferenceResponse([]), pb.InferenceResponse([])
    stream.push(a, False)
    stream.push(b, False)
    stream.push(None, True)  # a bare FINAL: one last empty response
    it = ResponseIterator(stream)
    got = list(it)
    assert got[:2] == [a, b] and len(got) == 3 and got[2].output_tensors() == []
    assert list(it) == got  # iterating again replays
    final_on_data = _runtime.ResponseStream()
    final_on_data.push(a, True)
    assert list(ResponseIterator(final_on_data)) == [a]

    async def go() -> list[pb.InferenceResponse]:
        s = _runtime.ResponseStream()
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, s.push, a, False)
        loop.call_later(0.02, s.push, b, True)
        it = await ResponseIterator(s)._first()
        await asyncio.sleep(0.05)  # the rest arrives (from the server's side) meanwhile
        return list(it)

    assert asyncio.run(go()) == [a, b]


# ----------------------------------------------------------------------------- outside a server


def test_bls_and_model_control_outside_a_server_fail_clearly() -> None:
    request = pb.InferenceRequest(inputs=[], requested_output_names=[], model_name="m")
    for call in (
        request.exec,
        lambda: pb.load_model("m"),
        lambda: pb.unload_model("m"),
        lambda: pb.is_model_ready("m"),
    ):
        with pytest.raises(pb.TritonModelException, match="only available inside a model served"):
            call()

    async def go() -> None:
        await request.async_exec()

    with pytest.raises(pb.TritonModelException, match="only available inside"):
        asyncio.run(go())
    with pytest.raises(pb.TritonModelException, match="files should be a dictionary"):
        pb.load_model("m", files=["x"])  # type: ignore[arg-type]
    assert pb.get_model_dir() == ""


def test_logger_outside_a_server_writes_triton_lines_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pb.Logger.log_info("hello")
    pb.Logger.log_warn("careful")
    pb.Logger.log("plain", pb.Logger.ERROR)
    pb.Logger.log_verbose("chatty")
    lines = capsys.readouterr().err.splitlines()
    assert [line[0] for line in lines] == ["I", "W", "E", "V"]
    assert lines[0].endswith(
        "test_pb_utils.py:" + lines[0].split(":")[-1].split("]")[0] + "]  hello"
    )
    for bad in (1, None):
        with pytest.raises(TypeError):
            pb.Logger.log("x", bad)  # type: ignore[arg-type]
    assert [
        lv.value for lv in (pb.Logger.INFO, pb.Logger.WARNING, pb.Logger.ERROR, pb.Logger.VERBOSE)
    ] == [0, 1, 2, 3]


def test_metrics_work_locally_with_triton_rules() -> None:
    counter_family = pb.MetricFamily("unit_counter", "a counter", pb.MetricFamily.COUNTER)
    counter = counter_family.Metric(labels={"k": "v"})
    counter.increment(2)
    counter.increment(3.5)
    assert counter.value() == 5.5
    assert counter_family.Metric(labels={"k": "v"}).value() == 5.5  # same labels: same series
    with pytest.raises(pb.TritonModelException, match="monotonically by non-negative"):
        counter.increment(-1)
    with pytest.raises(
        pb.TritonModelException, match=r"Failed to set metric value: .*COUNTER does not support Set"
    ):
        counter.set(1)
    with pytest.raises(pb.TritonModelException, match="does not support Observe"):
        counter.observe(1)
    gauge_family = pb.MetricFamily("unit_gauge", "g", pb.MetricFamily.GAUGE)
    gauge = gauge_family.Metric()
    gauge.set(4)
    gauge.increment(-1.5)
    assert gauge.value() == 2.5
    hist_family = pb.MetricFamily("unit_hist", "h", pb.MetricFamily.HISTOGRAM)
    hist = hist_family.Metric(buckets=[1, 2])
    hist.observe(1.5)
    with pytest.raises(
        pb.TritonModelException, match=r"Failed to get metric value: .*does not support Value"
    ):
        hist.value()
    with pytest.raises(pb.TritonModelException, match="Missing required buckets"):
        hist_family.Metric()
    with pytest.raises(pb.TritonModelException, match="Unexpected buckets found"):
        counter_family.Metric(buckets=[1])
    with pytest.raises(pb.TritonModelException, match="Labels must be a dictionary"):
        counter_family.Metric(labels=[1])  # type: ignore[arg-type]
    with pytest.raises(
        pb.TritonModelException, match="attempt to access JSON non-string as string"
    ):
        counter_family.Metric(labels={"k": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        pb.MetricFamily("x", "d", 0)  # type: ignore[arg-type]
    with pytest.raises(
        pb.TritonModelException, match="Family name already exists with different type"
    ):
        pb.MetricFamily("unit_counter", "a counter", pb.MetricFamily.GAUGE)
    with pytest.raises(pb.TritonModelException, match="Invalid metric name"):
        pb.MetricFamily("bad name", "d", pb.MetricFamily.GAUGE)
    orphan = pb.MetricFamily("unit_orphan", "o", pb.MetricFamily.GAUGE).Metric()
    with pytest.raises(pb.TritonModelException, match="'MetricFamily' has been deleted"):
        orphan.set(1)
    snapshot = {f.name: f for f in _runtime.current().metrics().snapshot()}
    assert snapshot["unit_hist"].series == [({}, ([1.0, 2.0], [0, 1], 1.5, 1))]


# ----------------------------------------------------------------------------- helpers


def test_type_helpers() -> None:
    assert pb.triton_string_to_numpy("TYPE_BOOL") is bool
    assert pb.TRITON_STRING_TO_NUMPY["TYPE_STRING"] is np.object_
    with pytest.raises(KeyError):
        pb.triton_string_to_numpy("TYPE_BF16")
    assert pb.triton_to_numpy_type(11) is np.float32 and pb.triton_to_numpy_type(14) is None
    assert pb.numpy_to_triton_type(np.float32) == 11
    assert pb.numpy_to_triton_type(np.bytes_) == 13 and pb.numpy_to_triton_type(np.object_) == 13
    assert pb.numpy_to_triton_type(bool) is None
    data = pb.serialize_byte_tensor(np.array([b"ab", "c"], dtype=object))
    assert data == b"\x02\x00\x00\x00ab\x01\x00\x00\x00c"
    assert pb.serialize_byte_tensor(np.array([], dtype=object)) == ()
    assert pb.serialize_byte_tensor(np.array([1.0])) is None
    assert pb.deserialize_bytes_tensor(data).tolist() == [b"ab", b"c"]
    cfg = {"input": [{"name": "I"}], "output": [{"name": "O"}],
           "model_transaction_policy": {"decoupled": True}}  # fmt: skip
    assert pb.get_input_config_by_name(cfg, "I") == {"name": "I"}
    assert pb.get_output_config_by_name(cfg, "O") == {"name": "O"}
    assert pb.get_output_config_by_name(cfg, "X") is None
    assert pb.using_decoupled_model_transaction_policy(cfg) is True
    assert pb.using_decoupled_model_transaction_policy({}) is False


def test_auto_complete_model_config() -> None:
    cfg = pb.ModelConfig(json.dumps({"name": "ac", "max_batch_size": 8, "input": [
        {"name": "I", "data_type": "TYPE_FP32", "dims": [4]}]}))  # fmt: skip
    assert cfg.as_dict() is cfg.as_dict()
    with pytest.raises(
        ValueError,
        match="configuration specified max_batch_size 8, but in "
        "auto-complete-config function for model 'ac' specified max_batch_size 4",
    ):
        cfg.set_max_batch_size(4)
    cfg.set_max_batch_size(16)
    with pytest.raises(
        ValueError, match="contains property other than 'name', 'data_type', 'dims' and 'optional'"
    ):
        cfg.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [1], "format": "x"})
    with pytest.raises(
        ValueError, match="contains property other than 'name', 'data_type' and 'dims'"
    ):
        cfg.add_output({"name": "X", "data_type": "TYPE_FP32", "dims": [1], "optional": True})
    with pytest.raises(ValueError, match="is missing 'dims' property"):
        cfg.add_input({"name": "X", "data_type": "TYPE_FP32"})
    with pytest.raises(
        ValueError,
        match="configuration expects datatype TYPE_FP32 for input 'I', model provides TYPE_INT32",
    ):
        cfg.add_input({"name": "I", "data_type": "TYPE_INT32", "dims": [4]})
    with pytest.raises(
        ValueError,
        match=r"the model expects dims \[8\] but the model configuration specifies dims \[4\]",
    ):
        cfg.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [8]})
    with pytest.raises(
        ValueError,
        match="the model expects optional True but the model configuration specifies "
        "optional False",
    ):
        cfg.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [4], "optional": True})
    cfg.add_output({"name": "O", "data_type": "TYPE_FP32", "dims": [4]})
    cfg.set_dynamic_batching()
    cfg.set_model_transaction_policy({"decoupled": False})
    with pytest.raises(ValueError, match="trying to change decoupled property"):
        cfg.set_model_transaction_policy({"decoupled": True})
    with pytest.raises(ValueError, match="contains property other than 'decoupled'"):
        cfg.set_model_transaction_policy({"other": True})
    assert cfg.as_dict()["dynamic_batching"] == {} and cfg.as_dict()["output"][0]["name"] == "O"
    seq = pb.ModelConfig(json.dumps({"name": "s", "sequence_batching": {}}))
    with pytest.raises(ValueError, match="scheduling_choice as 'sequence_batching'"):
        seq.set_dynamic_batching()


def test_format_exception_matches_the_stub() -> None:
    def inner() -> None:
        raise ValueError("boom")

    try:
        inner()
    except ValueError as e:
        text = _loader.format_exception(e)
    assert text.startswith("ValueError: boom\n\nAt:\n")
    # innermost first, then outwards through the callers (here up to pytest's own frames)
    assert text.splitlines()[3].endswith("): inner")
    assert text.splitlines()[4].endswith("): test_format_exception_matches_the_stub")
    try:
        pb.Tensor("", np.zeros(1))
    except pb.TritonModelException as e:
        text = _loader.format_exception(e)
    assert "_tensor.py" not in text  # pb_utils' own frames are not shown


def test_format_exception_out_of_a_coroutine_follows_the_interpreter() -> None:
    """Out of ``async def execute`` on a loop thread (built as the stub builds its own),
    Python 3.12+ lists the loop's and thread's frames after ``execute``, as real Triton's
    stub does there; 3.11 and earlier stop at the innermost coroutine."""

    async def go() -> None:
        await asyncio.sleep(0)
        raise KeyError("async boom")

    async def execute() -> None:
        await go()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(KeyError) as caught:
            asyncio.run_coroutine_threadsafe(execute(), loop).result(10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    text = _loader.format_exception(caught.value)
    names = [line.rsplit(": ", 1)[1] for line in text.splitlines()[3:]]
    if sys.version_info >= (3, 12):
        assert names == ["go", "execute", "_run", "_run_once", "run_forever", "run",
                         "_bootstrap_inner", "_bootstrap"]  # fmt: skip
        assert "asyncio/events.py(" in text and "threading.py(" in text
    else:
        assert names == ["go"]
