"""Counts its executions: ``CALL`` says which execution computed a response, so a
response answered from the cache shows an older number."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.calls = 0
        self.version = int(args["model_version"])

    def execute(self, requests):
        responses = []
        for request in requests:
            self.calls += 1
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            s = pb_utils.get_input_tensor_by_name(request, "S")
            text = b"" if s is None else b"|".join(x for x in s.as_numpy().reshape(-1))
            out = [
                pb_utils.Tensor("SUM", np.array([a.sum() * self.version], dtype=np.float32)),
                pb_utils.Tensor("CALL", np.array([self.calls], dtype=np.int64)),
                pb_utils.Tensor("TXT", np.array([text], dtype=np.object_)),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=out))
        return responses
