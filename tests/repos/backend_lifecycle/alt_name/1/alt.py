import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        text = json.dumps({"name": __name__, "file": __file__.rsplit("/", 1)[1]})
        return [pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array([text], dtype=object))]) for _ in requests]
