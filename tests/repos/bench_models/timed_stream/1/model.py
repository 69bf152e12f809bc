"""Decoupled, with known timing: waits ``first_ms`` (request parameter, default 50) before
its first response and ``gap_ms`` (default 20) before each later one, sending
``max_tokens`` (default 4) responses of one word each, then the final flag. So the time
to first token is at least ``first_ms`` and the time between tokens at least ``gap_ms``."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            params = json.loads(request.parameters() or "{}")
            first = float(params.get("first_ms", 50)) / 1000.0
            gap = float(params.get("gap_ms", 20)) / 1000.0
            count = int(params.get("max_tokens", 4))
            sender = request.get_response_sender()
            for i in range(count):
                time.sleep(first if i == 0 else gap)
                out = np.array([f"tok{i} ".encode()], dtype=np.object_)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", out)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
