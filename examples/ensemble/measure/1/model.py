import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """The length in characters of every string of WORDS."""

    def execute(self, requests):
        responses = []
        for request in requests:
            words = pb_utils.get_input_tensor_by_name(request, "WORDS").as_numpy()
            length = np.vectorize(lambda s: len(s.decode("utf-8")), otypes=[np.int32])(words)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("LENGTH", length)]))
        return responses
