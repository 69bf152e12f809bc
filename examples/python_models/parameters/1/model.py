"""Request parameters reach the model as a JSON text (``request.parameters()``); config
parameters come inside ``args["model_config"]``. PARAMETERS echoes the former,
CONFIG_PARAMETER the config's "greeting"."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.greeting = config["parameters"]["greeting"]["string_value"]

    def execute(self, requests):
        responses = []
        for request in requests:
            params = json.loads(request.parameters())
            text = json.dumps(params, sort_keys=True)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("PARAMETERS", np.array([text], dtype=object)),
                        pb_utils.Tensor(
                            "CONFIG_PARAMETER", np.array([self.greeting], dtype=object)
                        ),
                    ]
                )
            )
        return responses
