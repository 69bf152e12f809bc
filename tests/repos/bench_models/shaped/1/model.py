"""Variable shapes: OUT is IN plus one; COUNT is the number of TEXT elements per item."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            count = np.full((text.shape[0], 1), text.shape[1], dtype=np.int32)
            out = [pb_utils.Tensor("OUT", data + 1), pb_utils.Tensor("COUNT", count)]
            responses.append(pb_utils.InferenceResponse(out))
        return responses
