"""Echoes text_input as text_output; upper-cases it when the request parameter "upper" is true."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = (
                pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            )
            params = json.loads(request.parameters() or "{}")
            if params.get("upper"):
                text = text.upper()
            out = np.array([text], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", out)]))
        return responses
