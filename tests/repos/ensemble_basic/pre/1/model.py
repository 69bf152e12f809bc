import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Doubles IN; reports in BATCH how many requests its execute got."""

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            out.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("PRE", (x * 2).astype(np.float32))])
            )
        return out
