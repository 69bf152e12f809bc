import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        text = json.dumps({"env": os.environ.get("TRITONHTTP_TEST_MODEL_ENV"), "cwd": os.getcwd()})
        return [pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array([text], dtype=object))]) for _ in requests]
