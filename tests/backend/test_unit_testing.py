"""Unit-testing model code without a server: ``tritonhttp.testing.server_request``."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import numpy as np
import pytest

import triton_python_backend_utils as pb_utils
from tritonhttp.testing import server_request

from .conftest import EXAMPLES


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"unit_{name}", EXAMPLES / name / "1" / "model.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TritonPythonModel()


def test_a_default_model() -> None:
    model = _load("add_sub")
    outputs = [{"name": n, "data_type": "TYPE_FP32"} for n in ("OUTPUT0", "OUTPUT1")]
    model.initialize({"model_config": json.dumps({"output": outputs})})
    request, sink = server_request(
        {"INPUT0": np.arange(4, dtype=np.float32), "INPUT1": np.ones(4, np.float32)},
        ["OUTPUT0"],
        request_id="r1",
        parameters={"k": "v"},
    )
    assert request.request_id() == "r1" and request.parameters() == '{"k":"v"}'
    assert request.requested_output_names() == {"OUTPUT0"}
    (response,) = model.execute([request])
    assert pb_utils.get_output_tensor_by_name(response, "OUTPUT0").as_numpy().tolist() == [
        1.0, 2.0, 3.0, 4.0
    ]  # fmt: skip
    assert sink.sent == []  # answered by returning, not through the sender


def test_a_decoupled_model_and_its_sender() -> None:
    model = _load("square_int32")
    config = {"model_transaction_policy": {"decoupled": True}}
    model.initialize({"model_config": json.dumps(config), "model_name": "square_int32"})
    request, sink = server_request({"IN": np.array([3], np.int32)}, decoupled=True)
    assert model.execute([request]) is None
    model.finalize()
    assert [r.output_tensors()[0].as_numpy().tolist() for r in sink.responses] == [[3]] * 3
    assert sink.finished and sink.sent[-1] == (None, True)


def test_bytes_inputs_and_the_sender_rules() -> None:
    request, sink = server_request({"S": np.array(["a", "bé"])})
    assert request.inputs()[0].as_numpy().tolist() == [b"a", "bé".encode()]
    sender = request.get_response_sender()
    sender.send(pb_utils.InferenceResponse([]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    assert sink.finished and len(sink.responses) == 1
    with pytest.raises(pb_utils.TritonModelException, match="has been closed"):
        sender.send(pb_utils.InferenceResponse([]))
    sink.cancelled = True
    assert request.is_cancelled()
