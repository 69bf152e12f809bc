import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Adds one to X; a negative first element is an error response, below -100 an exception."""

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            if x.reshape(-1)[0] < -100:
                raise ValueError("far too negative")
            if x.reshape(-1)[0] < 0:
                out.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("negative input to post"))
                )
                continue
            count = np.full((x.shape[0], 1), len(requests), dtype=np.int32)
            out.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("Y", (x + 1).astype(np.float32)),
                        pb_utils.Tensor("COUNT", count),
                    ]
                )
            )
        return out
