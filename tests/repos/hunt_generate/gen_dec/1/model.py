"""A decoupled model whose sends are picked by MODE (see execute)."""

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def out(i):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.int32))])


def log(what, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
        pb_utils.Logger.log_info(f"{what}: ok")
    except Exception as e:
        pb_utils.Logger.log_info(f"{what}: {type(e).__name__}: {e}")
        return f"{type(e).__name__}: {e}"
    return "ok"


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy().flatten()[0])
            s = request.get_response_sender()
            if mode == 0:  # an empty response, then a bare FINAL
                s.send(pb_utils.InferenceResponse())
                s.send(flags=FINAL)
            elif mode == 1:  # an empty response with FINAL
                s.send(pb_utils.InferenceResponse(), flags=FINAL)
            elif mode == 2:  # send() with nothing at all, then FINAL
                r = log("bare send", s.send)
                s.send(
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor("B", np.array([r.encode()], object))]
                    ),
                    flags=FINAL,
                )
            elif mode == 3:  # an error response that carries outputs, mid-stream
                s.send(out(0))
                s.send(
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor("OUT", np.array([9], np.int32))],
                        error=pb_utils.TritonError("both", pb_utils.TritonError.UNAVAILABLE),
                    )
                )
                s.send(out(2), flags=FINAL)
            elif mode == 4:  # a second FINAL
                s.send(out(0), flags=FINAL)
                log("second final", s.send, flags=FINAL)
            elif mode == 5:  # flags other than FINAL
                r = log("flags 2", s.send, out(0), flags=2)
                s.send(
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor("B", np.array([r.encode()], object))]
                    ),
                    flags=FINAL,
                )
            elif mode == 6:  # BYTES not UTF-8, two elements, in a stream
                s.send(
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor("B", np.array([b"\xff", b"\xc3\xa9"], object))]
                    ),
                    flags=FINAL,
                )
            elif mode == 7:  # a response with parameters
                s.send(
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor("OUT", np.array([1, 2], np.int32))],
                        parameters={"k": "v", "n": 3},
                    ),
                    flags=FINAL,
                )
            elif mode == 8:  # an error response and FINAL, nothing before
                s.send(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("alone", pb_utils.TritonError.UNSUPPORTED)
                    ),
                    flags=FINAL,
                )
            elif mode == 9:  # send a response of the wrong type
                r = log("wrong type", s.send, "nope")
                s.send(
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor("B", np.array([r.encode()], object))]
                    ),
                    flags=FINAL,
                )
            elif mode == 10:  # an output the config does not list
                r = log(
                    "unlisted",
                    s.send,
                    pb_utils.InferenceResponse([pb_utils.Tensor("ZZ", np.array([1], np.int32))]),
                )
                s.send(flags=FINAL)
            elif mode == 11:  # error with no FINAL then FINAL
                s.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("e1")))
                s.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("e2")), flags=FINAL)
            elif mode == 12:  # raises before sending anything
                raise RuntimeError("raised")
            elif mode == 13:  # sends FINAL, then raises
                s.send(out(0), flags=FINAL)
                raise RuntimeError("raised after final")
        return None
