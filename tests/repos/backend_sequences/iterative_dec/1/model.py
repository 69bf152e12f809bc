"""Iterative sequence, decoupled: IN = N gives N-1, N-2, ..., 0, one per pass, each pass
releasing the request with RESCHEDULE until the last (which carries FINAL)."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.left = {}

    def execute(self, requests):
        for request in requests:
            key = request.correlation_id()
            if key not in self.left:
                self.left[key] = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().reshape(-1)[0])
            self.left[key] -= 1
            n = self.left[key]
            out = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([[n]], np.int32))])
            if n > 0:
                request.get_response_sender().send(out)
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            else:
                del self.left[key]
                request.get_response_sender().send(out, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
