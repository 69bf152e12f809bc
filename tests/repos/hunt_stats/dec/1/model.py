"""Decoupled: IN=n>0 sends n responses then a lone FINAL flag; 0 only the FINAL flag;
-1 an error response with FINAL; -2 raises; -3 a response, then an error response with
FINAL; -4 n=1 response carrying FINAL; -5 a response and FINAL from a thread 0.3 s after
``execute`` returned."""

import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _out(i):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], dtype=np.int32))])


class TritonPythonModel:
    def _late(self, sender):
        time.sleep(0.3)
        sender.send(_out(5))
        sender.send(flags=FINAL)

    def execute(self, requests):
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()[0])
            sender = r.get_response_sender()
            if n == -2:
                raise ValueError("dec failure")
            if n == -1:
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("dec error")), flags=FINAL
                )
                continue
            if n == -3:
                sender.send(_out(7))
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("dec error")), flags=FINAL
                )
                continue
            if n == -5:
                threading.Thread(target=self._late, args=(sender,)).start()
                continue
            if n == -4:
                sender.send(_out(9), flags=FINAL)
                continue
            for i in range(n):
                sender.send(_out(i))
            sender.send(flags=FINAL)
        return None
