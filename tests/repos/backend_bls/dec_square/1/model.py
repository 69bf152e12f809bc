"""Decoupled: IN = N gives N responses (OUT = 0..N-1) then a bare FINAL; IN < 0 puts
FINAL on the last data response instead (|IN| responses)."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            sender = request.get_response_sender()
            count = abs(n)
            for i in range(count):
                out = pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))])
                sender.send(out, flags=final if (n < 0 and i == count - 1) else 0)
            if n >= 0:
                sender.send(flags=final)
        return None
