import json

import numpy as np

import triton_python_backend_utils as pb_utils


def calls():
    E, T = pb_utils.TritonError, pb_utils.Tensor  # (Triton 2.51 lacks them at import time)
    return {
        "error_int": lambda: E(123),
        "error_code_by_name": lambda: E("m", code=3),
        "error_by_name_only": lambda: E(message=5),
        "error_dict": lambda: E({"a": 1}),
        "error_quotes": lambda: E(["it's", 'say "hi"']),
        "error_none_code": lambda: E("m", None),
        "error_no_args": lambda: E(),
        "error_bytes": lambda: E(b"bytes").message(),
        "tensor_list": lambda: T("X", [1, 2]),
        "tensor_int_name": lambda: T(5, np.array([1])),
        "tensor_none": lambda: T("X", None),
        "response_none_tensor": lambda: pb_utils.InferenceResponse([None]),
    }


class TritonPythonModel:
    """What the pybind11-made constructors of Triton's stub say to wrong arguments."""

    def execute(self, requests):
        seen = {}
        for key, call in calls().items():
            try:
                seen[key] = repr(call())
            except Exception as e:
                seen[key] = f"{type(e).__name__}: {e}"
        text = np.array([json.dumps(seen)], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", text)]) for _ in requests]
