"""Decoupled: IN=n sends n responses (each OUT=i), then the final flag; n<0 sends an error."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()[0])
            sender = r.get_response_sender()
            if n < 0:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("dec error")),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            for i in range(n):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
