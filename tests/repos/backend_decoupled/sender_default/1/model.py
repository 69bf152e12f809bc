"""A non-decoupled model answering through its response sender (allowed since 24.06)."""
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def data(i):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], dtype=np.int32))])


class TritonPythonModel:
    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        out = []
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            sender = request.get_response_sender()
            if mode == 0:  # send, then FINAL alone; return None for it
                sender.send(data(10))
                sender.send(flags=final)
                out.append(None)
            elif mode == 1:  # send with FINAL; return None
                sender.send(data(11), flags=final)
                out.append(None)
            elif mode == 2:  # send with FINAL and also return a response (refused)
                sender.send(data(12), flags=final)
                out.append(data(99))
            elif mode == 3:  # FINAL before any response: the exception reaches the client
                sender.send(flags=final)
            elif mode == 4:  # two responses: the second send raises
                sender.send(data(1))
                sender.send(data(2))
            elif mode == 5:  # data now, FINAL from a thread later
                sender.send(data(15))
                threading.Thread(target=lambda s=sender: (time.sleep(0.05), s.send(flags=final))).start()
                out.append(None)
            elif mode == 6:  # returned normally
                out.append(data(16))
        return out
