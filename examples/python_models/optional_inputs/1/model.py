"""Optional inputs: a missing input is simply absent from ``request.inputs()``; this
model uses 5 for it. OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1."""

import numpy as np

import triton_python_backend_utils as pb_utils


def value(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return tensor.as_numpy() if tensor is not None else np.array([5], dtype=np.int32)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a, b = value(request, "INPUT0"), value(request, "INPUT1")
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]
                )
            )
        return responses
