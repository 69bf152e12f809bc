"""A decoupled model: one response per element of IN (OUT = that element, IDX = its
index), each after DELAY[i] milliseconds, sent from a thread; ``execute`` itself waits
WAIT milliseconds before it returns.
"""

import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().copy()
            delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy().copy()
            wait = int(pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()[0])
            if values.shape != delays.shape:
                request.get_response_sender().send(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("IN and DELAY must have the same shape")
                    ),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            thread = threading.Thread(
                target=self.respond, args=(request.get_response_sender(), values, delays)
            )
            thread.start()
            self.threads.append(thread)
            time.sleep(wait / 1000)
        return None

    def respond(self, sender, values, delays):
        for index, (value, delay) in enumerate(zip(values, delays, strict=True)):
            time.sleep(int(delay) / 1000)
            sender.send(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("OUT", np.array([value], dtype=np.int32)),
                        pb_utils.Tensor("IDX", np.array([index], dtype=np.uint32)),
                    ]
                )
            )
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join()
