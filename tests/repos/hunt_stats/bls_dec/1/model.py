"""Decoupled BLS caller: MODE 0 streams ``dec``'s three responses on, one response per
BLS response; MODE 1 calls ``callee`` with IN=-1 and answers with its error; MODE 2
calls ``callee`` and sends only the FINAL flag."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _result(value):
    text = json.dumps(value).encode()
    return pb_utils.InferenceResponse(
        [pb_utils.Tensor("RESULT", np.array([text], dtype=np.object_))]
    )


def _call(model, value, batched):
    data = np.array([[value]] if batched else [value], dtype=np.int32)
    return pb_utils.InferenceRequest(
        model_name=model, inputs=[pb_utils.Tensor("IN", data)], requested_output_names=["OUT"]
    )


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            sender = request.get_response_sender()
            if mode == 0:
                for r in _call("dec", 3, False).exec(decoupled=True):
                    out = pb_utils.get_output_tensor_by_name(r, "OUT")
                    if out is not None:
                        sender.send(_result(out.as_numpy().tolist()))
                sender.send(flags=FINAL)
            elif mode == 1:
                r = _call("callee", -1, True).exec()
                sender.send(pb_utils.InferenceResponse(error=r.error()), flags=FINAL)
            else:
                _call("callee", 2, True).exec()
                sender.send(flags=FINAL)
        return None
