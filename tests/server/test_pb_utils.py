"""The model-facing ``triton_python_backend_utils`` API: Triton 2.51's rules and messages."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import pytest

from tritonhttp.server.backends.python import _loader
from tritonhttp.server.backends.python import _pb_utils as pb
from tritonhttp.utils._dtypes import BF16


def test_module_resolves_under_triton_name() -> None:
    _loader.install_pb_utils()
    import triton_python_backend_utils as imported  # type: ignore[import-not-found]

    assert imported is pb
    assert sys.modules["triton_python_backend_utils"] is pb


def test_tensor_construction_rules() -> None:
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = pb.Tensor("x", arr)
    assert t.name() == "x" and t.shape() == [2, 3] and t.as_numpy() is arr
    assert pb.Tensor("s", np.array(3.0, dtype=np.float32)).shape() == []
    with pytest.raises(TypeError):
        pb.Tensor("x", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pb.Tensor("x", np.float32(3.0))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pb.Tensor(name="x", array=arr)  # type: ignore[call-arg]
    with pytest.raises(pb.TritonModelException, match="Tensor name cannot be an empty string"):
        pb.Tensor("", arr)
    with pytest.raises(pb.TritonModelException, match="NumPy dtype is not supported"):
        pb.Tensor("u", np.array(["text"]))
    with pytest.raises(pb.TritonModelException, match="NumPy dtype is not supported"):
        pb.Tensor("c", np.array([1j]))
    transposed = pb.Tensor("t", arr.T)
    assert transposed.as_numpy().flags.c_contiguous
    assert transposed.as_numpy().tolist() == arr.T.tolist()


def test_bytes_tensors_are_serialised_when_built() -> None:
    arr = np.array([1, 2.5, "str", b"bytes"], dtype=object)
    t = pb.Tensor("b", arr)
    arr[0] = "changed"
    assert t._items == [b"1", b"2.5", b"str", b"bytes"]
    with pytest.raises(pb.TritonModelException, match="DLPack does not have support for string"):
        t.to_dlpack()


def test_dlpack_round_trips_and_bf16() -> None:
    arr = np.arange(4, dtype=np.int16)
    t = pb.Tensor("x", arr)
    back = pb.Tensor.from_dlpack("y", t.to_dlpack())
    assert back.as_numpy().tolist() == [0, 1, 2, 3]
    assert np.from_dlpack(t).tolist() == [0, 1, 2, 3]
    bf = pb.Tensor._from_server("bf", "BF16", np.array([1.5, -2.0], dtype=BF16))
    with pytest.raises(pb.TritonModelException, match="Tensor dtype is BF16"):
        bf.as_numpy()
    again = pb.Tensor.from_dlpack("bf2", bf.to_dlpack())
    assert again._wire == "BF16"
    assert again._array.view(np.uint16).tolist() == [0x3FC0, 0xC000]
    assert pb.Tensor.from_dlpack("n", np.arange(3)).as_numpy().tolist() == [0, 1, 2]
    with pytest.raises(pb.TritonModelException, match="not contiguous"):
        pb.Tensor.from_dlpack("nc", np.arange(6).reshape(2, 3).T)
    with pytest.raises(pb.TritonModelException, match="Provided tensor is not supported"):
        pb.Tensor.from_dlpack("bad", object())


def test_triton_error_and_response() -> None:
    err = pb.TritonError("msg")
    assert err.code() is pb.TritonError.INTERNAL and err.message() == "msg"
    assert repr(pb.TritonError.NOT_FOUND) == "<__ErrorCode.NOT_FOUND: 2>"
    assert not issubclass(pb.TritonError, BaseException)
    assert pb.TritonError(message="m", code=pb.TritonError.INVALID_ARG).code().value == 3
    with pytest.raises(TypeError):
        pb.TritonError("m", 3)
    with pytest.raises(TypeError):
        pb.InferenceResponse(output_tensors=None)
    with pytest.raises(pb.TritonModelException):
        pb.InferenceResponse([None])
    with pytest.raises(TypeError):
        pb.InferenceResponse([], error="text")  # type: ignore[arg-type]
    r = pb.InferenceResponse(error=err)
    assert r.has_error() and r.error() is err and r.output_tensors() == []
    assert issubclass(pb.TritonModelException, Exception)


def test_bls_request_constructor_validation() -> None:
    t = pb.Tensor("A", np.zeros(1, np.float32))
    r = pb.InferenceRequest("rid", 5, [t], ["A", "A"], "m")
    assert r.request_id() == "rid" and r.correlation_id() == 5
    assert r.requested_output_names() == {"A"} and r.parameters() == "{}"
    assert pb.InferenceRequest(inputs=[], requested_output_names=[], model_name="m",
                               parameters={"a": 1, "b": True, "c": "s"}).parameters() == (
        '{"a": 1, "b": true, "c": "s"}'
    )  # fmt: skip
    with pytest.raises(TypeError):
        pb.InferenceRequest(inputs=None, requested_output_names=[], model_name="m")
    with pytest.raises(pb.TritonModelException, match="should not be empty"):
        pb.InferenceRequest(inputs=[None], requested_output_names=[], model_name="m")  # type: ignore[list-item]
    with pytest.raises(pb.TritonModelException, match="Requested output name"):
        pb.InferenceRequest(inputs=[], requested_output_names=[""], model_name="m")
    with pytest.raises(pb.TritonModelException, match="Correlation ID must be integer or string"):
        pb.InferenceRequest(
            correlation_id=1.5, inputs=[], requested_output_names=[], model_name="m"
        )  # type: ignore[arg-type]
    with pytest.raises(pb.TritonModelException, match="found type <class 'float'>"):
        pb.InferenceRequest(
            inputs=[], requested_output_names=[], model_name="m", parameters={"f": 1.5}
        )
    with pytest.raises(pb.TritonModelException, match="no reference to the decoupled state"):
        r.get_response_sender().send(pb.InferenceResponse([]))


def test_response_sender_rules_in_default_mode() -> None:
    got: list[Any] = []
    sender = pb.InferenceResponseSender(False, got.append)
    with pytest.raises(pb.TritonModelException, match="Unsupported flag provided"):
        sender.send(None, flags=4)
    with pytest.raises(pb.TritonModelException, match="must be provided when the response flags"):
        sender.send()
    with pytest.raises(pb.TritonModelException, match="cannot send complete final before"):
        sender.send(flags=pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    resp = pb.InferenceResponse([])
    sender.send(resp)
    with pytest.raises(pb.TritonModelException, match="more than one response"):
        sender.send(resp)
    sender.send(flags=pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    assert got == [resp]
    with pytest.raises(pb.TritonModelException, match="has been closed"):
        sender.send(resp)


def test_type_helpers() -> None:
    assert pb.triton_string_to_numpy("TYPE_BOOL") is bool
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
    cfg = {
        "input": [{"name": "I"}],
        "output": [{"name": "O"}],
        "model_transaction_policy": {"decoupled": True},
    }
    assert pb.get_input_config_by_name(cfg, "I") == {"name": "I"}
    assert pb.get_output_config_by_name(cfg, "X") is None
    assert pb.using_decoupled_model_transaction_policy(cfg) is True
    assert pb.using_decoupled_model_transaction_policy({}) is False


def test_auto_complete_model_config() -> None:
    cfg = pb.ModelConfig(json.dumps({"name": "ac", "max_batch_size": 8, "input": [
        {"name": "I", "data_type": "TYPE_FP32", "dims": [4]}]}))  # fmt: skip
    assert cfg.as_dict() is cfg.as_dict()
    with pytest.raises(
        ValueError,
        match="configuration specified max_batch_size 8, but in auto-complete-config function "
        "for model 'ac' specified max_batch_size 4",
    ):
        cfg.set_max_batch_size(4)
    with pytest.raises(
        ValueError, match="contains property other than 'name', 'data_type', 'dims' and 'optional'"
    ):
        cfg.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [1], "format": "x"})
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
    cfg.add_output({"name": "O", "data_type": "TYPE_FP32", "dims": [4]})
    cfg.set_dynamic_batching()
    cfg.set_model_transaction_policy({"decoupled": False})
    with pytest.raises(ValueError, match="trying to change decoupled property"):
        cfg.set_model_transaction_policy({"decoupled": True})
    assert cfg.as_dict()["dynamic_batching"] == {} and cfg.as_dict()["output"][0]["name"] == "O"


def test_logger_levels() -> None:
    with pytest.raises(TypeError):
        pb.Logger.log("x", 1)  # type: ignore[arg-type]
    pb.Logger.log_info("fine")


def test_format_exception_matches_the_stub() -> None:
    def inner() -> None:
        raise ValueError("boom")

    try:
        inner()
    except ValueError as e:
        text = _loader.format_exception(e)
    assert text.startswith("ValueError: boom\n\nAt:\n")
    assert text.splitlines()[3].endswith("): inner")
    assert text.endswith("): test_format_exception_matches_the_stub\n")
