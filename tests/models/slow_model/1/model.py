"""Sleeps DELAY_MS milliseconds per request, then echoes DELAY_MS as OUTPUT0."""
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            delay = pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy()
            time.sleep(int(delay.reshape(-1)[0]) / 1000.0)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", delay)]))
        return responses
