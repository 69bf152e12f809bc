"""Echoes IN as OUT; a request whose IN is 99 takes 2 s (an unload with a request in
flight can be seen)."""

import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            if int(x.reshape(-1)[0]) == 99:
                time.sleep(2)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return out
