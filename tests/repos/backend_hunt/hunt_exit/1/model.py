"""MODE 1: sys.exit(4); 2: raise KeyboardInterrupt; otherwise RESULT = "ok"."""
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        mode = int(pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0])
        if mode == 1:
            sys.exit(4)
        if mode == 2:
            raise KeyboardInterrupt("interrupted")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array(['"ok"'], dtype=object))])
                for _ in requests]
