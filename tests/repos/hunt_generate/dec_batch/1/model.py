"""A batching decoupled model: per request, MODE 0 sends OUT=MODE with FINAL, 1 sends
that and makes the execute raise after the whole batch is gone through, 2
sends nothing (the raise fails it), 3 sends OUT=3 with FINAL and makes the execute
return a list (a decoupled execute must return None)."""

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    def execute(self, requests):
        raise_after = returns_list = False
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy().flatten()[0])
            if mode in (0, 1, 3):
                out = pb_utils.Tensor("OUT", np.array([[mode]], np.int32))
                request.get_response_sender().send(pb_utils.InferenceResponse([out]), flags=FINAL)
            raise_after = raise_after or mode == 1
            returns_list = returns_list or mode == 3
        if raise_after:
            raise RuntimeError("raised after finals")
        return [] if returns_list else None
