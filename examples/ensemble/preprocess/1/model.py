import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Strips and lower-cases every string of TEXT."""

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            clean = np.vectorize(
                lambda s: s.decode("utf-8").strip().lower().encode("utf-8"), otypes=[object]
            )(text)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("CLEAN", clean)]))
        return responses
