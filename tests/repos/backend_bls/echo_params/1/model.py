"""OUT: what the request carried (id, correlation id, flags, timeout, parameters, outputs)."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            text = json.dumps({
                "id": r.request_id(), "corr": r.correlation_id(), "flags": r.flags(),
                "timeout": r.timeout(), "params": json.loads(r.parameters()),
                "requested": sorted(r.requested_output_names()),
            }, sort_keys=True)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([text], dtype=object))]))
        return out
