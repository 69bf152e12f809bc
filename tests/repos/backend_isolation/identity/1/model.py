"""Echoes F (FP32) and S (BYTES); INFO tells where the model runs."""
import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

COUNT = 0


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]

    def execute(self, requests):
        global COUNT
        out = []
        for request in requests:
            COUNT += 1
            tensors = [pb_utils.Tensor(t.name(), t.as_numpy()) for t in request.inputs()]
            info = {"pid": os.getpid(), "count": COUNT, "instance": self.name,
                    "isolated": sys.flags.isolated, "modules": sorted(m for m in sys.modules
                    if m.split(".")[0] in ("uvicorn", "prometheus_client", "google", "tritonhttp"))}
            tensors.append(pb_utils.Tensor("INFO", np.array([json.dumps(info)], dtype=object)))
            out.append(pb_utils.InferenceResponse(tensors))
        return out
