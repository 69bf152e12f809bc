"""OUT: the IN strings joined by '+'; NUM: [0, 1, 2]."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            items = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy().reshape(-1)
            joined = b"+".join(items)
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", np.array([joined], dtype=object)),
                pb_utils.Tensor("NUM", np.arange(3, dtype=np.float32)),
            ]))
        return out
