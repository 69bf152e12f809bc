"""A sequence model: OUTPUT is the running sum of INPUT over the sequence (keyed by the
correlation id, restarted by the START control). Played in order to one id, the stream
1, 2, 3 gives 1, 3, 6."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            key = request.correlation_id()
            value = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()[0])
            start = int(pb_utils.get_input_tensor_by_name(request, "START").as_numpy()[0])
            total = value + (0 if start else self.sums.get(key, 0))
            self.sums[key] = total
            out = pb_utils.Tensor("OUTPUT", np.array([total], dtype=np.int32))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
