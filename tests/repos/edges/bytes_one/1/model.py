import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Answers with how many elements IN has and the length of each."""

    def execute(self, requests):
        out = []
        for r in requests:
            items = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy().reshape(-1)
            text = f"{len(items)}:" + ",".join(str(len(x)) for x in items)
            out.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUT", np.array([text.encode()], dtype=object))]
                )
            )
        return out
