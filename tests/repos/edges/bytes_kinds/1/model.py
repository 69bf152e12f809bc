import numpy as np

import triton_python_backend_utils as pb_utils

#: one element of each kind a model may put in an object array for a BYTES output
KINDS = [b"raw", np.bytes_(b"npb"), "text", np.str_("nps"), 7, 2.5, bytearray(b"ba"), None]


class TritonPythonModel:
    """Answers with an object array holding elements of every kind (IN is ignored)."""

    def execute(self, requests):
        out = np.empty(len(KINDS), dtype=object)
        out[:] = KINDS
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]) for _ in requests]
