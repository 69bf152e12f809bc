import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """SEEN: what the request carries besides its input (id, parameters, sequence, flags)."""

    def execute(self, requests):
        out = []
        for r in requests:
            seen = {
                "id": r.request_id(),
                "parameters": json.loads(r.parameters()),
                "correlation_id": r.correlation_id(),
                "flags": r.flags(),
                "timeout": r.timeout(),
                "requested": sorted(r.requested_output_names()),
            }
            text = json.dumps(seen, sort_keys=True).encode()
            out.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", np.array([text], object))])
            )
        return out
