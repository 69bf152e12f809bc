"""A decoupled model whose behaviour is picked per request by MODE (see MODES)."""
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def data(i):
    return pb_utils.InferenceResponse([
        pb_utils.Tensor("OUT", np.array([i], dtype=np.int32)),
        pb_utils.Tensor("TEXT", np.array([f"r{i}"], dtype=object)),
    ])


def error(text, code=None):
    code = pb_utils.TritonError.INTERNAL if code is None else code
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(text, code))


class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            sender = request.get_response_sender()
            if mode == 0:  # n responses, then a bare FINAL
                for i in range(n):
                    sender.send(data(i))
                sender.send(flags=FINAL)
            elif mode == 1:  # n responses, FINAL on the last
                for i in range(n):
                    sender.send(data(i), flags=FINAL if i == n - 1 else 0)
            elif mode == 2:  # only a bare FINAL
                sender.send(flags=FINAL)
            elif mode == 3:  # data, an error in the middle, data + FINAL
                sender.send(data(0))
                sender.send(error("dec error resp", pb_utils.TritonError.INVALID_ARG))
                sender.send(data(2), flags=FINAL)
            elif mode == 4:  # sends one, then returns a list (not allowed)
                sender.send(data(0))
                return [pb_utils.InferenceResponse([]) for _ in requests]
            elif mode == 5:  # sends one, then raises
                sender.send(data(0))
                raise RuntimeError("dec raised after send")
            elif mode == 6:  # FINAL, then raises (only logged)
                sender.send(data(0), flags=FINAL)
                raise RuntimeError("dec raised after final")
            elif mode == 7:  # raises before sending anything
                raise RuntimeError("dec raised first")
            elif mode == 8:  # sending after FINAL is refused
                sender.send(data(0), flags=FINAL)
                try:
                    sender.send(data(1))
                except pb_utils.TritonModelException as e:
                    pb_utils.Logger.log_info(f"after final: {e}")
            elif mode == 9:  # responses from a thread after execute returned
                def later(s=sender, n=n):
                    time.sleep(0.05)
                    for i in range(n):
                        s.send(data(i))
                        time.sleep(0.01)
                    s.send(flags=FINAL)

                t = threading.Thread(target=later)
                t.start()
                self.threads.append(t)
            elif mode == 10:  # an error response as the first response, then data
                sender.send(error("first is an error"))
                sender.send(data(1), flags=FINAL)
            elif mode == 11:  # an error response as the only response
                sender.send(error("only error", pb_utils.TritonError.NOT_FOUND), flags=FINAL)
            elif mode == 12:  # streams until the request is cancelled (the client went away)
                def watch(r=request, s=sender):
                    for i in range(300):
                        if r.is_cancelled():
                            pb_utils.Logger.log_info(f"cancelled after {i} responses")
                            s.send(error("cancelled", pb_utils.TritonError.CANCELLED), flags=FINAL)
                            return
                        s.send(data(i))
                        time.sleep(0.01)
                    s.send(flags=FINAL)

                t = threading.Thread(target=watch)
                t.start()
                self.threads.append(t)
        return None

    def finalize(self):
        for t in self.threads:
            t.join()
