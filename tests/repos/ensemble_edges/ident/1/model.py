import json
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Copies its first input to each of its outputs (in their configured data type). A
    first element of -1 is an error response. Parameters: ``sleep`` (seconds before
    answering), ``never_fail``, ``leave_out`` (an output it does not send)."""

    def initialize(self, args):
        self.cfg = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in self.cfg.get("parameters", {}).items()}
        self.sleep = float(params.get("sleep", "0"))
        self.never_fail = "never_fail" in params
        self.leave_out = params.get("leave_out")

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, self.cfg["input"][0]["name"]).as_numpy()
            time.sleep(self.sleep)
            if not self.never_fail and x.reshape(-1)[0] == -1:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("step said no")))
                continue
            tensors = [
                pb_utils.Tensor(
                    o["name"], x.astype(pb_utils.triton_string_to_numpy(o["data_type"]))
                )
                for o in self.cfg["output"]
                if o["name"] != self.leave_out
            ]
            out.append(pb_utils.InferenceResponse(tensors))
        return out
