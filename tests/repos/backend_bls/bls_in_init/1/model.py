"""BLS during initialize is refused; RESULT reports the exception text."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        try:
            pb_utils.InferenceRequest(model_name="add_sub", inputs=[], requested_output_names=[]).exec()
            self.text = "no error"
        except pb_utils.TritonModelException as e:
            self.text = str(e)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array([json.dumps(self.text)], dtype=object))]) for _ in requests]
