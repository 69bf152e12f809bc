"""A known service time: each execute sleeps 20 ms, then returns INPUT0 doubled. The
server's compute-infer time per request is therefore at least 20 ms."""

import time

import triton_python_backend_utils as pb_utils

SERVICE_S = 0.020


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(SERVICE_S)
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", data * 2)
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
