import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Decoupled: sends N responses carrying 0..N-1, then the final flag."""

    def execute(self, requests):
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy()[0])
            sender = r.get_response_sender()
            for i in range(n):
                sender.send(
                    pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i], np.int32))])
                )
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
