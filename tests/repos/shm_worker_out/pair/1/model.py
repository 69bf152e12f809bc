"""Two outputs of different kinds: OUT (IN plus one) and TXT (BYTES, ``["abc", "de"]``),
returned in that order."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            array = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy() + 1
            text = np.array([b"abc", b"de"], dtype=np.object_)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", array), pb_utils.Tensor("TXT", text)]
                )
            )
        return responses
