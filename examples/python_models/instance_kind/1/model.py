"""Picks its device from the instance it is: ``args["model_instance_kind"]`` (CPU, GPU
or MODEL) and ``args["model_instance_device_id"]``. Two CPU instances; DEVICE tells
which one answered. OUTPUT0 = softmax(INPUT0)."""

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        kind = args["model_instance_kind"]
        device = "cpu" if kind in ("CPU", "MODEL") else f"cuda:{args['model_instance_device_id']}"
        self.device = f"{device} ({args['model_instance_name']})"

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            e = np.exp(x - x.max()) if x.size else x
            probs = (e / e.sum()).astype(np.float32) if x.size else x
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUTPUT0", probs),
                        pb_utils.Tensor("DEVICE", np.array([self.device], dtype=object)),
                    ]
                )
            )
        return responses
