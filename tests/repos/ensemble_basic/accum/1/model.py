import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Sums X over each sequence (START resets the sum)."""

    def initialize(self, args):
        self.totals = {}

    def execute(self, requests):
        out = []
        for r in requests:
            corrid = int(pb_utils.get_input_tensor_by_name(r, "CORRID").as_numpy().reshape(-1)[0])
            start = int(pb_utils.get_input_tensor_by_name(r, "START").as_numpy().reshape(-1)[0])
            x = int(pb_utils.get_input_tensor_by_name(r, "X").as_numpy().reshape(-1)[0])
            total = (0 if start else self.totals.get(corrid, 0)) + x
            self.totals[corrid] = total
            out.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("TOTAL", np.array([[total]], np.int32))]
                )
            )
        return out
