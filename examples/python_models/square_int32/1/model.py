"""A decoupled model: for IN = N it sends N responses, each OUT = N, then the FINAL flag
alone (IN = 0 gives no response at all, only the FINAL flag).

The responses are sent from a thread after ``execute`` has returned; ``finalize`` waits
for those threads.
"""

import json
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException(
                f"model {args['model_name']} must use the decoupled transaction policy"
            )
        self.lock = threading.Lock()
        self.in_flight = 0

    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            if n < 0:
                request.get_response_sender().send(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("IN must not be negative")
                    ),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            with self.lock:
                self.in_flight += 1
            threading.Thread(
                target=self.respond, args=(request.get_response_sender(), n), daemon=True
            ).start()
        return None

    def respond(self, sender, n):
        for _ in range(n):
            out = pb_utils.Tensor("OUT", np.array([n], dtype=np.int32))
            sender.send(pb_utils.InferenceResponse([out]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        with self.lock:
            self.in_flight -= 1

    def finalize(self):
        while True:
            with self.lock:
                if self.in_flight == 0:
                    return
            time.sleep(0.01)
