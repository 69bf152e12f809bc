"""BLS cases shared by caller (exec) and caller_async (async_exec): each builds a request
and describes what came back as JSON, so two servers can be compared."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


def fp32(name, values):
    return pb_utils.Tensor(name, np.array(values, dtype=np.float32))


def add_sub(inputs=None, outputs=("OUTPUT0", "OUTPUT1"), model="add_sub", **kw):
    if inputs is None:
        inputs = [fp32("INPUT0", [1, 2, 3, 4]), fp32("INPUT1", [1, 1, 1, 1])]
    return pb_utils.InferenceRequest(model_name=model, inputs=inputs,
                                     requested_output_names=list(outputs), **kw)


def in1(model, value=3, outputs=("OUT",), **kw):
    return pb_utils.InferenceRequest(
        model_name=model, inputs=[pb_utils.Tensor("IN", np.array([value], np.int32))],
        requested_output_names=list(outputs), **kw)


# mode -> (request, decoupled)
CASES = {
    0: lambda: (add_sub(), False),
    1: lambda: (add_sub(model="nope"), False),
    2: lambda: (add_sub(inputs=[fp32("INPUT0", [1, 2, 3, 4])]), False),
    3: lambda: (add_sub(inputs=[pb_utils.Tensor("INPUT0", np.zeros(4, np.int32)), fp32("INPUT1", [1, 1, 1, 1])]), False),
    4: lambda: (add_sub(inputs=[fp32("INPUT0", [1, 2, 3]), fp32("INPUT1", [1, 1, 1])]), False),
    5: lambda: (add_sub(outputs=("NOPE",)), False),
    6: lambda: (in1("error_callee"), False),
    7: lambda: (in1("raise_callee"), False),
    8: lambda: (in1("dec_square"), False),
    9: lambda: (in1("dec_square", 3), True),
    10: lambda: (add_sub(), True),
    11: lambda: (add_sub(outputs=()), False),
    12: lambda: (in1("dec_square", -2), True),
    13: lambda: (in1("echo_params", request_id="bls-7", correlation_id=5, flags=3, timeout=11000000000,
                     parameters={"a": 1, "b": True, "c": "s"}), False),
    14: lambda: (in1("echo_params", correlation_id="corr-id"), False),
    15: lambda: (in1("dec_square", 0), True),
    16: lambda: (add_sub(model_version=7), False),
}


def describe(response):
    if response.has_error():
        return {"error": response.error().message()}
    return {"outputs": {t.name(): np.asarray(t.as_numpy()).tolist() if t.as_numpy().dtype != object
                        else [x.decode() for x in t.as_numpy().reshape(-1)]
                        for t in response.output_tensors()}}


def control(mode):
    """Model control from a model (modes 100+)."""
    try:
        if mode == 100:
            return {"ready": pb_utils.is_model_ready("add_sub"), "missing": pb_utils.is_model_ready("nope"),
                    "bad_version": pb_utils.is_model_ready("add_sub", "7")}
        if mode == 101:
            pb_utils.is_model_ready("add_sub", "x")
        if mode == 102:
            pb_utils.load_model("add_sub")
        if mode == 103:
            pb_utils.unload_model("add_sub")
        if mode == 104:
            pb_utils.load_model("add_sub", files=["x"])
        return {"ok": True}
    except pb_utils.TritonModelException as e:
        return {"exception": str(e)}


def result_tensor(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array([json.dumps(value, sort_keys=True)], dtype=object))])
