"""Returns IN as OUT, bent as the request parameter ``mode`` says (steps of an ensemble
see the ensemble request's parameters)."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


def _answer(x, mode):
    if mode == "int":
        return [pb_utils.Tensor("OUT", x.astype(np.int32))]
    if mode == "long":
        return [pb_utils.Tensor("OUT", np.concatenate([x, x]).astype(np.float32))]
    if mode == "2d":
        return [pb_utils.Tensor("OUT", x.reshape(1, -1).astype(np.float32))]
    if mode == "str":
        return [pb_utils.Tensor("OUT", np.array([b"a"] * x.size, dtype=np.object_))]
    if mode == "missing":
        return []
    if mode == "extra":
        return [
            pb_utils.Tensor("OUT", x.astype(np.float32)),
            pb_utils.Tensor("ZZ", x.astype(np.float32)),
        ]
    if mode == "empty":
        return [pb_utils.Tensor("OUT", np.zeros([0], dtype=np.float32))]
    return [pb_utils.Tensor("OUT", x.astype(np.float32))]


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            mode = json.loads(r.parameters()).get("mode", "")
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            if mode == "raise":
                raise ValueError("shaper raised")
            if mode == "error":
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("shaper says no")))
                continue
            out.append(pb_utils.InferenceResponse(_answer(x, mode)))
        return out
