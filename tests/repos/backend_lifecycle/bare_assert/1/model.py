import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """MODE 0: ``assert`` without a message in execute; 1: ``raise ValueError("")``."""

    def execute(self, requests):
        mode = int(pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0])
        assert mode != 0
        if mode == 1:
            raise ValueError("")
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array(["{}"], object))])
            for _ in requests
        ]
