"""BYTES in, BYTES out: upper-cases UTF-8 strings and reports their lengths in characters."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        pb_utils.Logger.log_info(f"{args['model_instance_name']}: {len(config['output'])} outputs")

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            decoded = [t.decode("utf-8") for t in text.reshape(-1)]
            upper = np.array([s.upper().encode("utf-8") for s in decoded], dtype=object)
            length = np.array([len(s) for s in decoded], dtype=np.int32)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("UPPER", upper.reshape(text.shape)),
                        pb_utils.Tensor("LENGTH", length.reshape(text.shape)),
                    ]
                )
            )
        return responses

    def finalize(self):
        pb_utils.Logger.log_info("text_upper unloaded")
