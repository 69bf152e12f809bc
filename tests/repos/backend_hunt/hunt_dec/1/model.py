"""Decoupled: IN = N >= 0 sends OUT = 0..N-1 then a bare FINAL; IN < 0 sends one error
response, then a bare FINAL."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()[0])
            sender = r.get_response_sender()
            for i in range(n):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))]))
            if n < 0:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative")))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
